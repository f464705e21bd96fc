"""The streaming trainer on CUDA (pinned memory, copy streams, events): plain training's result.

Runs on a GPU machine only, in a process that does not register 'tpu' (`make test-gpu`).
"""

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

from torchtpu.offload.config import OffloadConfig

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    pytest.mark.skipif(torch._C._get_privateuse1_backend_name() == "tpu",
                       reason="'tpu' is registered: run with TORCHTPU_REGISTER_DEVICE=0"),
]


@pytest.mark.parametrize("clip,offload_acts", [(None, False), (0.5, True)])
def test_streamed_on_cuda_equals_plain_on_cpu(clip, offload_acts):
    cfg = OffloadConfig(lr=1e-2, weight_decay=0.1, max_grad_norm=clip,
                        offload_activations=offload_acts)
    model = tiny_hf_llama(layers=4)
    ref = copy.deepcopy(model)
    steps = make_steps(3, 2)
    losses, eng = train_streamed(model, steps, cfg, device="cuda")
    ref_losses = train_plain(ref, steps, cfg)
    torch.testing.assert_close(losses, ref_losses, rtol=1e-5, atol=0)
    # cuBLAS sums in another order than the CPU; AdamW turns last-bit gradient differences
    # into whole steps for near-zero gradients (as on tpu).
    assert_same_weights(model, ref, rtol=1e-3)
    assert eng.blocks[0].weights.is_pinned()
    # a block's weights cross at most once per sweep direction of each micro-batch
    per_block = [n for (kind, tag), n in eng.stats.transfers.items()
                 if kind == "h2d" and tag[0] == "block"]
    assert len(per_block) == 4 and max(per_block) <= 2 * len(steps[0])
