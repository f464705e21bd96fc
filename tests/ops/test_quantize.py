"""Fake quantization (QAT) on tpu: CPU's values, masks and gradients, bit for bit."""

from __future__ import annotations

import pytest
import torch
from conftest import TPU, assert_same, raises_as_cpu

_X = torch.randn(64, 8, generator=torch.Generator().manual_seed(0)) * 3
_SCALE = torch.rand(8, generator=torch.Generator().manual_seed(1)) * 0.1 + 0.01
_ZERO = torch.randint(0, 20, (8,), dtype=torch.int32, generator=torch.Generator().manual_seed(2))


@pytest.mark.parametrize("fake_quantize", [
    lambda x: torch.fake_quantize_per_tensor_affine(x, 0.1, 3, 0, 255),
    lambda x: torch.fake_quantize_per_tensor_affine(x, 0.037, 0, -128, 127),
    lambda x: torch.fake_quantize_per_tensor_affine(
        x, torch.tensor(0.1, device=x.device), torch.tensor(3, dtype=torch.int32,
                                                           device=x.device), 0, 255),
    lambda x: torch.fake_quantize_per_channel_affine(
        x, _SCALE.to(x.device), _ZERO.to(x.device), 1, 0, 255),
    lambda x: torch.fake_quantize_per_channel_affine(
        x.T, _SCALE.to(x.device), _ZERO.to(x.device), 0, -128, 127),
], ids=["per_tensor", "per_tensor_signed", "tensor_qparams", "per_channel", "channel_axis_0"])
def test_fake_quantize_and_its_gradient_are_cpus(fake_quantize):
    results = []
    for device in ("cpu", "tpu"):
        x = _X.detach().to(device).requires_grad_()
        out = fake_quantize(x)
        (out * torch.arange(out.numel(), device=device).reshape(out.shape)).sum().backward()
        results.append((out.detach().cpu(), x.grad.cpu()))
    assert torch.equal(results[1][0], results[0][0])
    assert torch.equal(results[1][1], results[0][1])  # zero outside the grid (the mask)


def test_a_fake_quantize_module_trains_its_observer_as_cpu():
    cpu = torch.ao.quantization.FakeQuantize()
    tpu = torch.ao.quantization.FakeQuantize().to("tpu")
    for step in range(3):
        assert torch.equal(tpu(_X.to("tpu") * (step + 1)).cpu(), cpu(_X * (step + 1)))
    assert torch.equal(tpu.scale.cpu(), cpu.scale)
    assert torch.equal(tpu.zero_point.cpu(), cpu.zero_point)


@pytest.mark.parametrize("bad", [
    lambda d: torch.fake_quantize_per_tensor_affine(_X.to(d), 0.1, 3, 10, 5),
    lambda d: torch.fake_quantize_per_tensor_affine(_X.to(d), 0.1, 300, 0, 255),
    lambda d: torch.fake_quantize_per_channel_affine(
        _X.to(d), torch.ones(2, device=d), torch.zeros(8, dtype=torch.int32, device=d), 1, 0,
        255),
], ids=["range", "zero_point", "qparam_shapes"])
def test_fake_quantize_arguments_are_checked_as_cpu(bad):
    raises_as_cpu(bad)


def test_int8_matmul_accumulates_in_int32_as_cpu():
    g = torch.Generator().manual_seed(3)
    a = torch.randint(-128, 128, (16, 64), dtype=torch.int8, generator=g)
    b = torch.randint(-128, 128, (64, 8), dtype=torch.int8, generator=g)
    out = torch._int_mm(a.to("tpu"), b.to("tpu"))
    assert out.dtype == torch.int32
    assert torch.equal(out.cpu(), torch._int_mm(a, b))


