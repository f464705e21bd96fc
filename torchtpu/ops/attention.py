"""Scaled dot-product attention as one op, with CPU's flash-attention numerics.

On a Python backend ``F.scaled_dot_product_attention`` runs PyTorch's math composite: about 20
ops forward and 15 backward, saving the (L, S) probabilities. Where CPU runs its flash kernel,
torchtpu runs ``torchtpu::attention`` instead (the routing is in autograd_formulas.py): one op
that saves its output and each row's log-sum-exp, and recomputes the probabilities in
``torchtpu::attention_backward``, as flash attention does. Where the (L, S) probabilities
take no more memory than the query, key, value and output already saved (short sequences:
S <= 4 E in float32), the op returns them as well and the backward reads them instead: on
XLA:CPU their batched dot and exponential are a quarter of the backward's time. As CPU's
kernel does, scores and softmax are float32 and the probabilities are rounded to the input
dtype before they multiply V.

Shapes: query (B, Hq, L, E), key (B, Hk, S, E), value (B, Hk, S, Ev); Hq a multiple of Hk
(grouped-query attention). ``attn_mask`` is boolean (False masks) or additive, broadcastable
to (B, Hq, L, S); ``is_causal`` masks key positions after the query's (top-left aligned).
A row with every key masked gives 0, as CPU does.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import torch

from .linalg import in_rows
from .registry import lowering

torch.library.define(
    "torchtpu::attention",
    "(Tensor query, Tensor key, Tensor value, Tensor? attn_mask, bool is_causal, float scale)"
    " -> (Tensor, Tensor, Tensor)",
)
torch.library.define(
    "torchtpu::attention_backward",
    "(Tensor grad_out, Tensor query, Tensor key, Tensor value, Tensor? attn_mask, Tensor out,"
    " Tensor logsumexp, Tensor probs, bool is_causal, float scale) -> (Tensor, Tensor, Tensor)",
)


def memory_order(query: torch.Tensor) -> tuple[int, ...]:
    """The output's dims from outermost to innermost in memory: the query's, as CPU's flash
    kernel lays its output out (a (B, L, H, E) buffer for a query transposed from one, so
    ``out.transpose(1, 2).view(B, L, H * E)`` works)."""
    stride = query.stride()
    return tuple(sorted(range(query.dim()), key=lambda d: (-stride[d], d)))


@torch.library.register_fake("torchtpu::attention")
def _attention_meta(query, key, value, attn_mask, is_causal, scale):
    if value.shape[-1] == query.shape[-1]:
        # CPU's kernel allocates empty_like(query): a dense query's exact strides (a size-1
        # dim's too), an expanded or sliced one's order made dense (contiguous where a stride
        # is 0), which sorting the strides alone does not give.
        out = torch.empty_like(query)
    else:
        out = torch.empty_permuted((*query.shape[:-1], value.shape[-1]), memory_order(query),
                                   dtype=query.dtype, device=query.device)
    acc = torch.float64 if query.dtype == torch.float64 else torch.float32
    probs = query.new_empty(probs_shape(query, key, value), dtype=acc)
    return out, query.new_empty(query.shape[:-1], dtype=acc), probs


@torch.library.register_fake("torchtpu::attention_backward")
def _attention_backward_meta(grad_out, query, key, value, attn_mask, out, logsumexp, probs,
                             is_causal, scale):
    # CPU's flash backward lays each gradient out as (B, L, H, E) whatever its input's layout
    # (a contiguous query's gradient too), as its meta kernel says.
    return tuple(torch.empty_permuted(x.shape, (0, 2, 1, 3), dtype=x.dtype, device=x.device)
                 for x in (query, key, value))


def probs_shape(query, key, value) -> tuple[int, ...]:
    """The probabilities' shape if the op keeps them for the backward, else (0,): kept when
    they take no more bytes than the query, key, value and output already saved."""
    shape = (*query.shape[:-1], key.shape[-2])
    itemsize = query.dtype.itemsize  # a torch or a jax dtype
    saved = 2 * math.prod(query.shape) + math.prod(key.shape) + math.prod(value.shape)
    return shape if math.prod(shape) * max(itemsize, 4) <= saved * itemsize else (0,)


def _opmath(dtype):
    """CPU's accumulation type: float64 stays float64, the rest compute in float32."""
    return jnp.float64 if dtype == jnp.float64 else jnp.float32


