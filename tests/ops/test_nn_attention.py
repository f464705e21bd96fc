"""nn.TransformerEncoderLayer, nn.TransformerEncoder and nn.MultiheadAttention in inference
(eval, no grad) on tpu against CPU. PyTorch takes their fast paths there: single ops
(_transformer_encoder_layer_fwd, _native_multi_head_attention) that tpu runs as their steps."""

from __future__ import annotations

import copy
import re

import pytest
import torch
from conftest import TPU, raises_as_cpu
from torch import nn

TOL = dict(rtol=1e-5, atol=1e-5)
PADDING = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
CAUSAL = nn.Transformer.generate_square_subsequent_mask(5)
MASKS = {"none": {}, "padding": {"src_key_padding_mask": PADDING},
         "causal": {"src_mask": CAUSAL},
         "both": {"src_mask": CAUSAL, "src_key_padding_mask": PADDING}}


def _on_tpu(kwargs):
    return {k: v.to(TPU) for k, v in kwargs.items()}


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("masks", sorted(MASKS))
def test_encoder_layer_inference_matches_cpu(norm_first, activation, masks):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True,
                                       norm_first=norm_first, activation=activation).eval()
    on_tpu = copy.deepcopy(layer).to(TPU)
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        expected = layer(x, **MASKS[masks])
        out = on_tpu(x.to(TPU), **_on_tpu(MASKS[masks]))
    torch.testing.assert_close(out.cpu(), expected, **TOL)


@pytest.mark.parametrize("final_norm", [False, True])
@pytest.mark.parametrize("padding", [
    PADDING,  # each row's tokens first: CPU packs the batch into a nested tensor
    torch.tensor([[True] * 5, [False, False, True, True, True]]),  # a row of padding only
    torch.tensor([[False, True, False, True, True], [False] * 5]),  # not left-aligned
], ids=["left_aligned", "empty_row", "scattered"])
def test_encoder_inference_with_padding_matches_cpu(padding, final_norm):
    # CPU's nested path gives padded positions 0 (then the final norm's value of 0); tpu
    # keeps the batch dense, masks padding as keys and zeroes it at the end, as CPU's.
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    norm = nn.LayerNorm(16) if final_norm else None
    encoder = nn.TransformerEncoder(layer, 2, norm=norm).eval()
    with torch.no_grad():
        if norm is not None:
            norm.bias.fill_(0.5)
        on_tpu = copy.deepcopy(encoder).to(TPU)
        x = torch.randn(2, 5, 16)
        expected = encoder(x, src_key_padding_mask=padding)
        out = on_tpu(x.to(TPU), src_key_padding_mask=padding.to(TPU)).cpu()
    torch.testing.assert_close(out, expected, equal_nan=True, **TOL)


def test_multihead_attention_inference_with_every_key_masked_is_nan_as_on_cpu():
    torch.manual_seed(0)
    attention = nn.MultiheadAttention(16, 4, batch_first=True).eval()
    on_tpu = copy.deepcopy(attention).to(TPU)
    x, padding = torch.randn(2, 5, 16), torch.tensor([[True] * 5, [False] * 5])
    with torch.no_grad():
        expected = attention(x, x, x, key_padding_mask=padding, need_weights=False)[0]
        out = on_tpu(*[x.to(TPU)] * 3, key_padding_mask=padding.to(TPU),
                     need_weights=False)[0].cpu()
    assert expected[0].isnan().all()
    torch.testing.assert_close(out, expected, equal_nan=True, **TOL)


@pytest.mark.parametrize("need_weights", [False, True])
def test_multihead_attention_inference_matches_cpu(need_weights):
    torch.manual_seed(0)
    attention = nn.MultiheadAttention(16, 4, batch_first=True).eval()
    on_tpu = copy.deepcopy(attention).to(TPU)
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        expected = attention(x, x, x, key_padding_mask=PADDING, need_weights=need_weights)
        out = on_tpu(*[x.to(TPU)] * 3, key_padding_mask=PADDING.to(TPU),
                     need_weights=need_weights)
    torch.testing.assert_close(out[0].cpu(), expected[0], **TOL)
    if need_weights:
        torch.testing.assert_close(out[1].cpu(), expected[1], **TOL)
    else:  # CPU's fast path gives no weights (an undefined tensor), not an empty one
        assert expected[1] is None and out[1] is None


