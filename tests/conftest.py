"""Shared test helpers: every check compares the 'tpu' device with PyTorch on CPU."""

from __future__ import annotations

import pytest
import torch

import torchtpu  # noqa: F401  (registers the device)

TPU = "tpu:0"


def to_cpu(x):
    if isinstance(x, torch.Tensor):
        return x.detach().cpu() if x.device.type != "cpu" else x.detach()
    if isinstance(x, (list, tuple)):
        return type(x)(to_cpu(v) for v in x)
    return x


def assert_same(actual, expected, *, rtol=1.3e-6, atol=1e-5, check_dtype=True):
    """``actual`` (from tpu) equals ``expected`` (from CPU): values, dtype and shape."""
    actual, expected = to_cpu(actual), to_cpu(expected)
    if isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected, strict=False):
            assert_same(a, e, rtol=rtol, atol=atol, check_dtype=check_dtype)
        return
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"expected a tensor, got {type(actual)}"
        torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True,
                                   check_dtype=check_dtype)
    else:
        assert actual == pytest.approx(expected, rel=rtol, abs=atol)


def run_both(fn, *inputs, **kwargs):
    """Run ``fn`` on CPU copies and on tpu copies of ``inputs``; compare the results."""
    cpu = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    tpu = [x.to(TPU) if isinstance(x, torch.Tensor) else x for x in inputs]
    expected = fn(*cpu)
    actual = fn(*tpu)
    assert_same(actual, expected, **kwargs)
    return actual, expected


def raises_as_cpu(bad, exc: type = RuntimeError, *, tpu_kernels: bool = False) -> None:
    """``bad(device)`` raises the same exception type, a kind of ``exc``, with the same
    message on tpu as on CPU (``tpu_kernels``: a kernel named ``*_cpu`` there is ``*_tpu``
    here, as the integer ops' rules name theirs)."""
    with pytest.raises(exc) as on_cpu:
        bad("cpu")
    with pytest.raises(exc) as on_tpu:
        bad("tpu")
    assert type(on_tpu.value) is type(on_cpu.value)
    expected = str(on_cpu.value)
    message = str(on_tpu.value).split("\n[torchtpu debug]")[0]  # debug mode's line added
    assert message == (expected.replace("_cpu", "_tpu") if tpu_kernels else expected)


@pytest.fixture(autouse=True)
def _eager_mode_left_as_found():
    """A test that leaves another eager mode behind fails (and the mode is put back): the
    tests after it in the same worker would run in it unawares."""
    before = torchtpu.get_eager_mode()
    yield
    after = torchtpu.get_eager_mode()
    if after != before:
        torchtpu.set_eager_mode(before)
        pytest.fail(f"the test left the eager mode at {after!r} (it was {before!r})")


@pytest.fixture(params=["strict", "debug", "fused"])
def eager_mode(request):
    with torchtpu.set_eager_mode(request.param):
        yield request.param


def compare_with_gradients(fn, *inputs, grad=True, rtol=1e-4, atol=1e-4):
    """``fn`` on CPU and on tpu copies of ``inputs``: outputs, then the gradients of a fixed
    cotangent with respect to the floating inputs."""
    def leaves(device):
        return [x.detach().to(device).requires_grad_(grad and x.is_floating_point())
                for x in inputs]

    cpu_in, tpu_in = leaves("cpu"), leaves(TPU)
    expected, actual = fn(*cpu_in), fn(*tpu_in)
    assert_same(actual, expected, rtol=rtol, atol=atol)
    expected = [expected] if isinstance(expected, torch.Tensor) else list(expected)
    actual = [actual] if isinstance(actual, torch.Tensor) else list(actual)
    outs = [i for i, e in enumerate(expected) if e.requires_grad]
    wrt = [i for i, x in enumerate(cpu_in) if x.requires_grad]
    if not (grad and outs and wrt):
        return
    g = torch.Generator().manual_seed(1)
    cotangents = [torch.randn(expected[i].shape, generator=g) for i in outs]
    grads_cpu = torch.autograd.grad([expected[i] for i in outs], [cpu_in[i] for i in wrt],
                                    cotangents, allow_unused=True)
    grads_tpu = torch.autograd.grad([actual[i] for i in outs], [tpu_in[i] for i in wrt],
                                    [c.to(TPU) for c in cotangents], allow_unused=True)
    for a, e in zip(grads_tpu, grads_cpu, strict=True):
        assert (a is None) == (e is None)
        if e is not None:
            assert_same(a, e, rtol=10 * rtol, atol=10 * atol)
