"""torchcde on "tpu": interpolation coefficients (Hermite with backward differences, natural
cubic, linear, rectilinear; with a missing value), their splines' values and derivatives, and
a neural CDE trained through cdeint (fixed-step rk4; adaptive dopri5 with the adjoint in
float64) as on CPU.

Adaptive float32 solves are not compared: one rounding difference in an error estimate near
the tolerance accepts or rejects a step (on CPU too, a 1-ulp change of the input moves the
float32 dopri5 solution by ~1%)."""

from __future__ import annotations

import pytest
import torch
from model_zoo_checks import check_outputs, check_training

torchcde = pytest.importorskip("torchcde")

_g = torch.Generator().manual_seed(0)
_T = torch.linspace(0, 1, 7).expand(2, 7).unsqueeze(-1)
PATH = torch.cat([_T, torch.randn(2, 7, 2, generator=_g).cumsum(1)], -1)
GAPPY = PATH.clone()
GAPPY[0, 3, 1] = float("nan")


@pytest.mark.slow
def test_coefficients_and_splines():
    def run(device):
        x = GAPPY.to(device)
        outs = [torchcde.linear_interpolation_coeffs(x, rectilinear=0)]
        for coeffs, spline in [
                (torchcde.hermite_cubic_coefficients_with_backward_differences(x),
                 torchcde.CubicSpline),
                (torchcde.natural_cubic_coeffs(x), torchcde.CubicSpline),
                (torchcde.linear_interpolation_coeffs(x), torchcde.LinearInterpolation)]:
            path = spline(coeffs)
            outs += [coeffs, path.evaluate(torch.tensor(0.33, device=device)),
                     path.derivative(torch.tensor(0.71, device=device)),
                     path.evaluate(torch.linspace(0, 1, 5, device=device))]
        return outs

    check_outputs(run)


class _NeuralCDE(torch.nn.Module):
    def __init__(self, method, adjoint=False):
        super().__init__()
        self.initial = torch.nn.Linear(3, 4)
        self.field = torch.nn.Linear(4, 12)
        self.method, self.adjoint = method, adjoint

    def forward(self, x):
        path = torchcde.CubicSpline(
            torchcde.hermite_cubic_coefficients_with_backward_differences(x))
        z0 = self.initial(path.evaluate(path.interval[0]))
        options = dict(step_size=0.1) if self.method == "rk4" else {}
        z = torchcde.cdeint(X=path, z0=z0, t=path.interval, method=self.method,
                            adjoint=self.adjoint, options=options,
                            func=lambda t, z: self.field(z).tanh().view(*z.shape[:-1], 4, 3))
        return z[:, -1]


@pytest.mark.slow
def test_neural_cde_rk4_trains_as_on_cpu():
    check_training(lambda: _NeuralCDE("rk4"), lambda m, d: m(PATH.to(d)).pow(2).sum())


@pytest.mark.slow
def test_neural_cde_dopri5_adjoint_float64():
    check_training(lambda: _NeuralCDE("dopri5", adjoint=True).double(),
                   lambda m, d: m(PATH.double().to(d)).pow(2).sum(), steps=1)
