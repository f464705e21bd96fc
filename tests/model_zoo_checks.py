"""Training-loop comparison for the third-party model libraries' tests (test_x_transformers,
test_vector_quantize, test_vit_pytorch, ...): one model, copied to tpu, trained side by side
with its CPU original.

A library's random draws (dropout, sampled codes, k-means seeds) come from the device's own
generator, so the cases given here switch them off or make them deterministic; everything
else must match CPU: the loss, which parameters get a gradient and its value, the parameters
and buffers (EMA codebooks, running statistics) after each optimizer step."""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
from conftest import TPU, assert_same

import torchtpu


def _sgd(params):
    return torch.optim.SGD(params, lr=0.05)


def check_training(make: Callable[[], torch.nn.Module],
                   loss_of: Callable[[torch.nn.Module, str], torch.Tensor], *,
                   steps: int = 2, optimizer=_sgd, mode: str = "strict",
                   rtol: float = 1e-4, atol: float = 1e-4) -> None:
    """``loss_of(model, device)`` for ``steps`` optimizer steps of ``make()`` on CPU and of a
    copy of it on tpu (eager ``mode``, or "compile": the loss under torch.compile in strict
    eager). SGD by default: Adam's normalisation turns a gradient that is zero up to rounding
    (a softmax-invariant bias) into a full-size step whose sign is rounding noise."""
    torch.manual_seed(0)
    cpu_model = make()
    tpu_model = copy.deepcopy(cpu_model).to(TPU)
    opt_cpu, opt_tpu = optimizer(cpu_model.parameters()), optimizer(tpu_model.parameters())
    loss_on_tpu = torch.compile(loss_of, backend="tpu") if mode == "compile" else loss_of
    with torchtpu.set_eager_mode("strict" if mode == "compile" else mode):
        for step in range(steps):
            loss_cpu, loss_tpu = loss_of(cpu_model, "cpu"), loss_on_tpu(tpu_model, TPU)
            assert_same(loss_tpu, loss_cpu, rtol=rtol, atol=atol)
            loss_cpu.backward()
            loss_tpu.backward()
            for (name, p_cpu), p_tpu in zip(cpu_model.named_parameters(),
                                            tpu_model.parameters(), strict=True):
                assert (p_tpu.grad is None) == (p_cpu.grad is None), name
                if p_cpu.grad is not None:
                    try:
                        assert_same(p_tpu.grad, p_cpu.grad, rtol=10 * rtol, atol=10 * atol)
                    except AssertionError as e:
                        raise AssertionError(f"step {step}, gradient of {name}: {e}") from e
            for opt in (opt_cpu, opt_tpu):
                opt.step()
                opt.zero_grad()
        state_cpu = dict(cpu_model.named_parameters()) | dict(cpu_model.named_buffers())
        state_tpu = dict(tpu_model.named_parameters()) | dict(tpu_model.named_buffers())
        assert state_tpu.keys() == state_cpu.keys()
        for name, value in state_cpu.items():
            try:
                assert_same(state_tpu[name], value, rtol=10 * rtol, atol=10 * atol)
            except AssertionError as e:
                raise AssertionError(f"after {steps} steps, {name}: {e}") from e


def check_outputs(fn: Callable[[str], object], **tol) -> None:
    """``fn(device)`` gives the same tensors (and numbers) on tpu as on CPU."""
    expected = fn("cpu")
    actual = fn(TPU)
    assert_same(actual, expected, **(tol or dict(rtol=1e-4, atol=1e-5)))


def assert_same_gradients(actual: torch.nn.Module, expected: torch.nn.Module, **tol) -> None:
    """``actual``'s (tpu) parameter gradients equal ``expected``'s (CPU): None where CPU's is."""
    for p, q in zip(expected.parameters(), actual.parameters(), strict=True):
        assert (p.grad is None) == (q.grad is None)
        if p.grad is not None:
            assert_same(q.grad, p.grad, **tol)


def assert_same_parameters(actual: torch.nn.Module, expected: torch.nn.Module, **tol) -> None:
    """``actual``'s (tpu) parameters equal ``expected``'s (CPU)."""
    for p, q in zip(expected.parameters(), actual.parameters(), strict=True):
        assert_same(q, p, **tol)