class _Heads:
    """Query-side arrays as the einsums see them: (B, Hk, G, L, ·) when G query heads share
    each key head, else as they are (the 5-d form costs XLA:CPU a third more time)."""

    def __init__(self, query, key):
        self.groups = query.shape[1] // key.shape[1]
        self.h = "hg" if self.groups > 1 else "h"  # einsum letters of the query head dims

    def __call__(self, x):
        if self.groups == 1:
            return x
        b, hq, *rest = x.shape
        return x.reshape(b, hq // self.groups, self.groups, *rest)

    def summed(self, x, dtype):
        """A key or value gradient (B, Hk, G, S, ·) from each of its query heads, summed over
        them as CPU's flash kernel sums: into the gradient's own dtype, one head at a time
        (a low-precision GQA gradient rounds at each head)."""
        if self.groups == 1:
            return x.astype(dtype)
        out = x[:, :, 0].astype(dtype)
        for i in range(1, self.groups):
            out = (out.astype(x.dtype) + x[:, :, i]).astype(dtype)
        return out


def _masked_scores(heads, query, key, attn_mask, is_causal, scale):
    """Scores (B, H.., L, S) in the accumulation type, -inf where masked."""
    acc = _opmath(query.dtype)
    h = heads.h
    s = jnp.einsum(f"b{h}le,bhse->b{h}ls", heads(query), key, preferred_element_type=acc)
    s = s * scale
    if attn_mask is not None:
        mask = heads(jnp.broadcast_to(attn_mask, (*query.shape[:-1], key.shape[-2])))
        s = jnp.where(mask, s, -jnp.inf) if mask.dtype == jnp.bool_ else s + mask.astype(acc)
    if is_causal:
        length, size = s.shape[-2:]
        s = jnp.where(jnp.tril(jnp.ones((length, size), jnp.bool_)), s, -jnp.inf)
    return s


@lowering(torch.ops.torchtpu.attention.default)
def _attention(query, key, value, attn_mask, is_causal, scale):
    heads = _Heads(query, key)
    h = heads.h
    s = _masked_scores(heads, query, key, attn_mask, is_causal, scale)
    m = jnp.max(s, axis=-1, keepdims=True)
    e = jnp.exp(s - jnp.where(jnp.isfinite(m), m, 0))  # a fully masked row: all zeros
    total = jnp.sum(e, axis=-1, keepdims=True)
    o = jnp.einsum(f"b{h}ls,bhsd->b{h}ld", e.astype(value.dtype), value,
                   preferred_element_type=e.dtype)
    o = jnp.where(total > 0, o / total, 0)
    lse = (m + jnp.log(total))[..., 0]
    shape = probs_shape(query, key, value)
    probs = (jnp.where(total > 0, e / total, 0).reshape(shape) if len(shape) > 1
             else jnp.zeros(shape, e.dtype))
    return (o.reshape(*query.shape[:-1], value.shape[-1]).astype(query.dtype),
            lse.reshape(query.shape[:-1]), probs)


@lowering(torch.ops.torchtpu.attention_backward.default)
def _attention_backward(grad_out, query, key, value, attn_mask, out, logsumexp, probs,
                        is_causal, scale):
    heads = _Heads(query, key)
    h = heads.h
    if probs.size:  # kept by the forward
        p = heads(probs)
    else:
        s = _masked_scores(heads, query, key, attn_mask, is_causal, scale)
        lse = heads(logsumexp[..., None]).astype(s.dtype)
        p = jnp.exp(s - jnp.where(jnp.isfinite(lse), lse, jnp.inf))  # masked rows: p = 0
    dout = heads(grad_out)
    dt, acc = query.dtype, p.dtype
    dv = jnp.einsum(f"b{h}sl,b{h}ld->b{h}sd", in_rows(jnp.swapaxes(p.astype(dt), -1, -2)), dout,
                    preferred_element_type=acc)
    dp = jnp.einsum(f"b{h}ld,bhsd->b{h}ls", dout, value, preferred_element_type=acc)
    rowdot = jnp.sum(dout.astype(acc) * heads(out).astype(acc), axis=-1, keepdims=True)
    ds = (p * (dp - rowdot)).astype(dt)
    dq = jnp.einsum(f"b{h}ls,bhse->b{h}le", ds, key, preferred_element_type=acc) * scale
    dk = jnp.einsum(f"b{h}sl,b{h}le->b{h}se", in_rows(jnp.swapaxes(ds, -1, -2)), heads(query),
                    preferred_element_type=acc)
    return (dq.reshape(query.shape).astype(dt), heads.summed(dk * scale, key.dtype),
            heads.summed(dv, value.dtype))
