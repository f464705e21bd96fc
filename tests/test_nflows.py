"""nflows' flows used unchanged with ``.to("tpu")``: masked autoregressive and RealNVP flows,
rational-quadratic spline flows (autoregressive with context, and coupling with LU-linear
and ActNorm layers) give CPU's log-densities, gradients and SGD steps, and their inverse
(sampling's deterministic part, from base draws made on CPU) CPU's samples. ``slow`` (cold
compiles)."""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import TPU, assert_same
from model_zoo_checks import assert_same_gradients, assert_same_parameters

nflows = pytest.importorskip("nflows")
from nflows import distributions, flows, transforms  # noqa: E402
from nflows.flows import MaskedAutoregressiveFlow, SimpleRealNVP  # noqa: E402
from nflows.nn.nets import ResidualNet  # noqa: E402

pytestmark = pytest.mark.slow


def _spline_autoregressive():
    ts = []
    for _ in range(2):
        ts += [transforms.MaskedPiecewiseRationalQuadraticAutoregressiveTransform(
            3, 16, context_features=2, num_bins=4, tails="linear", tail_bound=3.0),
            transforms.RandomPermutation(3)]
    return flows.Flow(transforms.CompositeTransform(ts), distributions.StandardNormal([3]))


def _spline_coupling():
    def net(i, o):
        return ResidualNet(i, o, 16, context_features=2, num_blocks=1)
    ts = [transforms.PiecewiseRationalQuadraticCouplingTransform(
        torch.tensor([1, 0, 1]), net, num_bins=4, tails="linear", tail_bound=3.0),
        transforms.LULinear(3), transforms.ActNorm(3)]
    return flows.Flow(transforms.CompositeTransform(ts), distributions.StandardNormal([3]))


FLOWS = {
    "maf": (lambda: MaskedAutoregressiveFlow(3, 16, num_layers=2, num_blocks_per_layer=1,
                                             batch_norm_between_layers=True), False),
    "realnvp": (lambda: SimpleRealNVP(3, 16, num_layers=2, num_blocks_per_layer=1), False),
    "spline_autoregressive": (_spline_autoregressive, True),
    "spline_coupling": (_spline_coupling, True),
}


@pytest.mark.parametrize("name", list(FLOWS))
def test_flow_log_prob_training_and_inverse(name):
    make, conditional = FLOWS[name]
    torch.manual_seed(0)
    flow = make()
    flow_tpu = copy.deepcopy(flow).to(TPU)
    g = torch.Generator().manual_seed(1)
    x, c, z = torch.randn(16, 3, generator=g), torch.randn(16, 2, generator=g), torch.randn(
        5, 3, generator=g) * 0.5
    ctx = (c, c.to(TPU)) if conditional else (None, None)
    # SGD: ActNorm's data-dependent start leaves its shift a gradient of rounding noise
    opts = [torch.optim.SGD(f.parameters(), lr=1e-2) for f in (flow, flow_tpu)]
    for step in range(3):
        lp = flow.log_prob(x, context=ctx[0])
        lp_tpu = flow_tpu.log_prob(x.to(TPU), context=ctx[1])
        assert_same(lp_tpu, lp, rtol=1e-4, atol=1e-4)
        for opt, v in zip(opts, (lp, lp_tpu), strict=True):
            opt.zero_grad()
            (-v.mean()).backward()
        if step == 0:
            assert_same_gradients(flow_tpu, flow, rtol=1e-3, atol=1e-4)
        for opt in opts:
            opt.step()
    assert_same_parameters(flow_tpu, flow, rtol=1e-3, atol=1e-3)
    with torch.no_grad():
        samples = [f._transform.inverse(zz, context=f._embedding_net(cc[:5]) if conditional
                                        else None)[0]
                   for f, zz, cc in ((flow.eval(), z, c), (flow_tpu.eval(), z.to(TPU),
                                                           c.to(TPU)))]
    assert_same(samples[1], samples[0], rtol=1e-3, atol=1e-4)
