"""TransformerLens' HookedTransformer used unchanged with ``.to("tpu")``: a tiny randomly
initialised HookedTransformerConfig gives CPU's logits, ``run_with_cache`` activations and the
cache's residual-stream tools (accumulated / decomposed residual, per-head results, logit
attributions), activation patching through forward hooks, gradients seen by backward hooks,
and CPU's loss, gradients and parameters over training steps, for many architecture options
(rotary, ALiBi, shortformer, RMS / pre-norms, gated MLPs, grouped queries, local attention,
parallel attention+MLP, soft caps), in strict and fused eager mode and under
``torch.compile(backend="tpu")``.

TransformerLens 4 dropped HookedTransformer (its TransformerBridge wraps Hugging Face models
loaded by name): ``transformer-lens<4`` is needed, installed ``--no-deps`` (pyproject.toml
says why it is not in the ``test`` extra). ``generate`` is left out: its
``forward(..., start_at_layer=0)`` asserts ``type(input) == torch.Tensor``, which a tpu
tensor (a subclass) fails; its key-value-cached decoding is checked step by step instead.
All tests are ``slow``: importing transformer_lens alone takes ~6 s, and the models' cold
compiles more."""

from __future__ import annotations

import copy
from functools import partial

import pytest
import torch
from conftest import TPU, assert_same
from model_zoo_checks import check_training

import torchtpu

TOL = dict(rtol=1e-4, atol=1e-4)
VOCAB = 20
TOKENS = torch.randint(0, VOCAB, (2, 10), generator=torch.Generator().manual_seed(0))
BASE = dict(n_layers=2, d_model=16, n_ctx=12, d_head=4, n_heads=4, d_mlp=32, d_vocab=VOCAB,
            act_fn="gelu", normalization_type="LN", device="cpu", seed=0)
OPTIONS = {
    "layernorm_gelu": {},
    "rotary_rms_gated_silu": dict(positional_embedding_type="rotary", normalization_type="RMS",
                                  gated_mlp=True, act_fn="silu"),
    "grouped_query_rmspre": dict(n_key_value_heads=2, positional_embedding_type="rotary",
                                 normalization_type="RMSPre"),
    "shortformer_solu": dict(positional_embedding_type="shortformer", act_fn="solu_ln"),
    "alibi": dict(positional_embedding_type="alibi"),
    "attn_only_lnpre": dict(attn_only=True, normalization_type="LNPre"),
    "local_attention": dict(attn_types=["global", "local"], window_size=4),
    "bidirectional": dict(attention_dir="bidirectional"),
    "split_qkv_hooks": dict(use_split_qkv_input=True, use_attn_result=True,
                            use_hook_mlp_in=True),
    "parallel_no_norm_relu": dict(parallel_attn_mlp=True, normalization_type=None,
                                  act_fn="relu"),
    "soft_caps_unscaled": dict(use_attn_scale=False, attn_scores_soft_cap=5.0,
                               output_logits_soft_cap=10.0),
}


def _model(**options):
    tl = pytest.importorskip("transformer_lens")
    return tl.HookedTransformer(tl.HookedTransformerConfig(**(BASE | options)))


def _loss(model, device):
    return model(TOKENS.to(device), return_type="loss")


def _interpretability(model, device):
    """What an interpretability notebook does with a model: the cache and its residual-stream
    decompositions, per-head patching from a clean run into a corrupted one, and the gradient
    a backward hook sees."""
    tokens = TOKENS.to(device)
    out = {}
    logits, cache = model.run_with_cache(tokens)
    last = model.cfg.n_layers - 1
    out["logits"] = logits
    out["pattern"] = cache["pattern", 0]
    out["accumulated"] = cache.accumulated_resid(apply_ln=True)
    out["decomposed"] = cache.decompose_resid(apply_ln=True)
    heads = cache.stack_head_results(layer=-1)
    out["logit_attrs"] = cache.logit_attrs(heads[:, :, -1], tokens=tokens[:, -1], pos_slice=-1)

    def patch_head(z, hook, head):
        z[:, :, head] = cache[hook.name][:, :, head]
        return z

    corrupted = tokens.flip(0)
    out["patched"] = torch.stack([
        model.run_with_hooks(corrupted, return_type="loss", loss_per_token=True,
                             fwd_hooks=[(f"blocks.{last}.attn.hook_z",
                                         partial(patch_head, head=h))])
        for h in range(model.cfg.n_heads)])
    seen = {}
    model.add_hook("blocks.0.hook_resid_post",
                   lambda grad, hook: seen.setdefault("grad", grad.detach().clone()),
                   dir="bwd")
    try:
        model(tokens, return_type="loss").backward()
    finally:
        model.reset_hooks()
    out["hooked_grad"] = seen["grad"]
    out["embed_grad"] = model.W_E.grad
    return out


def _check_interpretability(mode, **options):
    model = _model(**options)
    model_tpu = copy.deepcopy(model).to(TPU)
    expected = _interpretability(model, "cpu")
    with torchtpu.set_eager_mode(mode):
        actual = _interpretability(model_tpu, TPU)
    assert actual.keys() == expected.keys()
    for key, value in expected.items():
        try:
            assert_same(actual[key], value, **TOL)
        except AssertionError as e:
            raise AssertionError(f"{key}: {e}") from e


@pytest.mark.slow
def test_cache_and_activation_patching_match_cpu():
    _check_interpretability("strict", n_layers=1, attn_only=True, d_mlp=None)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_rotary_cache_and_patching_match_cpu(mode):
    _check_interpretability(mode, positional_embedding_type="rotary")


@pytest.mark.slow
@pytest.mark.parametrize("option", OPTIONS)
def test_training_matches_cpu(option):
    check_training(partial(_model, **OPTIONS[option]), _loss)


@pytest.mark.slow
def test_fused_training_matches_cpu():
    check_training(partial(_model, positional_embedding_type="rotary"), _loss, mode="fused")


@pytest.mark.slow
def test_compiled_training_matches_cpu():
    check_training(partial(_model, positional_embedding_type="rotary", n_layers=1), _loss,
                   mode="compile")


@pytest.mark.slow
def test_kv_cached_decoding_matches_full_forward_and_cpu():
    """What ``generate`` would do, step by step: a prompt, then one token at a time through
    the key-value cache (grouped-query rotary attention), against one full forward."""
    from transformer_lens.cache.key_value_cache import TransformerLensKeyValueCache

    model = _model(positional_embedding_type="rotary", n_key_value_heads=2).eval()
    model_tpu = copy.deepcopy(model).to(TPU)

    def decode(m, device):
        cache = TransformerLensKeyValueCache.init_cache(m.cfg, device, len(TOKENS))
        tokens = TOKENS.to(device)

        def step(chunk):
            mask = torch.ones(chunk.shape, dtype=torch.long, device=device)
            return m(chunk, past_kv_cache=cache, attention_mask=mask)

        logits = [step(tokens[:, :4])] + [step(tokens[:, t:t + 1]) for t in range(4, 10)]
        return torch.cat(logits, 1), m(tokens)

    with torch.no_grad():
        expected, actual = decode(model, "cpu"), decode(model_tpu, TPU)
    assert_same(actual, expected, **TOL)
    assert_same(actual[0], actual[1].cpu(), **TOL)
