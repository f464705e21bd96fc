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
         "bigbird_pegasus"]
_VISION = ["vit", "beit", "dinov2", "convnext", "convnextv2", "mobilenet_v2"]


def _model(name: str):
    config = transformers.AutoConfig.for_model(name, **_SMALL)
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


@pytest.mark.parametrize("mode", ["strict", "fused", "compile"])
@pytest.mark.parametrize("name", _TEXT + _VISION)
def test_architecture_forward_backward_matches_cpu(name, mode):
    model, config = _model(name)
    twin = copy.deepcopy(model)
    inputs = _inputs(name, config)
    loss, logits, grads = _run(model, inputs, "cpu")
    if mode == "compile":
        # Past dynamo's recompile limit (transformers' forwards share one wrapper) the rest
        # would run in eager without a word: each model starts afresh, and must compile.
        torch._dynamo.reset()
        torchtpu.reset_metrics()
        tpu_loss, tpu_logits, tpu_grads = _run(twin, inputs, "tpu", compiled=True)
        assert torchtpu.metrics()["graph"].get("dynamo_graph", 0) >= 1
    else:
        with torchtpu.set_eager_mode(mode):
            tpu_loss, tpu_logits, tpu_grads = _run(twin, inputs, "tpu")
    _assert_matches((tpu_loss, tpu_logits, tpu_grads), (loss, logits, grads))


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
