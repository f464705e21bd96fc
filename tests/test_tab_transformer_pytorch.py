"""tab-transformer-pytorch on "tpu": TabTransformer (categorical embeddings, normalised
continuous features, MLP head) and FTTransformer train as on CPU."""

from __future__ import annotations

import pytest
import torch
from model_zoo_checks import check_training

pytest.importorskip("tab_transformer_pytorch")
from tab_transformer_pytorch import FTTransformer, TabTransformer  # noqa: E402

_g = torch.Generator().manual_seed(0)
CATEGORIES = (3, 5, 4)
CATEGORICAL = torch.stack([torch.randint(0, n, (6,), generator=_g) for n in CATEGORIES], -1)
CONTINUOUS = torch.randn(6, 4, generator=_g)
MEAN_STD = torch.randn(4, 2, generator=_g).abs()


def _loss(model, device):
    return model(CATEGORICAL.to(device), CONTINUOUS.to(device)).pow(2).mean()


@pytest.mark.slow
def test_tab_transformer_trains_as_on_cpu():
    check_training(lambda: TabTransformer(
        categories=CATEGORIES, num_continuous=4, dim=16, dim_out=1, depth=2, heads=2,
        attn_dropout=0.0, ff_dropout=0.0, mlp_hidden_mults=(2, 1), mlp_act=torch.nn.ReLU(),
        continuous_mean_std=MEAN_STD), _loss)


@pytest.mark.slow
def test_ft_transformer_trains_as_on_cpu():
    check_training(lambda: FTTransformer(
        categories=CATEGORIES, num_continuous=4, dim=16, dim_out=2, depth=2, heads=2,
        attn_dropout=0.0, ff_dropout=0.0), _loss)
