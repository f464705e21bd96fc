import pytest
import torch

from torchtpu.models.llama import Llama, LlamaConfig, rope_inv_freq


def _model(**kw):
    torch.manual_seed(0)
    return Llama(LlamaConfig.tiny(**kw)).eval()


def test_forward_shapes_and_loss():
    model = _model()
    idx = torch.randint(0, 256, (2, 10))
    targets = torch.randint(0, 256, (2, 10))
    targets[:, :3] = -100  # ignored, as a fine-tuning prompt mask would be
    logits, loss = model(idx, targets)
    assert logits.shape == (2, 10, 256)
    assert abs(loss.item() - torch.log(torch.tensor(256.0)).item()) < 0.3


def test_kv_cache_matches_full_forward():
    """Prefill, single-token decode, then a multi-token chunk mid-sequence (explicit mask)."""
    model = _model()
    idx = torch.randint(0, 256, (2, 40))
    full = model(idx)[0]
    cache = model.new_cache(2, 48)
    parts = [model(idx[:, :20], cache=cache)[0],
             model(idx[:, 20:21], cache=cache, start_pos=20)[0],
             model(idx[:, 21:40], cache=cache, start_pos=21)[0]]
    torch.testing.assert_close(torch.cat(parts, 1), full, atol=1e-5, rtol=1e-5)


def test_kv_cache_overflow_raises():
    model = _model()
    cache = model.new_cache(1, 4)
    with pytest.raises(ValueError, match="KV cache holds 4"):
        model(torch.zeros(1, 5, dtype=torch.long), cache=cache)


def test_blocks_run_one_by_one():
    """The streaming-trainer contract documented in the module docstring."""
    model = _model()
    idx = torch.randint(0, 256, (1, 12))
    h = model.embed_tokens(idx)
    rope = model.rope(torch.arange(12))
    for block in model.layers:
        h = block(h, rope)
    torch.testing.assert_close(model.lm_head(model.norm(h)), model(idx)[0])


def test_tied_embeddings():
    m = _model(tie_word_embeddings=True)
    assert m.lm_head.weight is m.embed_tokens.weight
    assert _model().lm_head.weight is not _model().embed_tokens.weight


def test_rope_scaling_changes_only_low_frequencies():
    cfg = LlamaConfig.tiny(head_dim=64, n_heads=1, n_kv_heads=1)
    plain = rope_inv_freq(LlamaConfig.tiny(head_dim=64, n_heads=1, n_kv_heads=1, rope_scaling=None))
    scaled = rope_inv_freq(cfg)
    # original_max_position_embeddings=32, high_freq_factor=4: wavelengths under 8 stay as they are.
    short = 2 * torch.pi / plain < 8
    assert short.sum() == 1 and torch.equal(scaled[short], plain[short])
    assert (scaled[~short] < plain[~short]).all()
    torch.testing.assert_close(scaled[-1], plain[-1] / cfg.rope_scaling.factor)


def test_published_sizes():
    with torch.device("meta"):
        n = sum(p.numel() for p in Llama(LlamaConfig.llama3_2_1b()).parameters())
    assert 1.23e9 < n < 1.24e9  # Llama 3.2 1B: 1.236B with tied embeddings


def test_model_holds_no_buffers():
    """Nothing is left on meta after assign-loading, and bf16 casts leave RoPE in float32."""
    assert list(_model().buffers()) == []
    cos, _ = _model().to(torch.bfloat16).rope(torch.arange(3))
    assert cos.dtype == torch.float32
