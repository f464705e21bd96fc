"""Checks one torch.distributions example on tpu against the same example on CPU.

Deterministic methods must match CPU; random draws are checked for device, dtype, shape
and support only (the streams differ between devices)."""

from __future__ import annotations

import copy
import re

import torch
from conftest import TPU, assert_same, to_cpu
from torch.distributions import Distribution, kl_divergence
from torch.distributions.transforms import Transform

METHODS = ("mean", "mode", "variance", "stddev")


def _map_tensors(x, leaf):
    """``x`` with ``leaf(t)`` for every tensor inside it: parameters, nested distributions,
    transforms (each copied, its own object left as it was)."""
    if isinstance(x, torch.Tensor):
        return leaf(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_map_tensors(v, leaf) for v in x)
    if isinstance(x, dict):
        return {k: _map_tensors(v, leaf) for k, v in x.items()}
    if isinstance(x, (Distribution, Transform)):
        new = copy.copy(x)
        new.__dict__ = _map_tensors(x.__dict__, leaf)
        return new
    return x


def to_tpu(x):
    """``x`` with every tensor inside it on tpu; leaves stay leaves, keeping requires_grad."""
    return _map_tensors(x, lambda t: t.detach().to(TPU).requires_grad_(t.requires_grad))


def fresh(x, dtype=None):
    """``x`` with its tensors detached into new leaves, so each run has its own gradients;
    floating tensors cast to ``dtype`` when given."""
    def leaf(t):
        y = t.detach().clone()
        if dtype is not None and y.is_floating_point():
            y = y.to(dtype)
        return y.requires_grad_(t.requires_grad)

    return _map_tensors(x, leaf)


def _has_tensor(x):
    found = []
    _map_tensors(x, found.append)
    return bool(found)


def _leaves(params):
    return [(k, v) for k, v in params.items() if isinstance(v, torch.Tensor) and v.requires_grad]


def _outcome(fn):
    """fn()'s value, or the type and message of what it raised."""
    try:
        return True, fn()
    except (NotImplementedError, ValueError, RuntimeError) as e:
        return False, (type(e), str(e))


def _same_outcome(name, on_tpu, on_cpu, tol, device="tpu"):
    ok_t, t = on_tpu
    ok_c, c = on_cpu
    assert ok_t == ok_c, f"{name}: tpu gave {t!r}, CPU gave {c!r}"
    if ok_c:
        assert_same(t, c, **tol)
        if isinstance(c, torch.Tensor):
            assert t.device.type == device, name
    else:
        assert t[0] is c[0], f"{name}: tpu raised {t}, CPU raised {c}"


def _check_sample_mean(d_cpu, d_tpu, n=2000):
    """tpu's draws average to CPU's mean, within six standard errors, where both moments
    exist."""
    try:
        mean, var = d_cpu.mean.detach(), d_cpu.variance.detach()
    except NotImplementedError:
        return
    finite = torch.isfinite(mean) & torch.isfinite(var)
    if not bool(finite.any()):
        return
    with torch.no_grad():
        average = d_tpu.sample((n,)).cpu().to(mean.dtype).mean(0)
    tolerance = 6 * (var / n).sqrt() + 1e-4 * (1 + mean.abs())
    off = finite & ((average - mean).abs() > tolerance)
    assert not bool(off.any()), f"sample mean {average[off]} vs {mean[off]}"


def _rsample_grads(d, params, n):
    """Whether each leaf's gradient of rsample's sum is finite (None counts as finite)."""
    leaves = [v for _, v in _leaves(params)]
    def grads():
        r = d.rsample((n,))
        if not leaves or not r.requires_grad:
            return []
        gs = torch.autograd.grad(r.sum(), leaves, allow_unused=True, retain_graph=True)
        return [g is None or bool(torch.isfinite(g).all().cpu()) for g in gs]
    return _outcome(grads)


def tolerance(dtype):
    return dict(rtol=1e-5, atol=1e-5) if dtype != torch.float64 else dict(rtol=1e-9, atol=1e-9)


