"""pykan's KAN used unchanged with ``.to("tpu")``: B-spline activations give CPU's outputs, a
grid update from samples (a least-squares refit of the spline coefficients, ``lstsq``) CPU's
coefficients, and a fit on a toy function (LBFGS with a strong-Wolfe line search, grid
updates on the way) CPU's loss history and parameters.

The fit runs in float64: in float32 the line search's branches turn rounding differences
(1e-7) into parameter differences of 1e-3 within 20 iterations, as they would between two CPU
builds. ``slow`` (cold compiles)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from conftest import TPU, assert_same

kan = pytest.importorskip("kan")
from kan.utils import create_dataset  # noqa: E402

pytestmark = pytest.mark.slow


def _pair(tmp_path, dtype):
    model = kan.KAN(width=[2, 3, 1], grid=3, k=3, seed=0, auto_save=False,
                    ckpt_path=str(tmp_path), device="cpu").to(dtype)
    data = create_dataset(lambda x: torch.exp(torch.sin(torch.pi * x[:, [0]]) + x[:, [1]] ** 2),
                          n_var=2, train_num=64, test_num=16, seed=0)
    data = {k: v.to(dtype) for k, v in data.items()}
    return model, copy.deepcopy(model).to(TPU), data, {k: v.to(TPU) for k, v in data.items()}


def test_spline_forward_and_grid_update(tmp_path):
    model, model_tpu, data, data_tpu = _pair(tmp_path, torch.float32)
    assert str(model_tpu.device) == TPU
    assert_same(model_tpu(data_tpu["train_input"]), model(data["train_input"]),
                rtol=1e-5, atol=1e-5)
    model.update_grid_from_samples(data["train_input"])
    model_tpu.update_grid_from_samples(data_tpu["train_input"])
    assert_same(list(model_tpu.parameters()), list(model.parameters()), rtol=1e-3, atol=1e-4)
    assert_same(model_tpu(data_tpu["test_input"]), model(data["test_input"]),
                rtol=1e-3, atol=1e-4)


def test_lbfgs_fit_with_grid_updates(tmp_path):
    model, model_tpu, data, data_tpu = _pair(tmp_path, torch.float64)
    kw = dict(opt="LBFGS", steps=3, update_grid=True, grid_update_num=2, lamb=0.001, log=100)
    history, history_tpu = model.fit(data, **kw), model_tpu.fit(data_tpu, **kw)
    for key in ("train_loss", "test_loss", "reg"):
        assert_same(torch.tensor(np.array(history_tpu[key])),
                    torch.tensor(np.array(history[key])), rtol=1e-6, atol=1e-8)
    assert_same(list(model_tpu.parameters()), list(model.parameters()), rtol=1e-6, atol=1e-8)
