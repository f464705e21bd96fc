"""zuko's normalizing flows used unchanged with ``.to("tpu")`` give CPU's log-densities, samples,
reparametrized-sample gradients and training steps; zuko.distributions' densities too.

A flow's sample is its transform's inverse applied to a base draw (``NormalizingFlow.rsample``):
tpu draws from its own stream, so the base draws are made on CPU and moved, and the inverse,
the deterministic part, is compared. Flows are tiny (3 features, 2 context features, two
transforms of 16-unit networks); the default tests keep two cheap flows and the distributions,
every flow, fused eager and torch.compile are ``slow`` (cold compiles; CNF ~1 min)."""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import TPU, assert_same

import torchtpu

zuko = pytest.importorskip("zuko")

TOL = dict(rtol=1e-4, atol=1e-4)
_HIDDEN = dict(hidden_features=[16, 16])
FLOWS = {
    "MAF": lambda: zuko.flows.MAF(3, 2, transforms=2, **_HIDDEN),
    "NSF": lambda: zuko.flows.NSF(3, 2, transforms=2, **_HIDDEN),
    "NCSF": lambda: zuko.flows.NCSF(3, 2, transforms=2, **_HIDDEN),
    "NICE": lambda: zuko.flows.NICE(3, 2, transforms=2, **_HIDDEN),
    "RealNVP": lambda: zuko.flows.RealNVP(3, 2, transforms=2, **_HIDDEN),
    "SOSPF": lambda: zuko.flows.SOSPF(3, 2, transforms=2, **_HIDDEN),
    "NAF": lambda: zuko.flows.NAF(3, 2, transforms=2, **_HIDDEN),
    "UNAF": lambda: zuko.flows.UNAF(3, 2, transforms=2, **_HIDDEN),
    "CNF": lambda: zuko.flows.CNF(3, 2, **_HIDDEN),
    "GF": lambda: zuko.flows.GF(3, 2, components=4),
    "BPF": lambda: zuko.flows.BPF(3, 2, transforms=2, **_HIDDEN),
    "GMM": lambda: zuko.flows.GMM(3, 2, components=3, **_HIDDEN),
}


def _pair(name):
    torch.manual_seed(0)
    flow = FLOWS[name]()
    return flow, copy.deepcopy(flow).to(TPU)


def _data():
    g = torch.Generator().manual_seed(1)
    return torch.randn(5, 3, generator=g), torch.randn(5, 2, generator=g), torch.randn(
        5, 3, generator=g)


def _assert_grads(flow, flow_tpu, **tol):
    for (name, p), (_, q) in zip(flow.named_parameters(), flow_tpu.named_parameters(),
                                 strict=True):
        assert (p.grad is None) == (q.grad is None), name
        if p.grad is not None:
            assert_same(q.grad, p.grad, **tol)


def _check_flow(name, grad=True):
    flow, flow_tpu = _pair(name)
    x, c, z = _data()
    assert_same(flow_tpu(c.to(TPU)).log_prob(x.to(TPU)), flow(c).log_prob(x), **TOL)
    if name != "GMM":  # (a mixture: no transform to invert)
        # the sample of a base draw z, and the gradient of a loss of it (rsample's path)
        sample = flow(c).transform.inv(z)
        sample_tpu = flow_tpu(c.to(TPU)).transform.inv(z.to(TPU))
        assert_same(sample_tpu, sample, rtol=1e-3, atol=1e-3)
        if grad:
            sample.square().mean().backward()
            sample_tpu.square().mean().backward()
            _assert_grads(flow, flow_tpu, rtol=1e-3, atol=1e-3)
    return flow, flow_tpu


def test_spline_flow_log_prob_and_sample():
    # rational-quadratic splines: searchsorted and gathers, forward and inverse
    with torch.no_grad():
        _check_flow("NSF", grad=False)


# (CNF's adaptive steps read the error estimate on the host each step: a fused program per
# step, ~5 minutes here, so it runs in strict eager only)
@pytest.mark.slow
@pytest.mark.parametrize("name, mode", [(n, m) for n in sorted(FLOWS) for m in ("strict", "fused")
                                        if (n, m) != ("CNF", "fused")])
