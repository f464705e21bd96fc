"""torch-dct on "tpu": the DCT-II/DCT-I transforms and their inverses in 1, 2 and 3
dimensions (FFT-based), the matrix form LinearDCT, and their gradients match CPU."""

from __future__ import annotations

import pytest
import torch
from model_zoo_checks import check_outputs

dct = pytest.importorskip("torch_dct")

_g = torch.Generator().manual_seed(0)
X = torch.randn(3, 16, generator=_g)
CUBE = torch.randn(2, 8, 8, generator=_g)


@pytest.mark.slow
def test_transforms_and_gradient():
    def run(device):
        x = X.to(device).requires_grad_()
        y = dct.dct(x, norm="ortho")
        grad, = torch.autograd.grad((y * torch.arange(16.0, device=device)).sum(), x)
        return [y, grad, dct.idct(dct.dct(x.detach())), dct.dct_2d(CUBE.to(device))]

    check_outputs(run)


@pytest.mark.slow
def test_all_transforms():
    def run(device):
        x, cube = X.to(device), CUBE.to(device)
        return [dct.dct(x), dct.idct(x, norm="ortho"), dct.idct_2d(cube, norm="ortho"),
                dct.dct_3d(cube), dct.idct_3d(cube), dct.dct1(x), dct.idct1(x)]

    check_outputs(run)


@pytest.mark.slow
def test_linear_dct_layers():
    def run(device):
        layer = dct.LinearDCT(16, "dct", norm="ortho").to(device)
        inverse = dct.LinearDCT(8, "idct").to(device)
        return [layer(X.to(device)), dct.apply_linear_2d(CUBE.to(device), inverse)]

    check_outputs(run)
