"""Batch and group norm's numerics against CPU's kernels: float64 sums of float32 statistics,
batch norm's ``x * alpha + beta`` form and its backward from the saved statistics."""

import pytest
import torch
import torch.nn.functional as F


def _batch_norm(training):
    def norm(x, w, b):
        rm = torch.full((x.shape[1],), 0.1, device=x.device, dtype=x.dtype)
        rv = torch.full((x.shape[1],), 1.3, device=x.device, dtype=x.dtype)
        return F.batch_norm(x, rm, rv, w, b, training=training), rv

    return norm


def _group_norm(x, w, b):
    return (F.group_norm(x, 2, w, b),)


def _run(device, dtype, norm, x, w, b, dy):
    xx, ww, bb = (t.to(device, dtype).clone().requires_grad_() for t in (x, w, b))
    y, *stats = norm(xx, ww, bb)
    y.backward(dy.to(device, dtype))
    return [t.detach().cpu().double() for t in (y, xx.grad, ww.grad, bb.grad, *stats)]


def _error(t, exact):
    return float(((t - exact).abs() / exact.abs().clamp(min=1e-3)).max())


def _worst_errors(norm, shape, offset):
    """Per output (y, the three gradients, a running statistic): our worst error and CPU's
    against float64, over a few seeds."""
    worst = {}
    for seed in range(4):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(shape, generator=g) + offset
        w, b = torch.rand(shape[1], generator=g) + 0.5, torch.randn(shape[1], generator=g)
        dy = torch.randn(shape, generator=g)
        exact, cpu, tpu = (_run(device, dtype, norm, x, w, b, dy) for device, dtype in (
            ("cpu", torch.float64), ("cpu", torch.float32), ("tpu", torch.float32)))
        names = ["y", "dx", "dw", "db", "running_var"][:len(exact)]
        for name, t, c, e in zip(names, tpu, cpu, exact, strict=True):
            ours, theirs = worst.get(name, (0.0, 0.0))
            worst[name] = max(ours, _error(t, e)), max(theirs, _error(c, e))
    return worst


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("shape, offset", [((16, 8, 14, 14), 0.0), ((32, 4, 7, 7), 3.0),
                                           ((64, 6), 0.5)], ids=["4d", "offset", "2d"])
def test_batch_norm_is_as_accurate_as_cpus(training, shape, offset):
    for name, (ours, theirs) in _worst_errors(_batch_norm(training), shape, offset).items():
        # (the weight's gradient, a sum of products, rounds otherwise than CPU's: up to 3x
        # its error, at 1e-7 relative)
        assert ours <= (3 if name == "dw" else 1.5) * theirs + 1e-7, name


def test_group_norm_is_as_accurate_as_cpus():
    # its statistics and its parameters' gradients summed in float64 as well
    for name, (ours, theirs) in _worst_errors(_group_norm, (32, 4, 7, 7), 3.0).items():
        assert ours <= 1.5 * theirs + 1e-7, name


def test_eval_batch_norm_is_cpus_bit_for_bit():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(8, 5, 6, 6, generator=g) * 3 + 2
    mean, var = torch.randn(5, generator=g), torch.rand(5, generator=g) + 0.1
    w, b = torch.randn(5, generator=g), torch.randn(5, generator=g)
    cpu = F.batch_norm(x, mean, var, w, b)
    tpu = F.batch_norm(*(t.to("tpu") for t in (x, mean, var, w, b)))
    assert torch.equal(tpu.cpu(), cpu)


@pytest.mark.parametrize("shape", [(16, 16), (999, 4), (8, 4, 6, 6)])
def test_bfloat16_batch_norm_updates_its_running_statistics_as_cpu(shape):
    # (CPU rounds each bfloat16 step, its momentum and the batch size too: rounding once at
    # the end drifted the statistics a few bfloat16 steps per batch)
    g = torch.Generator().manual_seed(0)

    def run(device):
        bn = torch.nn.BatchNorm1d(shape[1]) if len(shape) < 4 else torch.nn.BatchNorm2d(shape[1])
        bn = bn.bfloat16().to(device)
        outs = [bn(x.to(device)).cpu() for x in xs]
        return outs, bn.running_mean.cpu(), bn.running_var.cpu()

    xs = [(torch.randn(*shape, generator=g) * 3 + 1).bfloat16() for _ in range(3)]
    (tpu_outs, *tpu_stats), (cpu_outs, *cpu_stats) = run("tpu:0"), run("cpu")
    for ours, theirs in zip(tpu_outs + tpu_stats, cpu_outs + cpu_stats, strict=True):
        assert torch.equal(ours, theirs)


def test_group_norm_of_an_empty_batch_has_empty_gradients():
    def run(device):
        x = torch.empty(0, 4, 3, 3, device=device, requires_grad=True)
        w = torch.ones(4, device=device, requires_grad=True)
        F.group_norm(x, 2, w).sum().backward()
        return x.grad, w.grad

    (gx, gw), (cx, cw) = run("tpu"), run("cpu")
    assert gx.shape == cx.shape
    assert torch.equal(gw.cpu(), cw)
