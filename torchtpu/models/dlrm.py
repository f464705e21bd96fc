"""DLRM (Naumov et al. 2019): a click-through-rate model for dense + categorical features.

Dense features go through the bottom MLP to an embedding-sized vector; each categorical
feature is a bag of ids pooled (summed) by its own ``nn.EmbeddingBag`` table. The pairwise
dot products of all these vectors (strictly lower triangle) are concatenated with the bottom
MLP's output and fed to the top MLP, which ends in one logit per example.

Bags have a fixed size L (``sparse`` is (B, num_tables, L)), the shape-static form an XLA
device compiles once; pad short bags with an id whose row you keep at zero, or repeat ids.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class DLRMConfig:
    num_dense: int = 13
    table_sizes: tuple[int, ...] = (1000,) * 26
    embedding_dim: int = 16
    bottom_mlp: tuple[int, ...] = (512, 256, 64)  # the last layer, to embedding_dim, is implied
    top_mlp: tuple[int, ...] = (512, 256)  # the final layer, to one logit, is implied

    @classmethod
    def tiny(cls) -> DLRMConfig:
        return cls(num_dense=4, table_sizes=(50, 20, 100), embedding_dim=8,
                   bottom_mlp=(16,), top_mlp=(16,))

    @classmethod
    def criteo_kaggle(cls, table_sizes: tuple[int, ...] = (1000,) * 26) -> DLRMConfig:
        """The reference implementation's Kaggle Display Ads setup; the table sizes come from
        the preprocessed dataset, so pass them in."""
        return cls(13, table_sizes, 16, (512, 256, 64), (512, 256))

    @classmethod
    def mlperf_criteo_1tb(cls) -> DLRMConfig:
        """MLPerf's DLRM on Criteo 1TB: 128-dim embeddings, ~22.8B embedding parameters
        (91 GB in float32), so the tables only fit in host memory: an offload workload."""
        return cls(13, CRITEO_1TB_TABLE_SIZES, 128, (512, 256), (1024, 1024, 512, 256))


# Rows per categorical feature of Criteo 1TB, as in torchrec's DLRM example.
CRITEO_1TB_TABLE_SIZES = (
    45833188, 36746, 17245, 7413, 20243, 3, 7114, 1441, 62, 29275261, 1572176, 345138, 10,
    2209, 11267, 128, 4, 974, 14, 48937457, 11316796, 40094537, 452104, 12606, 104, 35,
)


def _mlp(sizes: list[int], final_activation: bool) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:], strict=False)):
        layers.append(nn.Linear(a, b))
        if final_activation or i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    def __init__(self, cfg: DLRMConfig):
        super().__init__()
        self.config = cfg
        d = cfg.embedding_dim
        self.bottom = _mlp([cfg.num_dense, *cfg.bottom_mlp, d], final_activation=True)
        self.tables = nn.ModuleList(nn.EmbeddingBag(n, d, mode="sum") for n in cfg.table_sizes)
        for t in self.tables:
            # Uniform(+-1/sqrt(n)) as in the reference implementation keeps pooled sums small.
            nn.init.uniform_(t.weight, -(t.num_embeddings**-0.5), t.num_embeddings**-0.5)
        f = 1 + len(cfg.table_sizes)
        self.top = _mlp([d + f * (f - 1) // 2, *cfg.top_mlp, 1], final_activation=False)

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor,
                labels: torch.Tensor | None = None):
        """dense (B, num_dense) float, sparse (B, num_tables, L) ids, labels (B,) in {0, 1}.

        Returns (logits (B,), binary cross-entropy or None).
        """
        x = self.bottom(dense)
        feats = [x] + [table(sparse[:, i]) for i, table in enumerate(self.tables)]
        t = torch.stack(feats, dim=1)  # (B, F, d)
        z = torch.bmm(t, t.transpose(1, 2))  # (B, F, F) pairwise dot products
        f = t.shape[1]
        li, lj = torch.tril_indices(f, f, offset=-1, device=t.device)
        logits = self.top(torch.cat([x, z[:, li, lj]], dim=1)).squeeze(1)
        loss = None
        if labels is not None:
            loss = F.binary_cross_entropy_with_logits(logits, labels.float())
        return logits, loss