def test_flow_trains_as_on_cpu(name, mode):
    with torchtpu.set_eager_mode(mode):
        flow, flow_tpu = _check_flow(name)
        x, c, _ = _data()
        # (SGD: Adam's first steps are lr * sign(grad), which a rounding flips for a gradient
        # near zero)
        opt = torch.optim.SGD(flow.parameters(), 0.05)
        opt_tpu = torch.optim.SGD(flow_tpu.parameters(), 0.05)
        for _ in range(3):
            for f, o, xs, cs in ((flow, opt, x, c), (flow_tpu, opt_tpu, x.to(TPU), c.to(TPU))):
                o.zero_grad()
                loss = -f(cs).log_prob(xs).mean()
                loss.backward()
                o.step()
                if f is flow:
                    expected = loss
        assert_same(loss, expected, rtol=1e-3, atol=1e-3)
        for p, q in zip(flow.parameters(), flow_tpu.parameters(), strict=True):
            assert_same(q, p, rtol=1e-3, atol=1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["MAF", "NSF"])
def test_compiled_training_step(name):
    flow, flow_tpu = _pair(name)
    x, c, _ = _data()

    def step(f, xs, cs):
        loss = -f(cs).log_prob(xs).mean()
        loss.backward()
        return loss

    expected = step(flow, x, c)
    assert_same(torch.compile(step, backend="tpu")(flow_tpu, x.to(TPU), c.to(TPU)), expected,
                **TOL)
    _assert_grads(flow, flow_tpu, **TOL)


def _normal(d, loc=0.0, scale=1.0):
    # (zuko turns torch.distributions' validation off when imported, pyro, which BoTorch
    # imports, back on; zuko then hands a Python number to Normal.cdf, which it refuses)
    return torch.distributions.Normal(torch.tensor(loc, device=d), torch.tensor(scale, device=d),
                                      validate_args=False)


_g = torch.Generator().manual_seed(2)
_X = torch.rand(6, 3, generator=_g) * 0.8 + 0.1
_LOC, _SCALE = torch.randn(3, generator=_g), torch.rand(3, generator=_g) + 0.5
DISTRIBUTIONS = {
    "BoxUniform": (lambda d: zuko.distributions.BoxUniform(torch.zeros(3, device=d),
                                                           torch.ones(3, device=d)), _X),
    "DiagNormal": (lambda d: zuko.distributions.DiagNormal(_LOC.to(d), _SCALE.to(d)), _X),
    "GeneralizedNormal": (
        lambda d: zuko.distributions.GeneralizedNormal(torch.tensor(3.0, device=d)), _X),
    "Mixture": (lambda d: zuko.distributions.Mixture(
        zuko.distributions.DiagNormal(torch.stack([_LOC, -_LOC]).to(d),
                                      torch.stack([_SCALE, _SCALE]).to(d)),
        torch.tensor([0.3, 0.7], device=d).log()), _X),
    "Joint": (lambda d: zuko.distributions.Joint(
        torch.distributions.Uniform(torch.tensor(0.0, device=d), torch.tensor(1.0, device=d),
                                    validate_args=False),
        _normal(d), _normal(d, 1.0, 2.0)), _X),
    "Truncated": (lambda d: zuko.distributions.Truncated(_normal(d), 0.0, 1.0), _X[:, 0]),
    "Sort": (lambda d: zuko.distributions.Sort(_normal(d), 3), _X.sort(-1).values),
    "TopK": (lambda d: zuko.distributions.TopK(_normal(d), 2, 4), _X[:, :2].sort(-1).values),
    "Minimum": (lambda d: zuko.distributions.Minimum(_normal(d), 3), _X[:, 0]),
    "Maximum": (lambda d: zuko.distributions.Maximum(_normal(d), 3), _X[:, 0]),
}


@pytest.mark.parametrize("names", [
    pytest.param(["Truncated", "Sort"], id="some"),
    pytest.param(sorted(DISTRIBUTIONS), marks=pytest.mark.slow, id="all"),
])
def test_distributions_log_prob(names):
    for name in names:
        make, x = DISTRIBUTIONS[name]
        actual = make(TPU).log_prob(x.to(TPU))
        assert actual.device.type == "tpu", name
        assert_same(actual, make("cpu").log_prob(x), **TOL)


@pytest.mark.slow
def test_distributions_sample_on_tpu():
    # tpu's own draws: their shapes, device and finite densities
    for name, (make, _) in DISTRIBUTIONS.items():
        dist = make(TPU)
        s = dist.sample((100,))
        assert s.device.type == "tpu", name
        assert s.shape == (100, *dist.batch_shape, *dist.event_shape), name
        assert bool(torch.isfinite(dist.log_prob(s)).all()), name