def _masked_softmax_masks(b, h, n):
    g = torch.Generator().manual_seed(0)
    full = torch.randint(0, 2, (b, h, n, n), generator=g).bool()
    full[0, 0, 1] = True  # a row masked throughout
    full[0, 0, :, 2] = True  # and a column
    return [(torch.randint(0, 2, (n, n), generator=g).bool(), 0),
            (torch.randint(0, 2, (b, n), generator=g).bool(), 1), (full, 2), (full, None)]


@pytest.mark.parametrize("dim", [0, 3, None])
@pytest.mark.parametrize("mask_i", range(4))
def test_masked_softmax_matches_cpu(dim, mask_i):
    # The fused masked softmax of BetterTransformer-style code (it had no rule): an (L, L)
    # or a (B, L) mask of a 4-d input, or one of its shape; a row masked throughout is NaN,
    # as on CPU. Its gradient where the mask has the input's shape (CPU's backward's only).
    x = torch.randn(2, 3, 5, 5, generator=torch.Generator().manual_seed(1))
    mask, mask_type = _masked_softmax_masks(2, 3, 5)[mask_i]
    out = torch._masked_softmax(x.to(TPU), mask.to(TPU), dim, mask_type)
    torch.testing.assert_close(out.cpu(), torch._masked_softmax(x, mask, dim, mask_type),
                               equal_nan=True, **TOL)
    if mask.shape == x.shape:
        grads = []
        for device in ("cpu", TPU):
            xd = x.clone().to(device).requires_grad_()
            torch._masked_softmax(xd, mask.to(device), dim, mask_type).backward(
                torch.ones_like(xd) + torch.arange(5.0, device=device))
            grads.append(xd.grad.cpu())
        torch.testing.assert_close(grads[1], grads[0], equal_nan=True, **TOL)


@pytest.mark.parametrize("mask, mask_type", [
    (torch.ones(5, 5, dtype=torch.bool), None), (torch.ones(5, 5, dtype=torch.bool), 3),
    (torch.ones(5, 5, dtype=torch.long), 0), (torch.ones(4, 4, dtype=torch.bool), 0),
    (torch.ones(3, 5, dtype=torch.bool), 1), (torch.ones(2, 3, 5, 4, dtype=torch.bool), 2),
])
def test_masked_softmax_bad_masks_raise_as_cpu(mask, mask_type):
    x = torch.randn(2, 3, 5, 5)
    with pytest.raises(RuntimeError) as on_cpu:
        torch._masked_softmax(x, mask, 3, mask_type)
    with pytest.raises(RuntimeError, match=re.escape(on_cpu.value.args[0])):
        torch._masked_softmax(x.to(TPU), mask.to(TPU), 3, mask_type)


def _native_mha_args(device, length=4, source=4):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, n, 8, generator=g) for n in (length, source, source))
    weights = torch.randn(24, 8, generator=g), torch.randn(24, generator=g)
    proj = torch.randn(8, 8, generator=g), torch.randn(8, generator=g)
    return [t.to(device) for t in (q, k, v)] + [8, 2] + [t.to(device) for t in (*weights, *proj)]


@pytest.mark.parametrize("mask_type", [0, 2])
def test_encoder_layer_inference_float_mask_masks_its_nonzeros_as_on_cpu(mask_type):
    # ATen's fast path makes a float mask boolean (nonzero masks): an additive mask of other
    # values than 0 and -inf gives other numbers than the slow path there, and here the same.
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).eval()
    on_tpu = copy.deepcopy(layer).to(TPU)
    x = torch.randn(2, 4, 8)
    bias = torch.randn(4, 4)
    args = _native_mha_args("cpu")
    with torch.no_grad():
        expected = layer(x, src_mask=bias)
        out = on_tpu(x.to(TPU), src_mask=bias.to(TPU)).cpu()
        bias[:, 1] = 0  # a column kept
        bias = bias if mask_type == 0 else bias.expand(2, 2, 4, 4)
        direct = torch._native_multi_head_attention(*args, bias, True, False, mask_type)
        on_tpu_direct = torch._native_multi_head_attention(
            *_native_mha_args(TPU), bias.to(TPU), True, False, mask_type)
    torch.testing.assert_close(out, expected, equal_nan=True, **TOL)
    for a, b in zip(on_tpu_direct, direct, strict=True):
        torch.testing.assert_close(a.cpu(), b, equal_nan=True, **TOL)


