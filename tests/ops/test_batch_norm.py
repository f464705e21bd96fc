"""Batch norm's numerics against CPU's kernels: float64 sums of float32 statistics, the
``x * alpha + beta`` form, and a backward from the saved statistics."""

import pytest
import torch
import torch.nn.functional as F


def _run(device, dtype, x, w, b, dy, training):
    xx, ww, bb = (t.to(device, dtype).clone().requires_grad_() for t in (x, w, b))
    rm = torch.full((x.shape[1],), 0.1, device=device, dtype=dtype)
    rv = torch.full((x.shape[1],), 1.3, device=device, dtype=dtype)
    y = F.batch_norm(xx, rm, rv, ww, bb, training=training)
    y.backward(dy.to(device, dtype))
    return [t.detach().cpu().double() for t in (y, xx.grad, ww.grad, bb.grad, rv)]


def _error(t, exact):
    return float(((t - exact).abs() / exact.abs().clamp(min=1e-3)).max())


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("shape, offset", [((16, 8, 14, 14), 0.0), ((32, 4, 7, 7), 3.0),
                                           ((64, 6), 0.5)], ids=["4d", "offset", "2d"])
def test_batch_norm_is_as_accurate_as_cpus(training, shape, offset):
    # float32 results no further from float64's than CPU's are (its float64 accumulation),
    # per output (y, the three gradients, the running variance), worst over a few seeds
    worst = {}
    for seed in range(4):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(shape, generator=g) + offset
        w, b = torch.rand(shape[1], generator=g) + 0.5, torch.randn(shape[1], generator=g)
        dy = torch.randn(shape, generator=g)
        exact = _run("cpu", torch.float64, x, w, b, dy, training)
        cpu = _run("cpu", torch.float32, x, w, b, dy, training)
        tpu = _run("tpu", torch.float32, x, w, b, dy, training)
        for name, t, c, e in zip(["y", "dx", "dw", "db", "running_var"], tpu, cpu, exact,
                                 strict=True):
            ours, theirs = worst.get(name, (0.0, 0.0))
            worst[name] = max(ours, _error(t, e)), max(theirs, _error(c, e))
    for name, (ours, theirs) in worst.items():
        # (the weight's gradient, a sum of products, rounds otherwise than CPU's: up to 3x
        # its error, at 1e-7 relative)
        assert ours <= (3 if name == "dw" else 1.5) * theirs + 1e-7, name


def test_eval_batch_norm_is_cpus_bit_for_bit():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(8, 5, 6, 6, generator=g) * 3 + 2
    mean, var = torch.randn(5, generator=g), torch.rand(5, generator=g) + 0.1
    w, b = torch.randn(5, generator=g), torch.randn(5, generator=g)
    cpu = F.batch_norm(x, mean, var, w, b)
    tpu = F.batch_norm(*(t.to("tpu") for t in (x, mean, var, w, b)))
    assert torch.equal(tpu.cpu(), cpu)
