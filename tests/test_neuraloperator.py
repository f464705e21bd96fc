"""neuraloperator's FNO and TFNO used unchanged with ``.to("tpu")``: spectral convolutions
(rfftn, a complex einsum over the kept modes, irfftn) on small grids give CPU's outputs, H1 /
Lp losses, gradients and SGD steps; with Tucker and CP factorised weights too, whose
contractions go through opt_einsum (which picks torch as the backend by the class of a tpu
tensor, as for a CPU one). All ``slow`` (cold compiles); the
backend inference is checked in the default suite by tests/test_device.py."""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import TPU, assert_same
from model_zoo_checks import assert_same_gradients, assert_same_parameters

import torchtpu

neuralop = pytest.importorskip("neuralop")
from neuralop.losses import H1Loss, LpLoss  # noqa: E402
from neuralop.models import FNO, TFNO  # noqa: E402

TOL = dict(rtol=1e-4, atol=1e-4)
_2D = dict(n_modes=(4, 4), in_channels=1, out_channels=1, hidden_channels=8, n_layers=2)
MODELS = {
    "fno2d": (lambda: FNO(**_2D), (2, 1, 12, 12)),
    # padded domain and group norm, on a 1-D grid
    "fno1d_padded": (lambda: FNO(n_modes=(5,), in_channels=2, out_channels=1,
                                 hidden_channels=8, n_layers=2, domain_padding=0.25,
                                 norm="group_norm"), (2, 2, 16)),
    "tfno2d_tucker": (lambda: TFNO(**_2D, factorization="tucker", rank=0.5), (2, 1, 12, 12)),
    "tfno2d_cp_reconstructed": (lambda: TFNO(**_2D, factorization="cp", rank=0.5,
                                             implementation="reconstructed"), (2, 1, 12, 12)),
    "tfno3d": (lambda: TFNO(n_modes=(4, 4, 4), in_channels=1, out_channels=1,
                            hidden_channels=4, n_layers=1, factorization="tucker"),
               (1, 1, 8, 8, 8)),
    # separable weights; the output grid twice the input's along x
    "fno2d_separable_rescaled": (lambda: FNO(**_2D, separable=True,
                                             resolution_scaling_factor=[2, 1]),
                                 (2, 1, 12, 12)),
    "fno2d_complex": (lambda: FNO(**_2D, complex_data=True), (2, 1, 12, 12)),
}


def _check(name, steps, mode="strict"):
    make, shape = MODELS[name]
    torch.manual_seed(0)
    model = make()
    model_tpu = copy.deepcopy(model).to(TPU)
    complex_data = name.endswith("complex")
    dtype = torch.complex64 if complex_data else torch.float32
    g = torch.Generator().manual_seed(1)
    x = torch.randn(shape, generator=g, dtype=dtype)
    loss_fn = LpLoss(d=len(shape) - 2) if complex_data else H1Loss(d=len(shape) - 2)
    opts = [torch.optim.SGD(m.parameters(), lr=1e-2) for m in (model, model_tpu)]
    y = None
    with torchtpu.set_eager_mode(mode):
        for step in range(steps):
            out, out_tpu = model(x), model_tpu(x.to(TPU))
            if step == 0:
                assert_same(out_tpu, out, **TOL)
                y = torch.randn(out.shape, generator=g, dtype=dtype)
            loss, loss_tpu = loss_fn(out, y), loss_fn(out_tpu, y.to(TPU))
            assert_same(loss_tpu, loss, **TOL)
            for opt, lo in zip(opts, (loss, loss_tpu), strict=True):
                opt.zero_grad()
                lo.real.backward()
            if step == 0:
                assert_same_gradients(model_tpu, model, rtol=1e-3, atol=1e-4)
            for opt in opts:
                opt.step()
    assert_same_parameters(model_tpu, model, rtol=1e-3, atol=1e-4)


@pytest.mark.slow
def test_tucker_tfno_forward_backward():
    _check("tfno2d_tucker", steps=1)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MODELS))
def test_operator_training_steps(name):
    _check(name, steps=3)


@pytest.mark.slow
def test_fno_training_steps_fused():
    _check("fno2d", steps=3, mode="fused")
