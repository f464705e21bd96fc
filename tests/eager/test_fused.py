"""Fused eager: recorded ops run as one cached program per sync point, same results."""

from __future__ import annotations

import gc
from collections import OrderedDict

import pytest
import torch
from conftest import TPU, assert_same

import torchtpu
from torchtpu.models.gpt import GPT, GPTConfig


@pytest.fixture
def fused():
    with torchtpu.set_eager_mode("fused"):
        yield


def _programs(kind: str) -> int:
    return torchtpu.metrics()[kind].get("fused_program", 0)


def _train(device: str, mode: str, steps: int):
    with torchtpu.set_eager_mode(mode):
        torch.manual_seed(0)
        cfg = GPTConfig(vocab_size=61, block_size=16, n_layer=2, n_head=2, n_embd=32,
                        dropout=0.1)
        model = GPT(cfg).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        gen = torch.Generator().manual_seed(3)
        losses, compiles = [], []
        for _ in range(steps):
            x = torch.randint(0, 61, (4, 16), generator=gen).to(device)
            _, loss = model(x, x)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.append(loss.item())
            compiles.append(_programs("compile"))
        return losses, compiles


def test_training_equals_strict_and_compiles_once():
    torchtpu.reset_metrics()
    fused, compiles = _train("tpu", "fused", 10)
    strict, _ = _train("tpu", "strict", 10)
    assert fused == pytest.approx(strict, rel=1e-5)  # dropout included: same random stream
    # Step 1 (no optimizer state yet) and step 2 differ; from step 3 on nothing compiles.
    assert compiles[2] == compiles[-1]
    assert _programs("execute") >= 10


def test_matches_cpu_without_dropout(fused):
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=61, block_size=16, n_layer=2, n_head=2, n_embd=32)
    losses = {}
    for device in ("cpu", "tpu"):
        torch.manual_seed(0)
        model = GPT(cfg).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        x = torch.arange(64).reshape(4, 16).remainder(61).to(device)
        out = []
        for _ in range(10):
            _, loss = model(x, x)
            loss.backward()
            opt.step()
            opt.zero_grad()
            out.append(loss.item())
        losses[device] = out
    assert losses["tpu"] == pytest.approx(losses["cpu"], rel=1e-4)


