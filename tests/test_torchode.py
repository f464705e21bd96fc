"""torchode on "tpu": batched adaptive solves (Dopri5, Tsit5; integral and PID step-size
controllers) take the same steps, give the same solution, statistics and status, and
backpropagate the same gradients as on CPU.

Heun's method and the PID controller run in float64 only: the controllers floor the error
ratio with almost_zero = 1e-38, a float32 subnormal that XLA flushes to zero, so where the
error estimate is exactly 0 (CPU: 0 < 1e-38, tpu: 0 == 0) the maximum's gradient takes the
other branch and meets sqrt's infinite derivative at 0: NaN gradients on tpu in float32
(docs/architecture.md: XLA:CPU flushes subnormals)."""

from __future__ import annotations

import pytest
import torch
from model_zoo_checks import check_outputs

to = pytest.importorskip("torchode")


def _solve(method, controller, dtype, device):
    torch.manual_seed(0)
    layer = torch.nn.Linear(3, 3).to(device, dtype)
    term = to.ODETerm(lambda t, y: torch.tanh(layer(y)) - 0.1 * y * t[:, None])
    if controller == "integral":
        control = to.IntegralController(atol=1e-6, rtol=1e-3, term=term)
    else:
        control = to.PIDController(atol=1e-6, rtol=1e-3, pcoeff=0.2, icoeff=0.5, dcoeff=0.0,
                                   term=term)
    solver = to.AutoDiffAdjoint(method(term=term), control)
    y0 = torch.tensor([[1.0, 0.0, -1.0], [0.5, 0.2, 0.1]], device=device, dtype=dtype)
    t_eval = torch.stack([torch.linspace(0, 1, 5), torch.linspace(0, 2, 5)]).to(device, dtype)
    solution = solver.solve(to.InitialValueProblem(y0=y0, t_eval=t_eval))
    solution.ys.pow(2).sum().backward()
    return [solution.ys, solution.ts, solution.status, solution.stats["n_steps"],
            solution.stats["n_f_evals"], layer.weight.grad]


@pytest.mark.slow
@pytest.mark.parametrize("method,controller,dtype", [
    ("Dopri5", "integral", torch.float32), ("Tsit5", "integral", torch.float32),
    ("Dopri5", "pid", torch.float64), ("Heun", "integral", torch.float64)])
def test_adaptive_solves(method, controller, dtype):
    check_outputs(lambda d: _solve(getattr(to, method), controller, dtype, d),
                  rtol=1e-4, atol=1e-5)
