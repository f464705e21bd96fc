"""The trainer's knobs in one place."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class OffloadConfig:
    """How to train: optimizer, precision, clipping, memory options."""

    lr: float = 1e-4
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.01
    # global-norm clipping across all streamed blocks; None disables it
    max_grad_norm: float | None = None
    # dtype of the host master weights (and of the weights on the device); moments stay fp32
    weights_dtype: torch.dtype = torch.float32
    # run block compute under bf16 autocast over the fp32 weights
    autocast_bf16: bool = False
    # keep each block's input activation in host memory instead of on the device
    offload_activations: bool = False
    # device bytes the run may use; None: what the device reports free
    device_budget: int | None = None
    # host bytes the run may use; None: what the OS reports available
    host_budget: int | None = None
    # threads running the host optimizer
    host_workers: int = 1
    # tokens whose logits exist at once: the head and the default loss run in slices of this
    # many tokens, each followed by its backward (a 128k vocabulary makes full logits of 16k
    # tokens ~30 GB); None: all tokens at once. Only the default causal_lm_loss is sliced.
    head_chunk_tokens: int | None = 4096
