"""x-transformers on "tpu": TransformerWrapper decoders and encoders (rotary, ALiBi, flash,
relative and dynamic position biases, memory tokens, padding masks, many attention variants),
the XTransformer encoder-decoder and AutoregressiveWrapper.generate train and decode as on CPU.

The default test is one small rotary decoder's training steps; the sweeps are ``slow``."""

from __future__ import annotations

import pytest
import torch
from conftest import TPU, assert_same
from model_zoo_checks import check_outputs, check_training

pytest.importorskip("x_transformers")
from x_transformers import Decoder, Encoder, TransformerWrapper, XTransformer  # noqa: E402
from x_transformers.autoregressive_wrapper import AutoregressiveWrapper  # noqa: E402

VOCAB = 32
_g = torch.Generator().manual_seed(0)
TOKENS = torch.randint(0, VOCAB, (2, 10), generator=_g)


def _lm(depth=1, dim=16, **layer_options):
    return lambda: TransformerWrapper(num_tokens=VOCAB, max_seq_len=16, attn_layers=Decoder(
        dim=dim, depth=depth, heads=2, **layer_options))


def _next_token_loss(model, device):
    x = TOKENS.to(device)
    logits = model(x)
    return torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, VOCAB),
                                             x[:, 1:].reshape(-1))


@pytest.mark.slow  # (~20-50 s from a cold compile cache)
def test_rotary_decoder_trains_as_on_cpu():
    check_training(_lm(rotary_pos_emb=True, ff_glu=True), _next_token_loss)


DECODER_OPTIONS = {
    "absolute": {},
    "alibi": dict(alibi_pos_bias=True, alibi_num_heads=1),
    "flash": dict(attn_flash=True),
    "rel_pos_bias": dict(rel_pos_bias=True),
    "dynamic_pos_bias": dict(dynamic_pos_bias=True),
    "xpos": dict(rotary_xpos=True),
    "rmsnorm_swish_glu": dict(use_rmsnorm=True, ff_glu=True, ff_swish=True),
    "sandwich_qk_norm": dict(sandwich_norm=True, attn_qk_norm=True),
    "talking_heads": dict(attn_pre_talking_heads=True, attn_post_talking_heads=True),
    "head_scale_on_attn": dict(attn_head_scale=True, attn_on_attn=True),
    "sparse_topk": dict(attn_sparse_topk=3),
    "grouped_kv_gated_values": dict(attn_kv_heads=1, attn_gate_values=True),
    "cope": dict(attn_use_cope=True, attn_cope_max_pos=8),
    "data_dependent_alibi": dict(attn_data_dependent_alibi=True),
    "softclamp": dict(attn_softclamp_logits=True, softclamp_output=True),
    "laser": dict(attn_laser=True),
    "sigmoid_attn": dict(attn_sigmoid=True),
    "l2_distance": dict(attn_l2_distance=True),
    "hyper_connections": dict(num_residual_streams=2),
    "integrate_shift_tokens": dict(integrate_layers=True, shift_tokens=1),
    "value_residual": dict(add_value_residual=True, learned_value_residual_mix=True),
    "dynamic_tanh_layerscale": dict(use_dynamic_tanh=True, use_layerscale=True),
    "scalenorm_residual_attn": dict(use_scalenorm=True, residual_attn=True),
    "gate_residual_macaron": dict(gate_residual=True, macaron=True),
    "selective": dict(attn_selective=True),
    "polar": dict(polar_pos_emb=True),
    "orthog": dict(orthog_residual=True, attn_orthog_projected_values=True),
    "max_attend_past_zero_kv": dict(attn_max_attend_past=4, attn_add_zero_kv=True),
    "learned_sink": dict(attn_head_learned_sink=True),
}


@pytest.mark.slow
@pytest.mark.parametrize("option", DECODER_OPTIONS)
def test_decoder_options_train_as_on_cpu(option):
    check_training(_lm(depth=2, **DECODER_OPTIONS[option]), _next_token_loss)


@pytest.mark.slow
def test_memory_tokens_and_memory_kv():
    check_training(lambda: TransformerWrapper(
        num_tokens=VOCAB, max_seq_len=16, num_memory_tokens=3,
        attn_layers=Decoder(dim=16, depth=2, heads=2, attn_num_mem_kv=2)), _next_token_loss)


@pytest.mark.slow
def test_masked_encoder():
    mask = torch.ones(2, 10, dtype=torch.bool)
    mask[1, 6:] = False

    def loss(model, device):
        return model(TOKENS.to(device), mask=mask.to(device)).pow(2).mean()

    check_training(lambda: TransformerWrapper(num_tokens=VOCAB, max_seq_len=16, attn_layers=Encoder(
        dim=16, depth=2, heads=2, rotary_pos_emb=True)), loss)


@pytest.mark.slow
def test_encoder_decoder():
    src = torch.randint(0, VOCAB, (2, 8), generator=torch.Generator().manual_seed(1))
    src_mask = torch.ones(2, 8, dtype=torch.bool)
    src_mask[0, 5:] = False

    def loss(model, device):
        return model(src.to(device), TOKENS.to(device), mask=src_mask.to(device))

    check_training(lambda: XTransformer(
        dim=16, enc_num_tokens=VOCAB, enc_depth=1, enc_heads=2, enc_max_seq_len=16,
        dec_num_tokens=VOCAB, dec_depth=1, dec_heads=2, dec_max_seq_len=16), loss)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["fused", "debug"])
def test_decoder_in_other_eager_modes(mode):
    check_training(_lm(depth=2, rotary_pos_emb=True), _next_token_loss, mode=mode)


@pytest.mark.slow
@pytest.mark.parametrize("cache_kv", [False, True])
def test_greedy_generation(cache_kv):
    def generate(device):
        torch.manual_seed(0)
        model = AutoregressiveWrapper(_lm(depth=2, rotary_pos_emb=True)()).to(device).eval()
        return model.generate(TOKENS[:, :3].to(device), 6, temperature=0.0, cache_kv=cache_kv)

    check_outputs(generate)


@pytest.mark.slow
def test_sampled_generation_repeats_with_its_seed():
    """tpu's generator is not CPU's, so sampled tokens are compared with a second run on tpu
    under the same seed (and checked for dtype, shape and range)."""
    torch.manual_seed(0)
    model = AutoregressiveWrapper(_lm(depth=1)()).to(TPU).eval()

    def sample():
        torch.manual_seed(5)
        return model.generate(TOKENS[:, :3].to(TPU), 6, temperature=1.0).cpu()

    first, second = sample(), sample()
    assert torch.equal(first, second)
    assert first.dtype == torch.int64 and first.shape == (2, 6)
    assert 0 <= int(first.min()) and int(first.max()) < VOCAB


@pytest.mark.slow
def test_compiled_decoder():
    torch.manual_seed(0)
    cpu_model = _lm(depth=2, rotary_pos_emb=True)()
    tpu_model = _lm(depth=2, rotary_pos_emb=True)().to(TPU)
    tpu_model.load_state_dict(cpu_model.state_dict())
    compiled = torch.compile(tpu_model, backend="tpu")
    loss_tpu, loss_cpu = _next_token_loss(compiled, TPU), _next_token_loss(cpu_model, "cpu")
    assert_same(loss_tpu, loss_cpu, rtol=1e-4, atol=1e-5)
    loss_tpu.backward()
    loss_cpu.backward()
    for got, want in zip(tpu_model.parameters(), cpu_model.parameters(), strict=True):
        assert_same(got.grad, want.grad, rtol=1e-3, atol=1e-4)
