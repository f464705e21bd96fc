"""torchdyn's NeuralODE used unchanged with ``.to("tpu")``: fixed-step (Euler, RK4) and adaptive
(Dormand-Prince, Tsitouras) solvers, with gradients by backpropagation through the solver, by
the adjoint and by the interpolated adjoint, give CPU's trajectories, gradients and SGD steps.
One Euler step is in the default suite; the rest are ``slow`` (cold compiles). torchdyn is
installed ``--no-deps`` (it requires torchvision), so it is not in the ``test`` extra."""

from __future__ import annotations

import pytest
import torch
from conftest import TPU, assert_same
from model_zoo_checks import assert_same_gradients, assert_same_parameters
from torch import nn

import torchtpu

torchdyn = pytest.importorskip("torchdyn")
from torchdyn.core import NeuralODE  # noqa: E402

SOLVERS = {
    "euler": dict(solver="euler"),
    "rk4_adjoint": dict(solver="rk4", sensitivity="adjoint", solver_adjoint="rk4"),
    "dopri5": dict(solver="dopri5", sensitivity="autograd"),
    "tsit5_interpolated_adjoint": dict(solver="tsit5", sensitivity="interpolated_adjoint",
                                       atol=1e-4, rtol=1e-4),
}


def _node(name):
    torch.manual_seed(0)  # (NeuralODE keeps non-leaf tensors: not deep-copyable)
    field = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 2))
    return NeuralODE(field, **SOLVERS[name], return_t_eval=False)


def _check(name, steps=2, mode="strict"):
    model, model_tpu = _node(name), _node(name).to(TPU)
    x = torch.randn(8, 2, generator=torch.Generator().manual_seed(1))
    t_span = torch.linspace(0, 1, 5)
    opts = [torch.optim.SGD(m.parameters(), lr=0.05) for m in (model, model_tpu)]
    with torchtpu.set_eager_mode(mode):
        for step in range(steps):
            traj, traj_tpu = model(x, t_span), model_tpu(x.to(TPU), t_span.to(TPU))
            assert_same(traj_tpu, traj, rtol=1e-4, atol=1e-5)
            for opt, tr in zip(opts, (traj, traj_tpu), strict=True):
                opt.zero_grad()
                tr[-1].square().mean().backward()
            if step == 0:
                assert_same_gradients(model_tpu, model, rtol=1e-3, atol=1e-5)
            for opt in opts:
                opt.step()
    assert_same_parameters(model_tpu, model, rtol=1e-4, atol=1e-5)


def test_euler_neural_ode_step():
    _check("euler", steps=1)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SOLVERS))
def test_neural_ode_training_steps(name):
    _check(name)


@pytest.mark.slow
def test_adaptive_neural_ode_fused():
    _check("dopri5", mode="fused")
