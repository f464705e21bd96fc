"""perceiver-pytorch on "tpu": Perceiver (Fourier-encoded 2-D input, tied layers) and
PerceiverIO (masked inputs, decoder queries) train as on CPU."""

from __future__ import annotations

import pytest
import torch
from model_zoo_checks import check_training

pytest.importorskip("perceiver_pytorch")
from perceiver_pytorch import Perceiver, PerceiverIO  # noqa: E402

_g = torch.Generator().manual_seed(0)
IMAGE = torch.randn(2, 6, 6, 3, generator=_g)
SEQ, QUERIES = torch.randn(2, 10, 16, generator=_g), torch.randn(2, 5, 12, generator=_g)
MASK = torch.ones(2, 10, dtype=torch.bool)
MASK[0, 6:] = False


@pytest.mark.slow
def test_perceiver_trains_as_on_cpu():
    check_training(lambda: Perceiver(
        input_channels=3, input_axis=2, num_freq_bands=4, max_freq=10.0, depth=2,
        num_latents=8, latent_dim=16, cross_heads=1, latent_heads=2, cross_dim_head=8,
        latent_dim_head=8, num_classes=5, attn_dropout=0.0, ff_dropout=0.0,
        weight_tie_layers=True), lambda m, d: m(IMAGE.to(d)).logsumexp(-1).mean())


@pytest.mark.slow
def test_perceiver_io_trains_as_on_cpu():
    check_training(lambda: PerceiverIO(
        dim=16, queries_dim=12, logits_dim=7, depth=1, num_latents=6, latent_dim=16,
        cross_heads=1, latent_heads=2, cross_dim_head=8, latent_dim_head=8, decoder_ff=True),
        lambda m, d: m(SEQ.to(d), mask=MASK.to(d), queries=QUERIES.to(d)).pow(2).mean())
