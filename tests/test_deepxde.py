"""deepxde (pytorch backend) used unchanged on tpu: a small PINN for a 1-D Poisson problem,
whose residual takes second derivatives of the network (``dde.grad.hessian``, gradients of
gradients) and whose training backpropagates through them, gives CPU's loss history, test
metric, parameters and predictions (of the solution and of the PDE operator).

deepxde makes its training points with ``torch.as_tensor`` on the default device (it sets cuda
as default when it finds one), so the tpu run sets ``torch.set_default_device``. Steps use SGD:
this problem is odd, so the hidden biases' gradients are zero up to rounding, which Adam turns
into full-size steps of either sign. ``slow`` (cold compiles)."""

from __future__ import annotations

import copy
import os

import numpy as np
import pytest
import torch
from conftest import TPU, assert_same

os.environ.setdefault("DDE_BACKEND", "pytorch")
dde = pytest.importorskip("deepxde")

pytestmark = pytest.mark.slow


def _pde(x, y):
    return -dde.grad.hessian(y, x) - np.pi ** 2 * torch.sin(np.pi * x)


def test_poisson_pinn_training_and_prediction():
    if dde.backend.backend_name != "pytorch":
        pytest.skip("deepxde was imported with another backend")
    dde.config.set_random_seed(0)
    geom = dde.geometry.Interval(-1, 1)
    bc = dde.icbc.DirichletBC(geom, lambda x: 0, lambda _, on_boundary: on_boundary)
    data = dde.data.PDE(geom, _pde, bc, 16, 2, solution=lambda x: np.sin(np.pi * x),
                        num_test=20, train_distribution="uniform")
    torch.manual_seed(0)
    net = dde.nn.FNN([1, 16, 16, 1], "tanh", "Glorot uniform")
    points = geom.uniform_points(7)
    results = []
    for device, n in (("cpu", net), (TPU, copy.deepcopy(net).to(TPU))):
        torch.set_default_device(device)
        try:
            model = dde.Model(data, n)
            model.compile("sgd", lr=1e-3, metrics=["l2 relative error"])
            history, _ = model.train(iterations=4, display_every=1, verbose=0)
            results.append((torch.tensor(np.array(history.loss_train)),
                            torch.tensor(np.array(history.metrics_test)),
                            list(n.parameters()),
                            torch.tensor(model.predict(points)),
                            torch.tensor(model.predict(points, operator=_pde))))
        finally:
            torch.set_default_device(None)
    assert_same(results[1], results[0], rtol=1e-4, atol=1e-4)