@pytest.mark.parametrize("case", ["cross_shapes", "untyped_mask", "bad_mask_type", "bad_heads"])
def test_native_multi_head_attention_bad_arguments_raise_as_cpu(case):
    def call(device):
        args = _native_mha_args(device, *((3, 5) if case == "cross_shapes" else ()))
        mask, mask_type = None, None
        if case in ("untyped_mask", "bad_mask_type"):
            mask = torch.zeros(4, 4, dtype=torch.bool, device=device)
            mask_type = 3 if case == "bad_mask_type" else None
        if case == "bad_heads":
            args[4] = 3
        return torch._native_multi_head_attention(*args, mask, True, True, mask_type)

    raises_as_cpu(call)


def test_native_multi_head_attention_of_an_empty_batch_gives_no_weights_as_cpu():
    args = _native_mha_args("cpu")
    args[:3] = [t[:0] for t in args[:3]]
    expected = torch._native_multi_head_attention(*args)
    out = torch._native_multi_head_attention(*[a.to(TPU) if isinstance(a, torch.Tensor) else a
                                               for a in args])
    assert expected[1] is None and out[1] is None
    assert out[0].shape == expected[0].shape and out[0].device.type == "tpu"


def test_inference_fast_paths_with_a_padding_mask_compile():
    # Under torch.compile (no nested tensors) they reach _masked_softmax, which has no meta
    # kernel: tracing it ran it on real tpu tensors, which failed ("could not find kernel").
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).eval()
    x, padding = torch.randn(2, 5, 8), PADDING
    with torch.no_grad():
        expected = layer(x, src_key_padding_mask=padding)
        weights = layer.self_attn(x, x, x, key_padding_mask=padding)[1]
        layer.to(TPU)
        out = torch.compile(layer, backend="tpu")(x.to(TPU), src_key_padding_mask=padding.to(TPU))
        attend = torch.compile(layer.self_attn, backend="tpu")
        out_weights = attend(*[x.to(TPU)] * 3, key_padding_mask=padding.to(TPU))[1]
    # CPU's eager path zeroes the padded positions (a nested batch), its compiled one does not
    keep = ~padding.unsqueeze(-1)
    torch.testing.assert_close(out.cpu() * keep, expected * keep, **TOL)
    torch.testing.assert_close(out_weights.cpu(), weights, **TOL)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_transform_bias_rescale_qkv_matches_cpu(dtype):
    # It had no rule (PyTorch's test_native_mha calls it); bfloat16 scales in float32, once
    torch.manual_seed(0)
    qkv, bias = torch.randn(4, 2, 72, dtype=dtype) * 10, torch.randn(72, dtype=dtype)
    expected = torch._transform_bias_rescale_qkv(qkv, bias, 4)  # a head of 6: 1/sqrt inexact
    out = torch._transform_bias_rescale_qkv(qkv.to(TPU), bias.to(TPU), 4)
    for a, e in zip(out, expected, strict=True):
        assert a.dtype == e.dtype and a.stride() == e.stride()
        torch.testing.assert_close(a.cpu(), e, rtol=0, atol=0)


@pytest.mark.parametrize("shape, heads, dtype", [((2, 12), 2, torch.float32),
                                                 ((2, 3, 13), 2, torch.float32),
                                                 ((2, 3, 12), 5, torch.float32),
                                                 ((2, 3, 12), 2, torch.int32)])
def test_transform_bias_rescale_qkv_bad_arguments_raise_as_cpu(shape, heads, dtype):
    def call(device):
        qkv = torch.ones(shape, dtype=dtype, device=device)
        torch._transform_bias_rescale_qkv(qkv, torch.ones(shape[-1], dtype=dtype,
                                                          device=device), heads)

    raises_as_cpu(call, Exception)
