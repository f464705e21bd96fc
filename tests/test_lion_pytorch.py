"""lion-pytorch's Lion optimizer on "tpu": the sign-of-interpolation update with coupled and
decoupled weight decay steps a small model's parameters and state as on CPU."""

from __future__ import annotations

import pytest
import torch
from conftest import assert_same
from model_zoo_checks import check_training

pytest.importorskip("lion_pytorch")
from lion_pytorch import Lion  # noqa: E402

X = torch.randn(8, 6, generator=torch.Generator().manual_seed(0))


def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.GELU(), torch.nn.Linear(8, 1))


def _loss(model, device):
    return model(X.to(device)).pow(2).mean()


@pytest.mark.parametrize("decoupled", [False, True])
def test_lion_steps_as_on_cpu(decoupled):
    check_training(_mlp, _loss, steps=3, optimizer=lambda params: Lion(
        params, lr=1e-2, weight_decay=0.1, decoupled_weight_decay=decoupled))


@pytest.mark.slow
def test_lion_state_after_steps():
    from conftest import TPU
    torch.manual_seed(0)
    models = {"cpu": _mlp()}
    models[TPU] = _mlp().to(TPU)
    models[TPU].load_state_dict(models["cpu"].state_dict())
    opts = {d: Lion(m.parameters(), lr=1e-2, betas=(0.8, 0.95)) for d, m in models.items()}
    for _ in range(3):
        for device, model in models.items():
            _loss(model, device).backward()
            opts[device].step()
            opts[device].zero_grad()
    for got, want in zip(opts[TPU].state.values(), opts["cpu"].state.values(), strict=True):
        assert_same(got["exp_avg"], want["exp_avg"], rtol=1e-5, atol=1e-6)