def check_example(Dist, params, *, dtype=torch.float32, n_samples=64):  # noqa: N803
    tol = tolerance(dtype)
    cpu_params = fresh(params, dtype)
    tpu_params = to_tpu(fresh(params, dtype))
    d_cpu, d_tpu = Dist(**cpu_params), Dist(**tpu_params)
    assert d_tpu.batch_shape == d_cpu.batch_shape and d_tpu.event_shape == d_cpu.event_shape

    # Draws: device, dtype, shape, support.
    # Parameters given as Python numbers make a CPU distribution on either side.
    device = "tpu" if _has_tensor(tpu_params) else "cpu"
    for shape in ((), (n_samples,)):
        s_cpu, s_tpu = d_cpu.sample(shape), d_tpu.sample(shape)
        assert s_tpu.device.type == device and s_tpu.dtype == s_cpu.dtype
        assert s_tpu.shape == s_cpu.shape
        inside = d_cpu.support.check(s_tpu.cpu())
        assert bool((inside == d_tpu.support.check(s_tpu).cpu()).all())
        # Extreme parameters' draws can underflow to a bound: allowed where CPU's do too.
        if not bool(inside.all()):
            many = d_cpu.sample((4096,))
            assert not bool(d_cpu.support.check(many).all()), f"outside support: {s_tpu}"
    _check_sample_mean(d_cpu, d_tpu)
    if d_cpu.has_rsample:
        # Reparameterised draws carry finite gradients wherever CPU's do (or fail as CPU's do).
        outcomes = [_rsample_grads(d, p, n_samples) for d, p in ((d_cpu, cpu_params),
                                                                   (d_tpu, tpu_params))]
        assert outcomes[1][0] == outcomes[0][0], f"rsample gradients: {outcomes}"
        if outcomes[0][0]:
            assert all(t or not c for t, c in zip(outcomes[1][1], outcomes[0][1], strict=True)), \
                f"rsample gradients finite on CPU, not on tpu: {outcomes}"
        else:
            assert outcomes[1][1][0] is outcomes[0][1][0], outcomes

    # Deterministic methods at a CPU draw.
    x = d_cpu.sample()
    _same_outcome("log_prob", _outcome(lambda: d_tpu.log_prob(x.to(device))),
                  _outcome(lambda: d_cpu.log_prob(x)), tol, device)
    for name in METHODS:
        _same_outcome(name, _outcome(lambda n=name: getattr(d_tpu, n)),
                      _outcome(lambda n=name: getattr(d_cpu, n)), tol, device)
    _same_outcome("entropy", _outcome(d_tpu.entropy), _outcome(d_cpu.entropy), tol, device)
    cdf = _outcome(lambda: d_cpu.cdf(x))
    _same_outcome("cdf", _outcome(lambda: d_tpu.cdf(x.to(device))), cdf, tol, device)
    if cdf[0]:
        q = cdf[1].detach().clamp(0.05, 0.95)
        _same_outcome("icdf", _outcome(lambda: d_tpu.icdf(q.to(device))),
                      _outcome(lambda: d_cpu.icdf(q)), tol, device)
    if d_cpu.has_enumerate_support:
        for expand in (False, True):
            _same_outcome("enumerate_support",
                          _outcome(lambda e=expand: d_tpu.enumerate_support(e)),
                          _outcome(lambda e=expand: d_cpu.enumerate_support(e)), tol, device)

    # Gradients of log_prob with respect to the parameters.
    leaves_c, leaves_t = _leaves(cpu_params), _leaves(tpu_params)
    ok, lp_c = _outcome(lambda: d_cpu.log_prob(x))  # CPU's own failure was compared above
    if ok and leaves_c and lp_c.requires_grad:
        lp_t = d_tpu.log_prob(x.to(device))
        w = torch.linspace(0.5, 1.5, lp_c.numel(), dtype=lp_c.dtype).reshape(lp_c.shape)
        g_c = torch.autograd.grad((lp_c * w).sum(), [v for _, v in leaves_c],
                                  allow_unused=True, retain_graph=True)
        g_t = torch.autograd.grad((lp_t * w.to(lp_t.device)).sum(), [v for _, v in leaves_t],
                                  allow_unused=True, retain_graph=True)
        for (k, _), a, e in zip(leaves_c, g_t, g_c, strict=True):
            assert (a is None) == (e is None), k
            if e is not None:
                assert_same(a, e, **tol)

    # expand keeps the numbers.
    shape = (2, *d_cpu.batch_shape)
    _same_outcome("expand", _outcome(lambda: d_tpu.expand(shape).log_prob(x.to(device))),
                  _outcome(lambda: d_cpu.expand(shape).log_prob(x)), tol, device)

    # KL against itself (registered pairs only).
    _same_outcome("kl", _outcome(lambda: kl_divergence(d_tpu, d_tpu)),
                  _outcome(lambda: kl_divergence(d_cpu, d_cpu)), tol, device)
    return d_cpu, d_tpu


_DEVICE_IN_REPR = re.compile(r",?\s*device='tpu:0'")


def check_bad_example(Dist, params):  # noqa: N803
    """Invalid parameters raise the same error, with the same message, on tpu."""
    errors = []
    for p in (fresh(params), to_tpu(fresh(params))):
        try:
            Dist(**p, validate_args=True)
        except Exception as e:  # noqa: BLE001  (compared below)
            # The tensor's repr wraps differently once it names its device.
            errors.append((type(e), " ".join(_DEVICE_IN_REPR.sub("", str(e)).split())))
        else:
            errors.append(None)
    assert errors[0] is not None, "CPU accepted a bad example"
    assert errors[1] == errors[0], f"tpu: {errors[1]}\nCPU: {errors[0]}"


def to_cpu_all(x):
    return to_cpu(x)
