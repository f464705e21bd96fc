"""A sweep over transformers' architectures (tiny random-weight configurations): a forward
and backward on tpu, in strict eager, fused eager and under torch.compile, give CPU's loss,
logits and gradients. Slow: `make test-slow`."""

from __future__ import annotations

import copy

import pytest
import torch

import torchtpu

transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.slow

# One set of small sizes under every name the configurations use for them; a configuration
# keeps the names it knows.
_SMALL = dict(
    vocab_size=99, hidden_size=32, intermediate_size=37, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, head_dim=8,
    d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
    decoder_attention_heads=4, encoder_ffn_dim=37, decoder_ffn_dim=37, d_kv=8, d_ff=37,
    num_layers=2, num_heads=4, n_positions=64, image_size=32, patch_size=8, num_channels=3,
    num_labels=3, pad_token_id=0, decoder_start_token_id=0, embedding_size=32,
    num_local_experts=4, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
    sliding_window=16, dropout_rate=0.0, attn_implementation="eager")
_VISION_SMALL = dict(hidden_sizes=[8, 16], depths=[1, 1], embed_dim=8, embedding_size=8)

_TEXT = ["bert", "roberta", "distilbert", "albert", "electra", "deberta-v2", "mobilebert",
         "gpt2", "opt", "bloom", "phi", "phi3", "gemma", "gemma2", "gemma3_text", "mistral",
         "qwen2", "qwen3", "qwen3_moe", "olmo", "olmo2", "stablelm", "mpt", "llama", "granite",
         "cohere", "starcoder2", "gpt_neox", "persimmon", "nemotron", "glm", "helium", "smollm3",
         "ernie", "xlm-roberta", "t5", "mt5", "longt5", "bart", "mbart", "pegasus", "marian",
         "bigbird_pegasus", "biogpt", "blenderbot", "convbert", "deberta", "falcon_mamba",
         "gpt_neo", "mixtral", "modernbert", "xlnet"]
# More text architectures, checked in the eager modes (torch.compile on the sample above).
_TEXT_EAGER = ["apertus", "apertus1p5_text", "arcee", "aria_text", "axk1", "axk2", "bamba", "beam",
               "bert-generation", "big_bird", "bitnet", "blenderbot-small", "camembert", "codegen",
               "cohere2", "cohere2_moe", "cohere_compass_text", "ctrl", "cwm", "data2vec-text",
               "deepseek_v2", "deepseek_v3", "deepseek_v32", "diffllama", "dory", "dots1",
               "dots3_note_text", "ernie4_5", "ernie4_5_moe", "esm", "esmc", "eurobert", "exaone",
               "exaone4", "exaone_moe", "falcon", "flaubert", "flex_olmo", "flint", "fnet", "fsmt",
               "glm4", "glm4_moe", "glm4_moe_lite", "glm_moe_dsa", "gpt-sw3", "gpt_bigcode",
               "gpt_neox_japanese", "gpt_oss", "gptj", "granite_swa", "granitemoe",
               "granitemoe_swa", "granitemoehybrid", "granitemoeshared", "gte", "hrm_text",
               "hunyuan_v1_dense", "hunyuan_v1_moe", "hy_v3", "hyperclovax", "ibert",
               "inkling2_loop_text", "inkling_text", "internlm3", "iquestcoder", "jais2", "jetmoe",
               "jina_embeddings_v3", "kolibri1", "kolibri1_1", "laguna", "lara_mini", "layoutlm",
               "led", "lfm2", "lfm2_moe", "lfm3", "llama4_text", "longformer", "luke", "m2m_100",
               "mamba", "mamba2", "megatron-bert", "mellum", "mimo_v2_flash", "minicpm3",
               "minicpm5_moe", "minimax", "minimax_m2", "minimax_m3_vl_text", "ministral",
               "ministral3", "modernbert-decoder", "moshi", "mpnet", "mra", "mvp", "nanochat",
               "neomme", "nllb-moe", "nomic_bert", "nystromformer", "olmo3", "olmoe", "openai-gpt",
               "param2moe", "phimoe", "plbart", "qwen2_moe", "qwen3_5_moe_text", "recurrent_gemma",
               "rembert", "roberta-prelayernorm", "roc_bert", "roformer", "sarvam_mla",
               "sarvam_moe", "seed_oss", "squeezebert", "tapas", "trocr", "ultrabert", "umt5",
               "vaultgemma", "xglm", "xlm", "xlm-roberta-xl", "xmod", "yoso", "youtu"]