@pytest.mark.parametrize("bad", [
    lambda d: torch._int_mm(torch.ones(4, 8, dtype=torch.int64, device=d),
                            torch.ones(8, 2, dtype=torch.int8, device=d)),
    lambda d: torch._int_mm(torch.ones(4, 8, dtype=torch.int8, device=d),
                            torch.ones(4, 2, dtype=torch.int8, device=d)),
    lambda d: torch._int_mm(torch.ones(8, dtype=torch.int8, device=d),
                            torch.ones(8, 2, dtype=torch.int8, device=d)),
], ids=["dtype", "sizes", "rank"])
def test_int8_matmul_checks_as_cpu(bad):
    raises_as_cpu(bad)


def _float8(shape, device, dtype=torch.float8_e4m3fn, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * 4).to(dtype).to(device)


@pytest.mark.parametrize("scales, kwargs", [
    ((0.5, 2.0), {}),
    ((0.5, 2.0), {"out_dtype": torch.float32}),
    (("rows", "columns"), {"out_dtype": torch.bfloat16}),
    ((0.5, 2.0), {"bias": "bias", "out_dtype": torch.bfloat16}),
    ((15.0, 15.0), {"scale_result": 4.0}),  # a defaulted float8 out_dtype ignores it
    ((15.0, 15.0), {"scale_result": 4.0, "out_dtype": torch.float8_e4m3fn}),
    ((1.7, 1.0), {"out_dtype": torch.int32}),
], ids=["float8", "float32", "rowwise", "bias", "saturated", "scale_result", "int32"])
def test_scaled_float8_matmul_as_cpu(scales, kwargs):
    def run(device):
        a, b = _float8((16, 32), device), _float8((64, 32), device, seed=1).t()
        named = {"rows": torch.linspace(0.5, 1.5, 16).reshape(16, 1),
                 "columns": torch.linspace(2, 1, 64).reshape(1, 64),
                 "bias": torch.linspace(-3, 3, 64).bfloat16()}
        scale_a, scale_b = (named[s].to(device) if isinstance(s, str)
                            else torch.tensor(s, device=device) for s in scales)
        kw = {k: named[v].to(device) if isinstance(v, str)
              else torch.tensor(v, device=device) if isinstance(v, float) else v
              for k, v in kwargs.items()}
        return torch._scaled_mm(a, b, scale_a, scale_b, **kw)

    cpu, tpu = run("cpu"), run("tpu")
    assert tpu.dtype == cpu.dtype
    assert torch.equal(tpu.cpu().float(), cpu.float())


@pytest.mark.parametrize("bad", [
    lambda d: torch._scaled_mm(_float8((4, 8), d).float(), _float8((8, 2), d),
                               torch.tensor(1.0, device=d), torch.tensor(1.0, device=d)),
    lambda d: torch._scaled_mm(_float8((4, 8), d), _float8((8, 2), d),
                               torch.tensor(1.0, device=d, dtype=torch.float64),
                               torch.tensor(1.0, device=d)),
    lambda d: torch._scaled_mm(_float8((4, 8), d), _float8((8, 2), d),
                               torch.ones(4, 1, device=d), torch.ones(2, 1, device=d)),
    lambda d: torch._scaled_mm(_float8((4, 8), d), _float8((6, 2), d),
                               torch.tensor(1.0, device=d), torch.tensor(1.0, device=d)),
    lambda d: torch._scaled_mm(_float8((8,), d), _float8((8, 2), d),
                               torch.tensor(1.0, device=d), torch.tensor(1.0, device=d)),
    lambda d: torch._scaled_mm(_float8((4, 8), d), _float8((8, 2), d),
                               torch.tensor(1.0, device=d), torch.tensor(1.0, device=d),
                               bias=torch.ones(3, device=d)),
    lambda d: torch._scaled_mm(_float8((4, 8), d), _float8((8, 2), d),
                               torch.tensor(1.0, device=d), torch.tensor(1.0, device=d),
                               scale_result=torch.ones(2, device=d)),
    lambda d: torch._scaled_mm(_float8((4, 8), d), _float8((8, 2), d),
                               torch.ones(4, 2, device=d)[:, :1], torch.ones(1, 2, device=d)),
    lambda d: torch._scaled_mm(_float8((4, 8), d), _float8((8, 2), d),
                               torch.ones(4, 1, device=d), torch.ones(2, 2, device=d)[:, :1].t()),
], ids=["float32_input", "float64_scale", "scale_shapes", "sizes", "rank", "bias", "result",
        "strided_row_scales", "strided_column_scales"])
