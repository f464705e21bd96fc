"""hyper-connections used unchanged with ``.to("tpu")``: a 3-block residual trunk whose
residual is widened into 4 streams (hyper-connections with static and dynamic alpha/beta),
split into fractions of the feature dimension (frac-connections), or mixed by a
Sinkhorn-projected doubly stochastic matrix (manifold-constrained, mHC), gives CPU's outputs,
gradients and SGD steps. ``slow`` (cold compiles)."""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import TPU, assert_same
from model_zoo_checks import assert_same_gradients, assert_same_parameters
from torch import nn

hc = pytest.importorskip("hyper_connections")

pytestmark = pytest.mark.slow


class Trunk(nn.Module):
    def __init__(self, functions, streams, dim=16, depth=3, **kw):
        super().__init__()
        init, self.expand, self.reduce = functions(streams, **kw)
        self.blocks = nn.ModuleList([
            init(dim=dim, branch=nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim),
                                               nn.GELU()), layer_index=i)
            for i in range(depth)])
        self.head = nn.Linear(dim, 3)

    def forward(self, x):
        x = self.expand(x)
        for block in self.blocks:
            x = block(x)
        return self.head(self.reduce(x))


TRUNKS = {
    "hyper_connections": lambda: Trunk(hc.get_init_and_expand_reduce_stream_functions, 4),
    "frac_connections": lambda: Trunk(hc.get_init_and_expand_reduce_stream_functions, 1,
                                      num_fracs=4),
    "manifold_constrained": lambda: Trunk(hc.mc_get_init_and_expand_reduce_stream_functions,
                                          4),
}


@pytest.mark.parametrize("name", list(TRUNKS))
def test_trunk_training_steps(name):
    torch.manual_seed(0)
    model = TRUNKS[name]()
    for p in model.parameters():
        if p.dim() < 2:  # the connections' scales start at zero or one: move them off
            nn.init.normal_(p, std=0.3)
    model_tpu = copy.deepcopy(model).to(TPU)
    x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(1))
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, model_tpu)]
    for step in range(3):
        out, out_tpu = model(x), model_tpu(x.to(TPU))
        assert_same(out_tpu, out, rtol=1e-4, atol=1e-4)
        for opt, o in zip(opts, (out, out_tpu), strict=True):
            opt.zero_grad()
            o.square().mean().backward()
        if step == 0:
            assert_same_gradients(model_tpu, model, rtol=1e-3, atol=1e-5)
        for opt in opts:
            opt.step()
    assert_same_parameters(model_tpu, model, rtol=1e-3, atol=1e-4)
