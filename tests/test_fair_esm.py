"""fair-esm's models used unchanged with ``.to("tpu")``: its Alphabet's batch converter feeds a
small randomly initialised ESM-2 (2 layers, 32 wide) whose logits, per-layer representations,
attention maps and contact head give CPU's numbers, and whose masked-LM training steps (loss,
gradients, AdamW) follow CPU's; an MSA Transformer's axial attention too. All ``slow`` (cold
compiles: ~20 s for the ESM-2 forward alone)."""

from __future__ import annotations

import argparse
import copy

import pytest
import torch
import torch.nn.functional as F
from conftest import TPU, assert_same
from model_zoo_checks import assert_same_gradients, assert_same_parameters

import torchtpu

esm = pytest.importorskip("esm")

TOL = dict(rtol=1e-4, atol=1e-4)


def _model_and_tokens(num_layers=2):
    alphabet = esm.data.Alphabet.from_architecture("ESM-1b")
    # a padded batch with a <mask> token: token dropout rescales by the masked fraction
    _, _, tokens = alphabet.get_batch_converter()(
        [("a", "MKTAYIAKQRQISFVK"), ("b", "KALTARQ<mask>EVFDLIRD"), ("c", "MLK")])
    torch.manual_seed(0)
    model = esm.model.esm2.ESM2(num_layers=num_layers, embed_dim=32, attention_heads=4,
                                alphabet=alphabet, token_dropout=True)
    return model, copy.deepcopy(model).to(TPU), tokens, alphabet


@pytest.mark.slow
def test_esm2_logits_representations_attentions_and_contacts():
    model, model_tpu, tokens, _ = _model_and_tokens(num_layers=1)
    with torch.no_grad():
        kw = dict(repr_layers=[0, 1], need_head_weights=True, return_contacts=True)
        expected = model.eval()(tokens, **kw)
        actual = model_tpu.eval()(tokens.to(TPU), **kw)
    assert actual.keys() == expected.keys()
    for key in ("logits", "attentions", "contacts"):
        assert_same(actual[key], expected[key], **TOL)
    assert_same([actual["representations"][i] for i in (0, 1)],
                [expected["representations"][i] for i in (0, 1)], **TOL)


def _train(mode):
    model, model_tpu, tokens, alphabet = _model_and_tokens()
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-3) for m in (model, model_tpu)]
    with torchtpu.set_eager_mode(mode):
        for step in range(3):
            losses = []
            for m, opt, dev in zip((model, model_tpu), opts, ("cpu", TPU), strict=True):
                out = m.train()(tokens.to(dev), return_contacts=True)
                loss = F.cross_entropy(out["logits"].transpose(1, 2), tokens.to(dev),
                                       ignore_index=alphabet.padding_idx)
                loss = loss + out["contacts"].mean()
                opt.zero_grad()
                loss.backward()
                losses.append(loss)
            assert_same(losses[1], losses[0], **TOL)
            if step == 0:
                assert_same_gradients(model_tpu, model, rtol=1e-3, atol=1e-4)
            for opt in opts:
                opt.step()
    assert_same_parameters(model_tpu, model, rtol=1e-3, atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_esm2_masked_lm_training_steps(mode):
    _train(mode)


@pytest.mark.slow
def test_msa_transformer_axial_attention_and_contacts():
    # row and column (axial) attention over a batch of two MSAs of different depths
    alphabet = esm.data.Alphabet.from_architecture("msa_transformer")
    msa = [("a", "MKTAYIAKQR"), ("b", "MKTAYLAKQR"), ("c", "MRTAYIAKQ-")]
    _, _, tokens = alphabet.get_batch_converter()([msa, msa[:2]])
    args = argparse.Namespace(layers=2, embed_dim=32, ffn_embed_dim=64, attention_heads=4,
                              dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
                              max_tokens_per_msa=2 ** 14, max_tokens=2 ** 14, max_positions=64,
                              embed_positions_msa=True)
    torch.manual_seed(0)
    model = esm.model.msa_transformer.MSATransformer(args, alphabet).eval()
    model_tpu = copy.deepcopy(model).to(TPU)
    expected = model(tokens, repr_layers=[2], return_contacts=True)
    actual = model_tpu(tokens.to(TPU), repr_layers=[2], return_contacts=True)
    for key in ("logits", "contacts", "col_attentions", "row_attentions"):
        assert_same(actual[key], expected[key], **TOL)
    expected["logits"].square().mean().backward()
    actual["logits"].square().mean().backward()
    assert_same_gradients(model_tpu, model, rtol=1e-3, atol=1e-4)
