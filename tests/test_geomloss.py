"""geomloss (tensorized backend, no pykeops) on "tpu": debiased Sinkhorn divergences (balanced
and unbalanced with weights) and kernel losses (energy, gaussian, laplacian) give
CPU's values and gradients with respect to the point positions. (The "hausdorff" loss fails
on CPU too with the tensorized backend: KeyError in geomloss.)"""

from __future__ import annotations

import pytest
import torch
from model_zoo_checks import check_outputs

geomloss = pytest.importorskip("geomloss")

_g = torch.Generator().manual_seed(0)
A, B = torch.randn(2, 20, 3, generator=_g), torch.randn(2, 15, 3, generator=_g) + 0.5


def _loss_and_gradient(loss, **options):
    def run(device):
        a = A.to(device).requires_grad_()
        value = geomloss.SamplesLoss(loss, backend="tensorized", **options)(a, B.to(device))
        return [value, torch.autograd.grad(value.sum(), a)[0]]
    return run


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["sinkhorn", "energy", "gaussian", "laplacian"])
def test_samples_losses(loss):
    check_outputs(_loss_and_gradient(loss, p=2, blur=0.1, scaling=0.7))


@pytest.mark.slow
def test_unbalanced_weighted_sinkhorn():
    def run(device):
        a = A[0].to(device).requires_grad_()
        weights = torch.rand(20, generator=torch.Generator().manual_seed(3))
        loss = geomloss.SamplesLoss("sinkhorn", p=1, blur=0.05, reach=0.5, backend="tensorized")
        value = loss((weights / weights.sum()).to(device), a,
                     torch.full((15,), 1 / 15).to(device), B[0].to(device))
        return [value, torch.autograd.grad(value, a)[0]]

    check_outputs(run)
