"""transformers' ``generate`` on tpu (greedy, beam search, a static cache, logits processors;
strict and fused eager) gives CPU's tokens and scores, for a decoder-only and an
encoder-decoder model. Slow (cold compiles at every new length); test_training.py has the
greedy tokens in the default suite."""

from __future__ import annotations

import pytest
import torch

import torchtpu

transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.slow


def _model(kind: str):
    torch.manual_seed(0)
    if kind == "llama":
        config = transformers.LlamaConfig(
            vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
            pad_token_id=0)
        return transformers.AutoModelForCausalLM.from_config(config).eval()
    config = transformers.T5Config(vocab_size=128, d_model=32, d_ff=64, num_layers=2,
                                   num_heads=4, d_kv=8, decoder_start_token_id=0)
    return transformers.AutoModelForSeq2SeqLM.from_config(config).eval()


_DECODING = {
    "greedy": dict(do_sample=False),
    "beam": dict(do_sample=False, num_beams=3),
    "static_cache": dict(do_sample=False, cache_implementation="static"),
    "penalties": dict(do_sample=False, repetition_penalty=1.3, no_repeat_ngram_size=2),
}


def _generate(model, device: str, decoding: str):
    ids = torch.randint(3, 128, (2, 7), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, :2] = 0  # a left-padded row
    with torch.no_grad():
        out = model.to(device).generate(
            input_ids=ids.to(device), attention_mask=mask.to(device), max_new_tokens=6,
            return_dict_in_generate=True, output_scores=True, **_DECODING[decoding])
    return out.sequences.cpu(), [s.cpu() for s in out.scores]


@pytest.mark.parametrize("decoding", list(_DECODING))
@pytest.mark.parametrize("kind", ["llama", "t5"])
@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_generate_matches_cpu(kind, decoding, mode):
    model = _model(kind)
    expected_ids, expected_scores = _generate(model, "cpu", decoding)
    with torchtpu.set_eager_mode(mode):
        ids, scores = _generate(model, "tpu", decoding)
    torch.testing.assert_close(ids, expected_ids, rtol=0, atol=0)
    for got, want in zip(scores, expected_scores, strict=True):
        # -inf marks the tokens a processor banned: the same ones on both devices.
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
