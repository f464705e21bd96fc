"""torch-harmonics used unchanged with ``.to("tpu")``: real scalar and vector spherical
harmonic transforms on equiangular, Legendre-Gauss and Lobatto grids and their inverses (an
rfft along longitude, a Legendre contraction along latitude), their gradients, quadrature,
resampling, and its layers (DISCO convolutions and their transposes on the pure-PyTorch path,
the spectral convolution, global attention on the sphere) give CPU's values and train as on
CPU.

torch-harmonics is installed ``--no-deps`` (its requirement pulls a CUDA build of a newer
torch), so it is not in the ``test`` extra. Its optimised kernels are C++ custom ops
registered for CPU and CUDA only (``disco_kernels::forward``,
``attention_kernels::permute_to_nhwc``): on tpu they fail with our "no lowering rule" error,
as on any other device, so the layers run with ``optimized_kernel=False``;
NeighborhoodAttentionS2 calls a layout custom op on every path and is left out. All tests
are ``slow`` (importing the package alone takes ~5 s)."""

from __future__ import annotations

import copy

import pytest
import torch
from model_zoo_checks import check_outputs, check_training

TOL = dict(rtol=1e-4, atol=1e-4)
NLAT, NLON = 8, 16
_g = torch.Generator().manual_seed(0)
SCALAR = torch.randn(2, 3, NLAT, NLON, generator=_g)
VECTOR = torch.randn(2, 2, 2, NLAT, NLON, generator=_g)


@pytest.fixture(scope="module")
def th():
    return pytest.importorskip("torch_harmonics")


@pytest.mark.slow
@pytest.mark.parametrize("grid", ["equiangular", "legendre-gauss", "lobatto"])
def test_transforms_and_gradients_match_cpu(th, grid):
    def run(device):
        sht = th.RealSHT(NLAT, NLON, grid=grid).to(device)
        isht = th.InverseRealSHT(NLAT, NLON, grid=grid).to(device)
        vsht = th.RealVectorSHT(NLAT, NLON, grid=grid).to(device)
        ivsht = th.InverseRealVectorSHT(NLAT, NLON, grid=grid).to(device)
        x = SCALAR.detach().to(device).requires_grad_()
        coeffs = sht(x)
        back = isht(0.5 * coeffs)
        (back.square().sum() + coeffs.abs().sum()).backward()
        vcoeffs = vsht(VECTOR.to(device))
        return coeffs, back, x.grad, vcoeffs, ivsht(vcoeffs)

    check_outputs(run, **TOL)


@pytest.mark.slow
def test_quadrature_and_resampling_match_cpu(th):
    check_outputs(lambda d: (th.QuadratureS2((NLAT, NLON)).to(d)(SCALAR.to(d)),
                             th.ResampleS2(NLAT, NLON, 12, 24).to(d)(SCALAR.to(d))), **TOL)


LAYERS = {
    "disco": lambda th: th.DiscreteContinuousConvS2(
        3, 4, in_shape=(NLAT, NLON), out_shape=(NLAT // 2, NLON // 2), kernel_shape=(3,),
        theta_cutoff=0.5, optimized_kernel=False),
    "disco_transpose": lambda th: th.DiscreteContinuousConvTransposeS2(
        3, 4, in_shape=(NLAT, NLON), out_shape=(2 * NLAT, 2 * NLON), kernel_shape=(3,),
        theta_cutoff=0.5, optimized_kernel=False),
    "spectral_conv": lambda th: th.SpectralConvS2((NLAT, NLON), (NLAT, NLON), 3, 4, bias=True),
    "attention": lambda th: th.AttentionS2(3, num_heads=1, in_shape=(NLAT, NLON),
                                           out_shape=(NLAT, NLON)),
}


@pytest.mark.slow
@pytest.mark.parametrize("layer", LAYERS)
def test_layers_train_as_on_cpu(th, layer):
    def loss(model, device):
        x = SCALAR.to(device)
        y = model(x, x, x) if layer == "attention" else model(x)
        return y.square().mean()

    check_training(lambda: copy.deepcopy(LAYERS[layer](th)), loss)
    # (the copy: the layers keep CPU-made constants that a copy moves as buffers)
