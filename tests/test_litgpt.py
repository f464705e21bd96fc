"""litgpt's GPT used unchanged with ``.to("tpu")``: tiny configurations (2 layers, 32 wide) of
its Pythia-like (parallel residual, partial rotary), Llama-like (RMSNorm, grouped queries),
Gemma-like (soft-capping, sliding windows, q/k norms) and mixture-of-experts blocks, and its
LoRA and adapter (v1, v2) variants give CPU's logits, chunked cross-entropy, gradients and
optimizer steps; its KV-cached greedy ``generate`` gives CPU's tokens and its top-p filter
CPU's logits.

Steps use SGD: AdamW's first step turns a gradient of rounding noise (a key bias's, which
softmax ignores) into a full-size step of either sign. Adapter v1 caches its prefix's keys
and values on first use (litgpt's own design, made for inference), so the caches are
cleared between training steps. litgpt is installed ``--no-deps`` (its pin on
huggingface-hub<1.4 would downgrade transformers' hub), so it is not in the ``test`` extra.
The top-p filter is in the default suite; the models are ``slow`` (cold compiles)."""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import TPU, assert_same
from model_zoo_checks import assert_same_gradients, assert_same_parameters

import torchtpu

litgpt = pytest.importorskip("litgpt")
from litgpt import adapter, adapter_v2, lora  # noqa: E402
from litgpt.generate.base import generate, sample_top_p  # noqa: E402
from litgpt.model import GPT, Config  # noqa: E402
from litgpt.utils import chunked_cross_entropy  # noqa: E402

TOL = dict(rtol=1e-4, atol=1e-4)
_BASE = dict(n_layer=2, n_head=4, n_embd=32, block_size=32, vocab_size=64,
             padded_vocab_size=64, bias=False)
_LLAMA = dict(_BASE, norm_class_name="RMSNorm", mlp_class_name="LLaMAMLP",
              intermediate_size=64, n_query_groups=2)
CONFIGS = {
    "pythia": (GPT, Config, dict(_BASE, rotary_percentage=0.25, parallel_residual=True,
                                 bias=True)),
    "llama": (GPT, Config, _LLAMA),
    "gemma": (GPT, Config, dict(_LLAMA, name="Gemma-tiny", mlp_class_name="GemmaMLP",
                                n_query_groups=1, scale_embeddings=True,
                                post_attention_norm=True, post_mlp_norm=True, norm_qk=True,
                                attention_logit_softcapping=50.0,
                                final_logit_softcapping=30.0, sliding_window_size=8,
                                sliding_window_indices=[1, 0])),
    "moe": (GPT, Config, dict(_LLAMA, mlp_class_name="LLaMAMoE", moe_intermediate_size=16,
                              n_expert=4, n_expert_per_token=2)),
    "lora": (lora.GPT, lora.Config, dict(_LLAMA, lora_r=4, lora_alpha=8, lora_query=True,
                                         lora_value=True, lora_projection=True,
                                         lora_mlp=True, lora_head=True)),
    "adapter": (adapter.GPT, adapter.Config, dict(_LLAMA, adapter_prompt_length=3,
                                                  adapter_start_layer=0)),
    "adapter_v2": (adapter_v2.GPT, adapter_v2.Config, dict(_LLAMA, adapter_prompt_length=3,
                                                           adapter_start_layer=0)),
}
_TRAINABLE = {"lora": lora.mark_only_lora_as_trainable,
              "adapter": adapter.mark_only_adapter_as_trainable,
              "adapter_v2": adapter_v2.mark_only_adapter_v2_as_trainable}


def _pair(name):
    cls, config, kw = CONFIGS[name]
    torch.manual_seed(0)
    model = cls(config(**kw))
    for n, p in model.named_parameters():
        if "lora_B" in n or "adapter" in n or "gating" in n:  # zero at init: give them a say
            torch.nn.init.normal_(p, std=0.1)
    if name in _TRAINABLE:
        _TRAINABLE[name](model)
    return model, copy.deepcopy(model).to(TPU)


def _train(name, steps):
    model, model_tpu = _pair(name)
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 64, (2, 12), generator=g)
    targets = tokens.roll(-1, 1)
    targets[:, -1] = -100
    opts = [torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=0.1)
            for m in (model, model_tpu)]
    for step in range(steps):
        losses, logits = [], []
        for m, opt, dev in zip((model, model_tpu), opts, ("cpu", TPU), strict=True):
            for module in m.modules():
                if hasattr(module, "adapter_kv_cache"):
                    module.adapter_kv_cache = None
            logits.append(m(tokens.to(dev)))
            losses.append(chunked_cross_entropy(logits[-1], targets.to(dev), chunk_size=4))
            opt.zero_grad()
            losses[-1].backward()
        if step == 0:
            assert_same(logits[1], logits[0], **TOL)
        assert_same(losses[1], losses[0], **TOL)
        if step == 0:
            assert_same_gradients(model_tpu, model, rtol=1e-3, atol=1e-4)
        for opt in opts:
            opt.step()
    assert_same_parameters(model_tpu, model, rtol=1e-3, atol=1e-4)


@pytest.mark.slow
def test_llama_like_gpt_forward_backward():
    _train("llama", steps=1)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CONFIGS))
def test_gpt_variants_training_steps(name):
    _train(name, steps=3)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["strict", "fused"])
@pytest.mark.parametrize("name", ["llama", "gemma"])
def test_kv_cached_greedy_generate(name, mode):
    model, model_tpu = _pair(name)
    model.eval().set_kv_cache(batch_size=1)
    model_tpu.eval().set_kv_cache(batch_size=1, device=torch.device(TPU))
    prompt = torch.tensor([3, 4, 5, 6, 7])
    with torch.no_grad(), torchtpu.set_eager_mode(mode):
        expected = generate(model, prompt, 14, temperature=0.0)
        actual = generate(model_tpu, prompt.to(TPU), 14, temperature=0.0)
    assert_same(actual, expected)


def test_top_p_filter():
    # sort, cumulative softmax, and a scatter back of the removal mask
    logits = torch.randn(50, generator=torch.Generator().manual_seed(2))
    assert_same(sample_top_p(logits.to(TPU), 0.7), sample_top_p(logits, 0.7))