_VISION = ["vit", "beit", "dinov2", "convnext", "convnextv2", "mobilenet_v2"]

# Keys a family needs besides _SMALL: grouped-matmul experts want 16-byte rows (so 32, not 37),
# multi-head latent attention its low ranks (and head_dim derived from them), a hybrid one
# attention layer among its two. None drops a _SMALL key the configuration refuses.
_MOE = dict(intermediate_size=32)
_MLA = dict(kv_lora_rank=16, q_lora_rank=16, qk_rope_head_dim=4, qk_nope_head_dim=4, v_head_dim=8,
            n_routed_experts=4, n_shared_experts=1, n_group=1, topk_group=1,
            first_k_dense_replace=1, intermediate_size=32, num_key_value_heads=4, head_dim=None)
_MAMBA = dict(mamba_n_heads=8, mamba_d_head=8, mamba_d_state=8, mamba_n_groups=1)
_ROPE = dict(rope_type="default", rope_theta=10000.0)
_CONFIG = {
    **dict.fromkeys(["aria_text", "cohere2_moe", "flex_olmo", "gpt_oss",
                     "granitemoe", "granitemoe_swa", "granitemoeshared", "hunyuan_v1_moe",
                     "minimax", "minimax_m2", "minimax_m3_vl_text", "mixtral", "olmoe", "phimoe",
                     "squeezebert"], _MOE),
    **dict.fromkeys(["axk1", "axk2", "deepseek_v2", "deepseek_v3", "deepseek_v32",
                     "glm4_moe_lite", "glm_moe_dsa", "minicpm3", "sarvam_mla", "youtu"], _MLA),
    "bamba": dict(_MAMBA, attn_layer_indices=[1]),
    "codegen": dict(rotary_dim=4),
    "cohere_compass_text": dict(layer_types=["sliding_attention", "full_attention"],
                                rope_parameters=dict(full_attention=_ROPE,
                                                     sliding_attention=_ROPE)),
    "dory": dict(n_input_layers=1, n_recurrent_layers=1, n_output_layers=0, n_recurrent_loops=2),
    "dots1": dict(n_routed_experts=4, n_shared_experts=1, intermediate_size=32),
    "dots3_note_text": dict(
        _MLA, head_dim=8, per_layer_config={}, index_topk=8, index_head_dim=8, index_n_heads=2,
        shared_experts_intermediate_size=16, layer_types=["sliding_attention", "indexed_attention"],
        rope_parameters=dict(indexed_attention=dict(_ROPE, partial_rotary_factor=0.5),
                             sliding_attention=dict(_ROPE, partial_rotary_factor=0.5))),
    "esmc": dict(num_key_value_heads=4),
    "falcon": dict(head_dim=None),
    "gpt_neo": dict(attention_types=[[["global", "local"], 1]], window_size=8),
    "gptj": dict(rotary_dim=4),
    "granitemoehybrid": dict(_MAMBA, layer_types=["mamba", "attention"], intermediate_size=32),
    "inkling2_loop_text": dict(
        intermediate_size=32, unpadded_vocab_size=99, swa_num_attention_heads=4,
        swa_num_key_value_heads=2, swa_head_dim=8, moe_intermediate_size=16, n_routed_experts=4,
        sliding_window_size=16, rel_extent=16, d_rel=4, layer_types=["hybrid_sliding", "hybrid"],
        n_layers_per_attn_res_block=1),
    "kolibri1_1": dict(head_dim=16, index_num_heads=2, index_head_dim=16, num_local_experts=4,
                       shared_expert_intermediate_size=16, mlp_only_intermediate_size=32),
    "lfm2_moe": dict(layer_types=["conv", "full_attention"], num_dense_layers=1,
                     intermediate_size=32),
    "luke": dict(entity_vocab_size=10, entity_emb_size=16),
    "mamba2": dict(expand=1, n_groups=1, state_size=8, chunk_size=8),
    "neomme": dict(per_layer_config={}, embedding_rank=16, embedding_dim=16, rope_parameters=dict(
        full_attention=dict(_ROPE, partial_rotary_factor=0.5),
        sliding_attention=dict(_ROPE, partial_rotary_factor=1.0))),
    "qwen3_5_moe_text": dict(layer_types=["linear_attention", "full_attention"],
                             linear_key_head_dim=8, linear_value_head_dim=8,
                             linear_num_key_heads=2, linear_num_value_heads=4),
    "recurrent_gemma": dict(block_types=["recurrent", "attention"], lru_width=32,
                            attention_window_size=16),
    "roc_bert": dict(pronunciation_vocab_size=10, shape_vocab_size=10, pronunciation_embed_dim=8,
                     shape_embed_dim=8),
    "xlnet": dict(max_position_embeddings=None, n_positions=None, d_inner=37, n_layer=2,
                  n_head=4, d_head=8),
    "xmod": dict(default_language="en_XX"),
}


