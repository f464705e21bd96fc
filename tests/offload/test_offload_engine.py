"""Streamed training must equal ordinary training of the same model."""

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


@pytest.mark.parametrize("micro", [1, 3])
@pytest.mark.parametrize("clip", [None, 0.5])
def test_streamed_equals_plain_hf_llama(micro, clip):
    cfg = OffloadConfig(lr=1e-2, weight_decay=0.1, max_grad_norm=clip)
    model = tiny_hf_llama()
    ref = copy.deepcopy(model)
    init = copy.deepcopy(model.state_dict())
    steps = make_steps(5, micro)
    losses, _ = train_streamed(model, steps, cfg)
    ref_losses = train_plain(ref, steps, cfg)
    torch.testing.assert_close(losses, ref_losses, rtol=1e-5, atol=0)
    assert_same_weights(model, ref)
    moved = [k for k, v in model.state_dict().items() if not torch.equal(v, init[k])]
    assert len(moved) == len(init)  # every tensor trained, the resident ones included


def test_clipping_is_active_and_exact():
    # a max norm far below the gradient norm: every step is clipped, so the test would fail
    # if the coefficient were applied late, to some blocks only, or not at all
    cfg = OffloadConfig(lr=1e-2, max_grad_norm=1e-3)
    model = tiny_hf_llama()
    ref = copy.deepcopy(model)
    steps = make_steps(3, 2)
    _, eng = train_streamed(model, steps, cfg)
    train_plain(ref, steps, cfg)
    assert eng.stats.grad_norm > 1e-2
    assert_same_weights(model, ref)


def test_offloaded_activations_equal_plain():
    cfg = OffloadConfig(lr=1e-2, offload_activations=True, max_grad_norm=1.0)
    model = tiny_hf_llama()
    ref = copy.deepcopy(model)
    steps = make_steps(3, 2)
    losses, eng = train_streamed(model, steps, cfg)
    torch.testing.assert_close(losses, train_plain(ref, steps, cfg), rtol=1e-5, atol=0)
    assert_same_weights(model, ref)
    assert eng.stats.transfers[("d2h", ("act", 0))] == 2  # once per micro-batch


def test_untied_and_tied_heads_both_train():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
    model = LlamaForCausalLM(cfg)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    ref = copy.deepcopy(model)
    ocfg = OffloadConfig(lr=1e-2)
    steps = make_steps(3, 1)
    train_streamed(model, steps, ocfg)
    train_plain(ref, steps, ocfg)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert_same_weights(model, ref)


def test_bf16_autocast_and_bf16_weights_train():
    steps = make_steps(6, 1, seed=3, repeat=True)
    for cfg in (OffloadConfig(lr=3e-3, autocast_bf16=True),
                OffloadConfig(lr=3e-3, weights_dtype=torch.bfloat16)):
        model = tiny_hf_llama()
        losses, eng = train_streamed(model, steps, cfg)
        assert losses[-1] < losses[0] - 0.05, losses
        assert eng.blocks[0].weights.dtype == cfg.weights_dtype
        assert eng.blocks[0].exp_avg.dtype == torch.float32


@pytest.mark.parametrize("variant", ["llama", "qwen3"])
def test_streamed_equals_plain_our_llama(variant):
    from torchtpu.models.llama import Llama, LlamaConfig
    from torchtpu.models.qwen import QwenConfig

    torch.manual_seed(0)
    mcfg = (LlamaConfig.tiny(n_layers=4, vocab_size=128) if variant == "llama"
            else QwenConfig.qwen3_tiny(n_layers=4, vocab_size=128))
    model = Llama(mcfg)
    ref = copy.deepcopy(model)
    cfg = OffloadConfig(lr=1e-2, weight_decay=0.1, max_grad_norm=0.5)
    steps = make_steps(5, 2)
    losses, _ = train_streamed(model, steps, cfg)
    ref_losses = train_plain(ref, steps, cfg, logits=lambda m, ids: m(ids)[0])
    torch.testing.assert_close(losses, ref_losses, rtol=1e-5, atol=0)
    assert_same_weights(model, ref)


@pytest.mark.parametrize("clip", [None, 0.5])
def test_head_in_token_slices_equals_plain(clip):
    # 2 x 16 tokens in slices of 5: slices cross rows and the unpredicted last positions
    cfg = OffloadConfig(lr=1e-2, weight_decay=0.1, max_grad_norm=clip, head_chunk_tokens=5)
    model = tiny_hf_llama()
    ref = copy.deepcopy(model)
    steps = make_steps(5, 2)
    steps[0][0][1][0, 3:7] = -100  # ignored labels are left out of the mean, as in the loss
    losses, eng = train_streamed(model, steps, cfg)
    ref_losses = train_plain(ref, steps, cfg)
    torch.testing.assert_close(losses, ref_losses, rtol=1e-5, atol=0)
    # the slices sum the loss and the head's weight gradient in another order
    assert_same_weights(model, ref, rtol=1e-4)
    assert eng.plan.device["head working set"] == 5 * 128 * (4 * 2 + 12)
