"""torchani used unchanged with ``.to("tpu")``: an ANI model assembled from its components
(AEV computer with radial and angular terms, per-element atomic networks, self energies, xTB
repulsion and D3 dispersion; ``simple_ani`` with small AEVs) gives CPU's energies for a
padded batch of molecules, its forces (minus the gradient of the energy with respect to the
coordinates) and the parameter gradients of an energy-and-force loss (a gradient of a
gradient), and the training steps of a force loss. ``slow`` (cold compiles)."""

from __future__ import annotations

import copy
import os

import pytest
import torch
from conftest import TPU, assert_same
from model_zoo_checks import assert_same_gradients

import torchtpu

os.environ.setdefault("TORCHANI_NO_WARN_EXTENSIONS", "1")  # its CUDA extensions
torchani = pytest.importorskip("torchani")
from torchani.arch import simple_ani  # noqa: E402

pytestmark = pytest.mark.slow


def _model_and_molecules():
    torch.manual_seed(0)
    model = simple_ani(["H", "C", "N", "O"], "wb97x-631gd", radial_shifts=8, angular_shifts=4,
                       sections=4, dispersion=True)
    species = torch.tensor([[6, 1, 1, 1, 1], [8, 1, 1, -1, -1], [7, 6, 1, 8, 1]])  # -1: pad
    methane = torch.tensor([[0.0, 0, 0], [0.63, 0.63, 0.63], [-0.63, -0.63, 0.63],
                            [-0.63, 0.63, -0.63], [0.63, -0.63, -0.63]])
    g = torch.Generator().manual_seed(1)
    coords = methane.expand(3, 5, 3) + 0.05 * torch.randn(3, 5, 3, generator=g)
    return model, copy.deepcopy(model).to(TPU), species, coords


def _energies_and_forces(model, species, coords):
    coords = coords.detach().requires_grad_()
    energies = model((species, coords)).energies
    forces = -torch.autograd.grad(energies.sum(), coords, create_graph=True)[0]
    return energies, forces


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_energies_forces_and_force_training(mode):
    model, model_tpu, species, coords = _model_and_molecules()
    target = torch.tensor([0.1, 0.0, 0.0]).expand(3, 5, 3)
    opts = [torch.optim.SGD(m.parameters(), lr=1e-2) for m in (model, model_tpu)]
    with torchtpu.set_eager_mode(mode):
        for step in range(2):
            e, f = _energies_and_forces(model, species, coords)
            e_tpu, f_tpu = _energies_and_forces(model_tpu, species.to(TPU), coords.to(TPU))
            assert_same(e_tpu, e, rtol=1e-5, atol=1e-4)  # (Hartree, self energies ~ -50)
            assert_same(f_tpu, f, rtol=1e-4, atol=1e-4)
            losses = [(ee.square().mean() * 1e-4 + (ff - target.to(ff.device)).square().mean())
                      for ee, ff in ((e, f), (e_tpu, f_tpu))]
            assert_same(losses[1], losses[0], rtol=1e-4, atol=1e-5)
            for opt, lo in zip(opts, losses, strict=True):
                opt.zero_grad()
                lo.backward()
            if step == 0:
                assert_same_gradients(model_tpu, model, rtol=1e-3, atol=1e-5)
            for opt in opts:
                opt.step()
