"""torchsde used unchanged on "tpu": its Brownian motion with fixed entropy is CPU's, sample for
sample, so sdeint's paths and gradients (and sdeint_adjoint's) are CPU's too.

BrownianInterval draws every increment from ``torch.Generator(device).manual_seed(seed)``
with seeds from numpy's SeedSequence: a tpu generator hands its draws to the host
(eager/dispatch.py), so the same entropy gives CPU's numbers on tpu, with no patching. The
default tests keep the Brownian samples and one Euler solve with gradients; every method and
noise type, fused eager and the adjoint are ``slow``."""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import TPU, assert_same

import torchtpu

torchsde = pytest.importorskip("torchsde")

F64 = dict(rtol=1e-9, atol=1e-10)


def test_brownian_interval_with_fixed_entropy_is_cpus():
    def increments(device):
        bm = torchsde.BrownianInterval(0.0, 1.0, size=(3, 2), dtype=torch.float64,
                                       device=device, entropy=7,
                                       levy_area_approximation="space-time")
        # (queried out of order: the interval tree splits and reseeds as it goes)
        return [bm(0.2, 0.7), bm(0.0, 0.2), *bm(0.5, 0.6, return_U=True), bm(0.2, 0.7)]

    actual = increments(TPU)
    assert all(t.device.type == "tpu" for t in actual)
    assert_same(actual, increments("cpu"), **F64)


class _SDE(torch.nn.Module):
    def __init__(self, noise_type, sde_type, d=2, m=3):
        super().__init__()
        self.noise_type, self.sde_type, self.d, self.m = noise_type, sde_type, d, m
        wide = noise_type in ("general", "additive")
        self.drift = torch.nn.Linear(d, d)
        self.diffusion = torch.nn.Linear(d, d * m if wide else d)
        self.additive = torch.nn.Parameter(torch.randn(d, m) * 0.3)

    def f(self, t, y):
        return torch.tanh(self.drift(y)) * torch.cos(t)

    def g(self, t, y):
        if self.noise_type == "additive":
            return self.additive.expand(y.shape[0], self.d, self.m) * (1 + t)
        s = torch.sigmoid(self.diffusion(y))
        if self.noise_type == "general":
            return s.view(-1, self.d, self.m)
        return s.unsqueeze(-1) if self.noise_type == "scalar" else s


_BROWNIAN_WIDTH = {"diagonal": 2, "scalar": 1, "general": 3, "additive": 3}
_LEVY = {"srk": "space-time", "log_ode": "davie"}


def _solve_both(method, noise_type, sde_type, adjoint=False):
    torch.manual_seed(0)
    sde = _SDE(noise_type, sde_type).double()
    y0 = torch.randn(4, 2, dtype=torch.float64)
    ts = torch.linspace(0, 1, 5, dtype=torch.float64)
    results = []
    for device, model in (("cpu", sde), (TPU, copy.deepcopy(sde).to(TPU))):
        bm = torchsde.BrownianInterval(
            0.0, 1.0, size=(4, _BROWNIAN_WIDTH[noise_type]), dtype=torch.float64,
            device=device, entropy=3, levy_area_approximation=_LEVY.get(method, "none"))
        y = y0.clone().to(device).requires_grad_()
        if adjoint:
            adjoint_method = {"reversible_heun": "adjoint_reversible_heun"}.get(method, method)
            ys = torchsde.sdeint_adjoint(model, y, ts.to(device), bm=bm, method=method,
                                         adjoint_method=adjoint_method, dt=0.125)
        else:
            ys = torchsde.sdeint(model, y, ts.to(device), bm=bm, method=method, dt=0.1)
        ys.square().sum().backward()
        results.append([ys, y.grad] + [p.grad for p in model.parameters()
                                       if p.grad is not None])
    expected, actual = results
    assert len(actual) == len(expected)
    assert_same(actual, expected, rtol=1e-7, atol=1e-9)


def test_euler_paths_and_gradients():
    _solve_both("euler", "diagonal", "ito")


_CASES = [("euler", "general", "ito"), ("euler", "scalar", "ito"), ("euler", "additive", "ito"),
          ("milstein", "diagonal", "ito"), ("milstein", "scalar", "ito"),
          ("milstein", "diagonal", "stratonovich"), ("srk", "diagonal", "ito"),
          ("srk", "scalar", "ito"), ("srk", "additive", "ito"),
          ("reversible_heun", "general", "stratonovich"),
          ("reversible_heun", "diagonal", "stratonovich"),
          ("midpoint", "diagonal", "stratonovich"), ("heun", "diagonal", "stratonovich"),
          ("log_ode", "general", "stratonovich")]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["strict", "fused"])
@pytest.mark.parametrize("case", _CASES, ids=["-".join(c[:2]) for c in _CASES])
def test_methods_and_noise_types(case, mode):
    with torchtpu.set_eager_mode(mode):
        _solve_both(*case)


@pytest.mark.slow
@pytest.mark.parametrize("case", [("euler", "diagonal", "ito"),
                                  ("midpoint", "diagonal", "stratonovich"),
                                  ("reversible_heun", "general", "stratonovich")],
                         ids=["euler", "midpoint", "reversible_heun"])
def test_adjoint_gradients(case):
    _solve_both(*case, adjoint=True)
