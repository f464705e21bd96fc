"""The streaming trainer on the 'tpu' device: the same result as plain training on CPU."""

from __future__ import annotations

import copy

import pytest
import torch
from offload_testlib import (
    assert_same_weights,
    make_steps,
    tiny_hf_llama,
    train_plain,
    train_streamed,
)

import torchtpu  # noqa: F401
from torchtpu.offload.config import OffloadConfig


@pytest.mark.parametrize("clip", [None, 0.5])
def test_streamed_on_tpu_equals_plain_on_cpu(clip):
    cfg = OffloadConfig(lr=1e-2, weight_decay=0.1, max_grad_norm=clip)
    model = tiny_hf_llama(layers=3)
    ref = copy.deepcopy(model)
    steps = make_steps(3, 2)
    losses, eng = train_streamed(model, steps, cfg, device="tpu")
    ref_losses = train_plain(ref, steps, cfg)
    torch.testing.assert_close(losses, ref_losses, rtol=1e-5, atol=0)
    # XLA and PyTorch sum float32 in different orders; AdamW's update normalises those last-bit
    # gradient differences into whole learning-rate steps for near-zero gradients.
    assert_same_weights(model, ref, rtol=1e-3)
    assert any(kind == "h2d" for kind, _ in eng.stats.transfers)