def test_scaled_float8_matmul_checks_as_cpu(bad):
    # (not cuda's: a row-major mat2 and sizes not divisible by 16 are fine on CPU; the
    # scaling configuration is a ValueError)
    raises_as_cpu(bad, Exception)


@pytest.mark.parametrize("kind", ["affine", "symmetric"])
def test_fused_observer_fake_quantize_trains_as_cpu(kind):
    # FusedMovingAvgObsFakeQuantize (the default x86 QAT activations' module): the moving
    # min/max, fbgemm's qparams and the fake-quantized values, step by step.
    import copy

    from torch.ao.quantization import FusedMovingAvgObsFakeQuantize, MovingAverageMinMaxObserver

    kwargs = {} if kind == "affine" else dict(
        observer=MovingAverageMinMaxObserver, quant_min=-128, quant_max=127, dtype=torch.qint8,
        qscheme=torch.per_tensor_symmetric)
    cpu = FusedMovingAvgObsFakeQuantize(**kwargs)
    tpu = copy.deepcopy(cpu).to("tpu")
    for step in range(4):
        x = _X * (step + 1) + (0.5 if step % 2 else -0.3)
        if step == 3:  # a frozen observer keeps its qparams
            cpu.disable_observer()
            tpu.disable_observer()
        on_tpu = x.to("tpu").requires_grad_()
        x = x.clone().requires_grad_()
        out_cpu, out_tpu = cpu(x), tpu(on_tpu)
        assert torch.equal(out_tpu.detach().cpu(), out_cpu.detach())
        assert torch.equal(tpu.scale.cpu(), cpu.scale)
        assert torch.equal(tpu.zero_point.cpu(), cpu.zero_point)
        out_cpu.sum().backward()
        out_tpu.sum().backward()
        assert torch.equal(on_tpu.grad.cpu(), x.grad)


def test_add_relu_as_cpu():
    # torch.ao's fused add + ReLU (quantization-ready modules) had no rule
    x = torch.randn(4, 5, generator=torch.Generator().manual_seed(0))
    for op in (lambda t: torch.ops.aten._add_relu.Tensor(t, t * 0.5, alpha=-3),
               lambda t: torch.ops.aten._add_relu.Scalar(t, 0.3),
               lambda t: torch.ops.aten._add_relu_.Tensor(t.clone(), t),
               lambda t: torch.ops.aten._add_relu.Tensor(t.long(), -t.long())):
        assert_same(op(x.to(TPU)), op(x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_int8_weight_only_matmul_as_cpu(dtype):
    # torchao's int8 weight-only quantization on CPU calls _weight_int8pack_mm: no rule before
    x = torch.randn(3, 8, generator=torch.Generator().manual_seed(0)).to(dtype)
    w = torch.randint(-128, 127, (5, 8), dtype=torch.int8, generator=torch.Generator())
    scales = torch.rand(5, generator=torch.Generator().manual_seed(1)).to(dtype)
    op = torch.ops.aten._weight_int8pack_mm
    assert_same(op(x.to(TPU), w.to(TPU), scales.to(TPU)), op(x, w, scales))
    for bad in ((x[0], w, scales), (x.t().contiguous().t(), w, scales), (x, w.t(), scales),
                (x.unsqueeze(0), w, scales), (x, w.float(), scales), (x, w, scales[:3]),
                (x, w, scales.double())):
        raises_as_cpu(lambda d, bad=bad: op(*(t.to(d) for t in bad)), (RuntimeError, IndexError))