def _model(name: str):
    keys = {key: value for key, value in {**_SMALL, **_CONFIG.get(name, {})}.items()
            if value is not None}
    config = transformers.AutoConfig.for_model(name, **keys)
    if name in _VISION:
        for key, value in _VISION_SMALL.items():
            if hasattr(config, key):
                setattr(config, key, value)
        auto = transformers.AutoModelForImageClassification
    elif config.is_encoder_decoder:
        auto = transformers.AutoModelForSeq2SeqLM
    elif type(config) in transformers.AutoModelForCausalLM._model_mapping:
        auto = transformers.AutoModelForCausalLM
    else:
        auto = transformers.AutoModelForMaskedLM
    torch.manual_seed(0)
    return auto.from_config(config).eval(), config


def _inputs(name: str, config) -> dict:
    gen = torch.Generator().manual_seed(1)
    if name in _VISION:
        return {"pixel_values": torch.randn(2, 3, 32, 32, generator=gen),
                "labels": torch.tensor([0, 2])}
    ids = torch.randint(1, 99, (2, 12), generator=gen)
    if config.is_encoder_decoder:
        return {"input_ids": ids, "decoder_input_ids": torch.randint(1, 99, (2, 7), generator=gen),
                "labels": torch.randint(1, 99, (2, 7), generator=gen)}
    return {"input_ids": ids, "labels": ids}


def _to(value, device: str):
    """`value` with its tensors, also those in lists and dicts (detection targets), on `device`."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(_to(v, device) for v in value)
    if isinstance(value, dict):
        return {k: _to(v, device) for k, v in value.items()}
    return value


def _run(model, inputs: dict, device: str, compiled: bool = False):
    model.to(device)
    forward = torch.compile(model, backend="tpu") if compiled else model
    out = forward(**_to(inputs, device))
    out.loss.backward()
    grads = {n: p.grad.cpu() for n, p in model.named_parameters() if p.grad is not None}
    return out.loss.detach().cpu(), out.logits.detach().cpu(), grads


@pytest.mark.parametrize(("name", "mode"), [
    *((name, mode) for name in _TEXT + _VISION for mode in ("strict", "fused", "compile")),
    *((name, mode) for name in _TEXT_EAGER for mode in ("strict", "fused"))])
def test_architecture_forward_backward_matches_cpu(name, mode):
    model, config = _model(name)
    twin = copy.deepcopy(model)
    inputs = _inputs(name, config)
    expected = _run(model, inputs, "cpu")
    _assert_matches(_run_on_tpu(twin, inputs, mode), expected)


def _run_on_tpu(model, inputs: dict, mode: str):
    """_run on tpu in an eager mode, or under torch.compile ("compile")."""
    if mode != "compile":
        with torchtpu.set_eager_mode(mode):
            return _run(model, inputs, "tpu")
    # Past dynamo's recompile limit (transformers' forwards share one wrapper) the rest
    # would run in eager without a word: each model starts afresh, and must compile.
    torch._dynamo.reset()
    torchtpu.reset_metrics()
    out = _run(model, inputs, "tpu", compiled=True)
    assert torchtpu.metrics()["graph"].get("dynamo_graph", 0) >= 1
    return out


def _assert_matches(got, expected, noise: float = 1e-7):
    """tpu's (loss, logits, gradients) are CPU's within float32 reduction-order tolerances.
    `noise` bounds the absolute error of a gradient that is zero but for rounding."""
    (tpu_loss, tpu_logits, tpu_grads), (loss, logits, grads) = got, expected
    assert tpu_grads.keys() == grads.keys() and grads
    torch.testing.assert_close(tpu_loss, loss, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(tpu_logits, logits, rtol=1e-4, atol=1e-5)
    for key, grad in grads.items():
        scale = grad.abs().max().item() if grad.numel() else 1.0
        torch.testing.assert_close(tpu_grads[key], grad, rtol=1e-3, atol=1e-4 * scale + noise,
                                   msg=lambda m, key=key: f"{key}: {m}")
