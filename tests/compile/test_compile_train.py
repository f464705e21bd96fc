"""A whole minGPT training step under torch.compile equals PyTorch on CPU."""

from __future__ import annotations

import copy

import torch
from compile_testlib import fresh_dynamo  # noqa: F401  (autouse fixture)
from conftest import TPU

from torchtpu.debug import metrics, reset_metrics
from torchtpu.models.gpt import GPT, GPTConfig


def _train_step(model, opt):
    def step(idx, targets):
        _, loss = model(idx, targets)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    return step


def _compiles() -> int:
    m = metrics()
    return sum(m["compile"].values()) + m["graph"].get("dynamo_graph", 0)


def test_gpt_training_steps_match_cpu_and_second_step_compiles_nothing():
    torch.manual_seed(0)
    cfg = GPTConfig.tiny(vocab_size=96, block_size=32)
    cpu_model = GPT(cfg)
    tpu_model = copy.deepcopy(cpu_model).to(TPU)
    cpu_step = _train_step(cpu_model, torch.optim.AdamW(cpu_model.parameters(), lr=1e-3))
    # capturable: the step counters live on the device (torch.compile sets this for cuda).
    opt = torch.optim.AdamW(tpu_model.parameters(), lr=1e-3, capturable=True)
    tpu_step = torch.compile(_train_step(tpu_model, opt), backend="tpu")
    batches = [
        (torch.randint(0, 96, (4, 24)), torch.randint(0, 96, (4, 24))) for _ in range(10)
    ]
    reset_metrics()
    counts = []
    for idx, targets in batches:
        expected = cpu_step(idx, targets).item()
        actual = tpu_step(idx.to(TPU), targets.to(TPU)).item()
        assert abs(actual - expected) <= 1e-4 * abs(expected)
        counts.append((_compiles(), metrics()["graph"].get("recompile", 0)))
    # Step 1 compiles forward, backward and optimizer; step 2 recompiles the optimizer once
    # (its state now exists, as with any backend); identical steps after it compile nothing.
    assert counts[2:] == [counts[1]] * 8
    assert counts[-1][1] <= 1
    for a, b in zip(tpu_model.parameters(), cpu_model.parameters(), strict=True):
        torch.testing.assert_close(a.detach().cpu(), b.detach(), rtol=1e-4, atol=2e-4)


def test_optimizer_with_step_counters_on_the_host():
    # Without capturable=True (the default) AdamW's step counters are CPU tensors the
    # compiled optimizer graph updates in place: their new values go back to the host.
    torch.manual_seed(0)
    cfg = GPTConfig.tiny(vocab_size=96, block_size=32)
    cpu_model = GPT(cfg)
    tpu_model = copy.deepcopy(cpu_model).to(TPU)
    cpu_opt = torch.optim.AdamW(cpu_model.parameters(), lr=1e-3)
    tpu_opt = torch.optim.AdamW(tpu_model.parameters(), lr=1e-3)
    cpu_step = _train_step(cpu_model, cpu_opt)
    tpu_step = torch.compile(_train_step(tpu_model, tpu_opt), backend="tpu")
    for _ in range(3):
        idx, targets = torch.randint(0, 96, (4, 24)), torch.randint(0, 96, (4, 24))
        expected = cpu_step(idx, targets).item()
        assert abs(tpu_step(idx.to(TPU), targets.to(TPU)).item() - expected) <= 1e-4 * expected
    state = tpu_opt.state[next(iter(tpu_model.parameters()))]
    assert state["step"].device.type == "cpu" and state["step"].item() == 3
    for a, b in zip(tpu_model.parameters(), cpu_model.parameters(), strict=True):
        torch.testing.assert_close(a.detach().cpu(), b.detach(), rtol=1e-4, atol=2e-4)


def _checkpointed_dropout_steps(compiled: bool):
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)
    layer = torch.nn.Linear(4, 4)
    torch.manual_seed(1)
    layer.to(TPU)

    def block(x):
        return torch.nn.functional.dropout(torch.relu(layer(x)), 0.5, training=True) * 2

    def step(x):
        return checkpoint(block, x, use_reentrant=False).sum()

    run = torch.compile(step, backend="tpu") if compiled else step
    x = torch.linspace(-1, 1, 8).reshape(2, 4).to(TPU).requires_grad_()
    out = []
    for _ in range(2):
        loss = run(x)
        loss.backward()
        out += [loss.detach().cpu(), x.grad.cpu(), layer.weight.grad.cpu()]
        x.grad = layer.weight.grad = None
    return out, torch.tpu.get_rng_state()


def test_activation_checkpointing_around_dropout_compiles_and_replays_the_mask():
    # AOTAutograd saves the random stream's state for the recomputation
    # (run_and_save_rng_state / run_with_rng_state): it had no rule on tpu.
    compiled, eager = _checkpointed_dropout_steps(True), _checkpointed_dropout_steps(False)
    for a, b in zip(compiled[0], eager[0], strict=True):
        assert torch.equal(a, b)
    assert torch.equal(compiled[1], eager[1])  # the stream moved as eagerly


def test_rng_replay_runs_op_by_op_too():
    x = torch.linspace(-1, 1, 6, device=TPU)
    dropout = torch.ops.aten.native_dropout.default
    state, (out, _) = torch.ops.higher_order.run_and_save_rng_state(dropout, x, 0.5, True)
    again, _ = torch.ops.higher_order.run_with_rng_state(state, dropout, x, 0.5, True)
    assert torch.equal(out.cpu(), again.cpu())
