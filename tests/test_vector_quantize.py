"""vector-quantize-pytorch on "tpu": VectorQuantize (EMA codebook updates in training mode,
k-means init, cosine codebooks with dead-code expiry, learnable codebooks, multi-head,
rotation trick), ResidualVQ and its grouped form, FSQ, LFQ, their residual forms, SimVQ and
LatentQuantize give CPU's codes, losses, gradients and codebook buffers.

The library samples vectors for k-means init and dead-code replacement from the device's
generator; those tests replace the sampler by a deterministic one (the first vectors), so
both devices start from the same codebook. The default test is one VectorQuantize's EMA
training steps; the sweeps are ``slow``."""

from __future__ import annotations

import pytest
import torch
from model_zoo_checks import check_outputs, check_training

vq_lib = pytest.importorskip("vector_quantize_pytorch")
import vector_quantize_pytorch.vector_quantize_pytorch as vq_module  # noqa: E402

_g = torch.Generator().manual_seed(0)
X = torch.randn(2, 12, 8, generator=_g)
IMAGE = torch.randn(1, 16, 4, 4, generator=_g)


@pytest.fixture
def deterministic_sampling(monkeypatch):
    monkeypatch.setattr(vq_module, "sample_vectors",
                        lambda samples, num: samples[torch.arange(num, device=samples.device)
                                                           % samples.shape[0]])


class _Encoder(torch.nn.Module):
    """A projection in front of the quantizer, so gradients flow through its straight-through
    estimator into parameters."""

    def __init__(self, quantizer):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)
        self.quantizer = quantizer

    def forward(self, x):
        return self.quantizer(self.proj(x))


def _quantizer_loss(model, device):
    quantized, _, aux_loss = model(X.to(device))[:3]
    return quantized.pow(2).mean() + aux_loss.sum()


@pytest.mark.slow  # (~20-50 s from a cold compile cache)
def test_ema_codebook_training_as_on_cpu():
    check_training(lambda: _Encoder(vq_lib.VectorQuantize(
        dim=8, codebook_size=16, decay=0.8, commitment_weight=1.0)), _quantizer_loss, steps=3)


TRAINED = {
    "kmeans_init": lambda: vq_lib.VectorQuantize(dim=8, codebook_size=16, kmeans_init=True,
                                                 kmeans_iters=3),
    "cosine_dead_codes": lambda: vq_lib.VectorQuantize(dim=8, codebook_size=16,
                                                       use_cosine_sim=True,
                                                       threshold_ema_dead_code=2),
    "learnable": lambda: vq_lib.VectorQuantize(dim=8, codebook_size=16,
                                               learnable_codebook=True, ema_update=False),
    "heads": lambda: vq_lib.VectorQuantize(dim=8, codebook_size=16, heads=2, codebook_dim=4,
                                           separate_codebook_per_head=True),
    "rotation_trick": lambda: vq_lib.VectorQuantize(dim=8, codebook_size=16,
                                                    rotation_trick=True),
    "residual": lambda: vq_lib.ResidualVQ(dim=8, num_quantizers=3, codebook_size=16),
    "grouped_residual": lambda: vq_lib.GroupedResidualVQ(dim=8, num_quantizers=2, groups=2,
                                                         codebook_size=16),
    "lfq": lambda: vq_lib.LFQ(dim=8, codebook_size=16, entropy_loss_weight=0.1,
                              diversity_gamma=1.0),
    "residual_lfq": lambda: vq_lib.ResidualLFQ(dim=8, codebook_size=16, num_quantizers=2),
    "simvq": lambda: vq_lib.SimVQ(dim=8, codebook_size=16, rotation_trick=True),
    "residual_simvq": lambda: vq_lib.ResidualSimVQ(dim=8, num_quantizers=2, codebook_size=16),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", TRAINED)
def test_quantizers_train_as_on_cpu(name, deterministic_sampling):
    check_training(lambda: _Encoder(TRAINED[name]()), _quantizer_loss, steps=3)


@pytest.mark.slow
@pytest.mark.parametrize("residual", [False, True])
def test_fsq_trains_as_on_cpu(residual):
    def make():
        if residual:
            return vq_lib.ResidualFSQ(dim=8, levels=[8, 5, 5, 3], num_quantizers=2)
        return vq_lib.FSQ(levels=[8, 5, 5, 3], dim=8)

    def loss(model, device):
        quantized, indices = model(X.to(device))
        return quantized.pow(2).mean()

    check_training(lambda: _Encoder(make()), loss, steps=3)


@pytest.mark.slow
def test_codes_round_trip_through_indices():
    def codes(device):
        torch.manual_seed(0)
        fsq = vq_lib.FSQ(levels=[8, 5, 5, 3]).to(device)
        lfq = vq_lib.LFQ(codebook_size=4096, dim=16, num_codebooks=4).to(device)
        latent = vq_lib.LatentQuantize(levels=[5, 5, 8], dim=16, commitment_loss_weight=0.1,
                                       quantization_loss_weight=0.1).to(device)
        q_fsq, i_fsq = fsq(X[..., :4].to(device))
        q_lfq, i_lfq, aux = lfq(IMAGE.to(device))
        q_lat, i_lat, lat_loss = latent(IMAGE.to(device))
        return [q_fsq, i_fsq, fsq.indices_to_codes(i_fsq), q_lfq, i_lfq, aux,
                lfq.indices_to_codes(i_lfq), q_lat, i_lat, lat_loss]

    check_outputs(codes)


@pytest.mark.slow
def test_multihead_image_quantizer_in_eval():
    def run(device):
        torch.manual_seed(0)
        vq = vq_lib.VectorQuantize(dim=16, codebook_dim=4, heads=4, codebook_size=32,
                                   separate_codebook_per_head=True,
                                   accept_image_fmap=True).to(device).eval()
        quantized, indices, loss = vq(IMAGE.to(device))
        return [quantized, indices, loss, vq.get_output_from_indices(indices)]

    check_outputs(run)