def _gpt_step_recorder():
    """A tiny GPT on tpu and a function recording one training step (returns its loss)."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=61, block_size=16, n_layer=2, n_head=2, n_embd=32))
    model.to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x = torch.arange(64).reshape(4, 16).remainder(61).to("tpu")

    def step():
        _, loss = model(x, x)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    return model, step


def test_a_forced_loss_runs_first_and_the_rest_after_it():
    # loss.item() after backward and the optimizer step: the ops the loss needs run as one
    # program, the rest as a second one dispatched after it (the caller has its loss while
    # the rest runs); both cached, the parameters those of strict mode.
    models = {}
    for mode in ("strict", "fused"):
        with torchtpu.set_eager_mode(mode):
            model, step = _gpt_step_recorder()
            for _ in range(3):
                loss = step()
                torchtpu.reset_metrics()
                loss.item()
                if mode == "fused":
                    assert _programs("execute") == 2
            assert _programs("compile") == 0  # the third step's two programs: cached
            models[mode] = model
    # (AdamW turns the key bias's zero gradient, rounding noise in either mode, into steps
    # of up to ~1e-5 here: hence atol.)
    for a, b in zip(models["fused"].parameters(), models["strict"].parameters(), strict=True):
        torch.testing.assert_close(a.detach().cpu(), b.detach().cpu(), rtol=1e-4, atol=1e-4)


def test_a_loop_without_syncs_is_cut_at_optimizer_steps(monkeypatch):
    # No .item() per step: the size limit alone would cut the trace at a new place in the
    # step each time, a new program per cut. Optimizer steps cut it where iterations meet
    # (here the limit falls inside the steps as well), so the programs repeat.
    monkeypatch.setenv("TORCHTPU_FUSED_MAX_OPS", "101")
    losses = {}
    for mode in ("strict", "fused"):
        with torchtpu.set_eager_mode(mode):
            _, step = _gpt_step_recorder()
            pending, compiles = [], []
            for _ in range(12):
                pending.append(step())
                compiles.append(_programs("compile"))
            losses[mode] = [loss.item() for loss in pending]
    assert compiles[5] == compiles[-1]
    assert losses["fused"] == pytest.approx(losses["strict"], rel=1e-5)


def test_a_loop_without_syncs_or_optimizer_steps_repeats_its_programs(monkeypatch):
    # An eval loop summing its losses: only the size limit cuts it. Once a cut has shown the
    # loop's period, the cuts fall at one place in the loop body: the programs repeat.
    monkeypatch.setenv("TORCHTPU_FUSED_MAX_OPS", "300")
    torchtpu.reset_metrics()
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=61, block_size=16, n_layer=1, n_head=2, n_embd=16)).eval()
    x = torch.randint(0, 61, (2, 9))
    with torch.no_grad():
        expected = sum(model(x[:, :-1], x[:, 1:])[1] for _ in range(40))
    model.to("tpu")
    with torchtpu.set_eager_mode("fused"), torch.no_grad():
        x = x.to("tpu")
        total, compiles = torch.zeros((), device="tpu"), []
        for _ in range(40):
            total = total + model(x[:, :-1], x[:, 1:])[1]
            compiles.append(_programs("compile"))
        assert total.item() == pytest.approx(expected.item(), rel=1e-5)
    assert compiles[20] == compiles[-1] <= 3  # the first trace, the first cut's, the rest's


def test_one_program_per_sync_point_without_the_split(monkeypatch):
    monkeypatch.setenv("TORCHTPU_FUSED_SPLIT", "0")
    with torchtpu.set_eager_mode("fused"):
        _, step = _gpt_step_recorder()
        loss = step()
        torchtpu.reset_metrics()
        loss.item()
        assert _programs("execute") == 1


def test_shape_inference_records_nothing(fused, monkeypatch):
    # The first new_zeros of a signature is traced for its shapes, which runs PyTorch's meta
    # check: with the device left as tpu, PyTorch built (and fused eager recorded) a real
    # empty + fill. Recordings then differed between a process that traced shapes and one
    # that loaded them from the program store.
    from torchtpu.eager import fused as recorder

    monkeypatch.setattr(recorder, "_AVALS", {})  # trace every shape here, in memory and
    monkeypatch.setattr(recorder.program_store, "enabled", lambda: False)  # not from disk
    x = torch.ones(3, device="tpu")
    x.cpu()
    y = x.new_zeros((5, 7), device="tpu")
    z = x.new_full((2, 3), 1.5, device=x.device)
    assert [node[0].key for node in recorder._trace.nodes] == [
        "rule:aten.new_zeros.default", "rule:aten.new_full.default"]
    assert y.cpu().eq(0).all() and z.cpu().eq(1.5).all()


def test_an_op_that_fails_to_record_leaves_the_trace_as_it_was(fused):
    # Its inputs stayed in the trace: a number jax could not take failed the next, unrelated
    # program.
    from torchtpu.eager import fused as recorder

    x, w = torch.ones(1, 2, 5, device="tpu"), torch.ones(3, 2, 2, device="tpu")
    x.cpu(), w.cpu()  # computed: arrays the next op takes as inputs
    y = x * 3
    before = len(recorder._trace.leaves)
    with pytest.raises(RuntimeError, match="negative padding"):  # raised as its rule traces
        torch.nn.functional.conv1d(x, w, padding=-1)
    assert len(recorder._trace.leaves) == before
    assert (y + 1).sum().item() == 40.0


def test_ops_recorded_under_another_default_dtype_compute_in_it(fused):
    # Rules read the default dtype as they are traced, at the flush: recorded under float64
    # and flushed under float32, a division gave float64 with float32's values.
    try:
        torch.set_default_dtype(torch.float64)
        third = torch.tensor([1, 3], device="tpu") / 3
        root = torch.arange(3, device="tpu").sqrt()
    finally:
        torch.set_default_dtype(torch.float32)
    assert third.tolist() == [1 / 3, 1.0]
    assert root.tolist() == [0.0, 1.0, 2**0.5]


def test_nothing_runs_until_a_sync_point(fused):
    torchtpu.reset_metrics()
    x = torch.arange(6.0, device="tpu")
    y = (x * 2).sin().cumsum(0)
    assert _programs("execute") == 0
    assert y[-1].item() == pytest.approx(torch.arange(6.0).mul(2).sin().cumsum(0)[-1].item())
    assert _programs("execute") == 1


@pytest.mark.parametrize(
    "sync",
    [
        lambda t: t.item() if t.numel() == 1 else t.sum().item(),
        lambda t: t.cpu(),
        lambda t: t.tolist(),
        lambda t: repr(t),
        lambda t: t.nonzero(),
        lambda t: t[t > 1],
        lambda t: torch.tpu.synchronize(),
        lambda t: torchtpu.sync(),
    ],
)
def test_sync_points(sync, fused):
    torchtpu.reset_metrics()
    t = torch.arange(4.0, device="tpu") + 1
    sync(t)
    assert _programs("execute") == 1


@pytest.mark.parametrize("lookup", [
    lambda w, i: w.gather(0, i[:, None].expand(-1, w.shape[1])),
    lambda w, i: w[i],
    lambda w, i: w.index_select(0, i),
    lambda w, i: torch.nn.functional.embedding(i, w),
], ids=["gather", "index", "index_select", "embedding"])
def test_a_scattered_gradient_accumulates_as_in_strict_eager(lookup):
    # The scatter-add into zeros and the other path's gradient are summed apart (XLA would
    # fold them into one scatter, another order where indices repeat).
    def weight_grad(mode):
        with torchtpu.set_eager_mode(mode):
            gen = torch.Generator().manual_seed(0)
            w = torch.randn(64, 32, generator=gen).to("tpu").requires_grad_()
            idx = torch.randint(0, 64, (4000,), generator=gen).to("tpu")
            up, other = torch.randn(4000, 32, generator=gen), torch.randn(64, 32, generator=gen)
            ((lookup(w, idx) * up.to("tpu")).sum() + (w * other.to("tpu")).sum()).backward()
            return w.grad.cpu()

    assert torch.equal(weight_grad("fused"), weight_grad("strict"))


# Chains XLA would rewrite as one expression inside a program (a * rsqrt(b), a * exp(-b),
# exp(a + b), a, a multiplication by 1/b), each some ulps from the ops computed apart.
REWRITTEN = {
    "x / y.sqrt()": lambda x, y: x / y.sqrt(),
    "y.sqrt().reciprocal()": lambda x, y: y.sqrt().reciprocal(),
    "x / y.exp()": lambda x, y: x / y.exp(),
    "x.exp() * y.exp()": lambda x, y: x.exp() * y.exp(),
    "x.exp().log()": lambda x, y: x.exp().log(),
    "x / x.norm(keepdim)": lambda x, y: x / x.norm(dim=-1, keepdim=True),
}


@pytest.mark.parametrize("chain", REWRITTEN.values(), ids=REWRITTEN.keys())
def test_a_chain_xla_would_rewrite_is_computed_as_in_strict_eager(chain):
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(64, 96, generator=gen), torch.rand(64, 96, generator=gen) + 0.5
    strict = chain(x.to("tpu"), y.to("tpu")).cpu()
    with torchtpu.set_eager_mode("fused"):
        fused = chain(x.to("tpu"), y.to("tpu")).cpu()
    assert torch.equal(fused, strict)


def test_views_and_inplace_inside_one_program(fused):
    a = torch.arange(12.0, device="tpu").reshape(3, 4)
    a[1].add_(100)
    col = a.t()[2]
    a.mul_(2)
    expected = torch.arange(12.0).reshape(3, 4)
    expected[1].add_(100)
    expected.mul_(2)
    torch.testing.assert_close(col.cpu(), expected.t()[2])
    torch.testing.assert_close(a.cpu(), expected)


@pytest.mark.parametrize("writes", [
    lambda x: (x.__setitem__(1, x[1].flip(0)), x.add_(1), x[1].add_(100)),
    lambda x: (x[1].mul_(x[1].clone().flip(0)), x.add_(1), x[1].add_(100)),
    lambda x: (x.__setitem__((1, slice(1, None)), x[1, :-1].clone()), x.add_(1), x[1].add_(3)),
], ids=["flip", "mul_flipped", "shift"])
def test_a_view_written_from_its_own_elements_inside_one_program(fused, writes):
    # XLA:CPU wrote such an update in place while the same fusion still read the old
    # elements (openxla/xla#49176)
    x = torch.arange(12.0).reshape(2, 6)
    on_tpu = x.to(TPU)
    writes(x)
    writes(on_tpu)
    assert_same(on_tpu, x)


def test_switching_modes_leaves_no_pending_values():
    from torchtpu.runtime.execute import Pending
    from torchtpu.tensor import Storage, TpuTensor

    with torchtpu.set_eager_mode("fused"):
        x = torch.ones(3, device="tpu") * 5
        y = x[1:]
        z = (x * 2).t()
        z.add_(1)
        assert x.sum().item() == 15  # a program ran: x's value is computed, still recorded
        w, v = x[:2], z.view(3)  # views of computed values
        u = torch.ones(4, 4, device="tpu").t()[1]
    assert torchtpu.get_eager_mode() == "strict"
    held = [o for o in gc.get_objects() if type(o) is Storage
            and Pending in (type(o._value), type((o._layout or (None,))[0]))]
    held += [o for o in gc.get_objects() if issubclass(type(o), TpuTensor)
             and type(getattr(o, "_cache", None)) is Pending]
    assert held == []
    assert (x + y.sum()).cpu().tolist() == [15.0, 15.0, 15.0]
    assert (w + v[:2] + u[:2]).cpu().tolist() == [17.0, 17.0]


def test_size_limit_flushes(monkeypatch, fused):
    monkeypatch.setenv("TORCHTPU_FUSED_MAX_OPS", "10")
    with torchtpu.set_eager_mode("fused"):
        torchtpu.reset_metrics()
        x = torch.zeros(4, device="tpu")
        for _ in range(25):
            x = x + 1
        assert _programs("execute") >= 2
        assert x.sum().item() == 100


@pytest.mark.parametrize("donate", [True, False])
def test_inputs_updated_in_place_are_donated(donate, fused, monkeypatch):
    from torchtpu.eager import fused as fused_mode

    monkeypatch.setattr(fused_mode, "_donate", donate)
    w = torch.ones(1000, device="tpu")
    kept = torch.ones(3, device="tpu")
    torch.tpu.synchronize()
    torchtpu.reset_metrics()
    w.mul_(2).add_(1)  # w's old value is referenced by nothing but the trace now
    (kept * 2).sum()  # kept is still referenced: never donated
    torch.tpu.synchronize()
    donated = torchtpu.metrics()["execute"].get("donated_buffers", 0)
    assert donated == (1 if donate else 0)
    assert w.sum().item() == 3000 and kept.sum().item() == 3


def test_equal_numbers_of_other_types_are_other_calls():
    # 3 == 3.0 and hashes alike: a recorded arange(3) must not answer arange(3.0).
    with torchtpu.set_eager_mode("fused"):
        ints, floats = torch.arange(3, device="tpu"), torch.arange(3.0, device="tpu")
        steps = torch.arange(0, 4, 1, device="tpu"), torch.arange(0.0, 4, 1, device="tpu")
        assert (ints.dtype, floats.dtype) == (torch.int64, torch.float32)
        assert [s.dtype for s in steps] == [torch.int64, torch.float32]
        assert_same(floats, torch.arange(3.0))


def test_an_input_updated_in_place_keeps_its_buffer(fused):
    # JAX gives a donated buffer to the first output of its shape: here ``g``, so without
    # pairing XLA would copy ``p`` before overwriting it (every parameter, in a training step).
    from torchtpu.runtime.execute import concrete
    from torchtpu.tensor import read

    p = torch.ones(1000, device="tpu")
    x = torch.full((1000,), 2.0, device="tpu")
    torch.tpu.synchronize()
    before = concrete(read(p)).unsafe_buffer_pointer()
    g = x * 3
    p.sub_(g)
    torch.tpu.synchronize()
    assert concrete(read(p)).unsafe_buffer_pointer() == before
    assert p.sum().item() == -5000 and g.sum().item() == 6000


@pytest.mark.parametrize("reader", ["dot", "view_then_dot"])
def test_a_weight_read_then_updated_is_not_copied(reader, fused, monkeypatch):
    # A weight the backward's dot reads and the optimizer step then updates: unordered, XLA
    # copies the whole weight first to update it in place (twice its memory, every step).
    from torchtpu.eager import fused as fused_mode

    monkeypatch.setattr(fused_mode, "_PROGRAMS", OrderedDict())
    monkeypatch.setattr(fused_mode.program_store, "enabled", lambda: False)  # traced, not loaded
    built = []
    build = fused_mode._loaded_or_traced
    monkeypatch.setattr(fused_mode, "_loaded_or_traced",
                        lambda t, *a: built.append((t, build(t, *a))) or built[-1][1])
    torch.manual_seed(0)
    p_cpu, x_cpu = torch.randn(64, 32), torch.randn(16, 64)
    p, x = p_cpu.to("tpu"), x_cpu.to("tpu")
    torch.tpu.synchronize()
    reads = {"dot": lambda w, a: a @ w, "view_then_dot": lambda w, a: w.t() @ a.t()}[reader]
    y = reads(p, x)
    p.sub_(p * 0.5 + 1.0)
    torch.tpu.synchronize()
    assert_same(y, reads(p_cpu, x_cpu), rtol=1e-5)
    assert_same(p, p_cpu - (p_cpu * 0.5 + 1.0))
    t, program = built[-1]
    text = program.lower(*map(fused_mode._abstract, t.leaves)).compile().as_text()
    assert "f32[64,32]{1,0} copy(" not in text


def test_ordering_an_update_after_other_reads_keeps_every_value(fused):
    # The update waits on the other readers' results through a comparison that is never
    # true, whatever they hold (NaN, inf); the leaf goes through unchanged, -0.0 included.
    special = torch.tensor([-0.0, float("nan"), float("inf"), -float("inf"), 3.0])
    p = special.to("tpu")
    torch.tpu.synchronize()
    readers = [p * float("inf"), p.sum(), p.nan_to_num() @ torch.ones(5, device="tpu")]
    p.mul_(1.0)
    torch.tpu.synchronize()
    assert_same(p, special * 1.0)
    assert torch.equal(torch.signbit(p.cpu()), torch.signbit(special))
    assert_same(readers[0], special * float("inf"))
    assert_same(readers[1], special.sum())


def test_a_forced_value_leaves_views_of_inputs_to_the_rest(fused, monkeypatch):
    # A linear layer's weight.t(), read by the forward and again by the backward: the
    # backward's program transposes the weight again (free inside its dot) rather than
    # taking a transposed copy from the forward's program.
    from torchtpu.eager import fused as fused_mode

    monkeypatch.setattr(fused_mode, "_MIN_TAIL", 0)
    splits = []
    split = fused_mode._split
    monkeypatch.setattr(fused_mode, "_split",
                        lambda *a: splits.append(split(*a)) or splits[-1])
    grads = {}
    for device in ("cpu", "tpu"):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                    torch.nn.Linear(16, 4)).to(device)
        loss = model(torch.randn(5, 8).to(device)).square().sum()
        loss.backward()
        loss.item()
        grads[device] = [p.grad for p in model.parameters()]
    head, _, links = splits[-1]
    assert links  # the activations the backward needs
    views_of_leaves = [i for i, _ in links if head.nodes[i][0].is_view
                       and all(type(w) is int for w in head.nodes[i][4])]
    assert views_of_leaves == []
    for a, b in zip(grads["tpu"], grads["cpu"], strict=True):
        torch.testing.assert_close(a.cpu(), b)


def test_a_views_pending_value_is_not_a_program_output(fused, monkeypatch):
    # The view reads its value from its base again when next read.
    from torchtpu.eager import fused as fused_mode

    outputs = []
    order = fused_mode._alias_order
    monkeypatch.setattr(fused_mode, "_PROGRAMS", OrderedDict())  # the program is built, not reused
    monkeypatch.setattr(fused_mode, "_alias_order",
                        lambda t, needed, donated: outputs.append(needed) or order(t, needed,
                                                                                 donated))
    w = torch.arange(12.0).reshape(4, 3).to("tpu")
    torch.tpu.synchronize()
    wt = w.t()
    y = wt * 2
    torch.tpu.synchronize()
    assert len(outputs[-1]) == 1  # y
    assert_same(y, torch.arange(12.0).reshape(4, 3).t() * 2)
    assert_same(wt, torch.arange(12.0).reshape(4, 3).t())


def test_leaving_fused_mode_with_channels_last_results():
    # A channels_last result's storage holds its value in memory order, arranged when read:
    # leaving fused mode must not arrange a pending value with the strict path.
    conv = torch.nn.Conv2d(3, 4, 3)
    x = torch.randn(2, 3, 8, 8).to(memory_format=torch.channels_last)
    tpu_conv = torch.nn.Conv2d(3, 4, 3).to(TPU)
    tpu_conv.load_state_dict(conv.state_dict())
    tpu_conv.to(memory_format=torch.channels_last)
    with torchtpu.set_eager_mode("fused"):
        y = tpu_conv(x.to(TPU))
        y.sum().backward()
    y_cpu = conv.to(memory_format=torch.channels_last)(x)
    y_cpu.sum().backward()
    assert y.is_contiguous(memory_format=torch.channels_last)
    assert_same(y, y_cpu, rtol=1e-5)
    assert_same(tpu_conv.weight.grad, conv.weight.grad, rtol=1e-4, atol=1e-4)


def test_load_state_dict_after_an_inplace_update(fused):
    # A state dict's entries are detached views of the parameters; swap_tensors (which
    # load_state_dict uses on tpu, as model.to does) refuses a tensor with weak references.
    model = torch.nn.Linear(4, 2).to(TPU)
    with torch.no_grad():
        model.weight.mul_(2)
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        model.weight.add_(1)
    weight = model.weight
    model.load_state_dict(saved)
    assert model.weight is weight
    assert_same(model.weight, saved["weight"])


_TOO_BIG = 2**45  # float32 elements: 128 TiB


@pytest.mark.parametrize("split", [False, True], ids=["one program", "split"])
def test_a_failed_program_loses_nothing_else(split, fused, monkeypatch):
    # Catching an out-of-memory error and going on (a smaller batch) must find every value
    # that did not depend on the failing op computed, as strict eager leaves them.
    monkeypatch.setattr(torchtpu.eager.fused, "_MIN_TAIL", 1 if split else 10**9)
    w = torch.arange(3.0, device=TPU)
    w.mul_(2)
    big = torch.zeros(_TOO_BIG, device=TPU)
    loss = big.add(1).sum()
    w.add_(1)  # after the forced value: the split's second program
    with pytest.raises(torch.OutOfMemoryError):
        loss.item()
    z = torch.full((3,), 7.0, device=TPU).mul(3)
    assert (w + 100).tolist() == [101.0, 103.0, 105.0]
    assert z.tolist() == [21.0, 21.0, 21.0]
    with pytest.raises(torch.OutOfMemoryError):  # what depends on it raises it again
        loss.item()
    with pytest.raises(torch.OutOfMemoryError):
        big.mul(2)


def test_converting_a_trained_module(fused):
    # .half() after backward swaps each parameter with its converted copy, and swaps their
    # gradients' attributes too: a gradient may be a view fused eager remembers.
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8),
                                torch.nn.Linear(8, 2)).to(TPU)
    opt = torch.optim.AdamW(model.parameters())
    for _ in range(2):
        model(torch.ones(3, 4, device=TPU)).pow(2).sum().backward()
        opt.step()
    weight = model[0].weight
    expected = weight.detach().cpu().half()
    model.half()
    assert model[0].weight is weight
    assert_same(weight.detach().cpu(), expected)


@pytest.mark.parametrize("driver", ["gels", "gelsy", "gelsd", "gelss"])
def test_an_eager_rule_works_on_its_own_programs_results(fused, driver):
    # lstsq's rule (data-dependent rank) reshapes what its jitted solver returns: that runs,
    # it is not recorded
    a, b = torch.randn(2, 5, 4, dtype=torch.float64), torch.randn(2, 5, 2, dtype=torch.float64)
    got = torch.linalg.lstsq(a.to("tpu") * 1, b.to("tpu"), driver=driver)
    for g, c in zip(got, torch.linalg.lstsq(a, b, driver=driver), strict=True):
        torch.testing.assert_close(g.cpu(), c)


def test_a_program_larger_than_the_device_raises_out_of_memory(fused):
    # XLA:CPU failed such a program after dispatch and the wait for its results never ended
    h = torch.randn(8, 8).to("tpu") * 2
    big = torch.zeros(torch.tpu.mem_get_info()[1] // 2, device="tpu") + h.sum()  # 2x the device
    with pytest.raises(torch.OutOfMemoryError):
        h.sum().item()
    with pytest.raises(torch.OutOfMemoryError):
        big.sum().item()  # its op failed: reading it raises again
    assert h.sum().item() == pytest.approx(h.cpu().sum().item(), rel=1e-5)  # the rest computed


def test_compiling_at_every_sync_point_warns_once_in_a_streak(fused, monkeypatch):
    # Shapes that change every step (packed sequences of new lengths) make every sync point
    # a new whole program: far slower than strict eager, which says so.
    from torchtpu.eager import fused as recorder

    monkeypatch.setattr(recorder, "_streak", 0)
    with pytest.warns(UserWarning, match="compiled a new program at each of the last 8") as seen:
        for n in range(3, 3 + 12):
            (torch.randn(n, device=TPU) * 2).sum().item()
    assert len([w for w in seen if "new program" in str(w.message)]) == 1
    for _ in range(3):  # the same shapes again: cached, the streak over
        (torch.randn(4, device=TPU) * 2).sum().item()
    assert recorder._streak == 0


def test_a_steps_first_sync_points_do_not_warn(fused, monkeypatch, recwarn):
    # (a step with many sync points of fixed shapes: each is new the first time, none again)
    from torchtpu.eager import fused as recorder

    monkeypatch.setattr(recorder, "_streak", 0)
    x = torch.randn(5, 3, device=TPU)
    ops = (torch.sin, torch.cos, torch.exp, torch.tanh, torch.sigmoid, torch.relu, torch.neg,
           torch.abs, torch.square, torch.erf)
    for _ in range(2):
        for op in ops:
            (op(x) * 3).sum().item()
    assert not [w for w in recwarn if "new program" in str(w.message)]
