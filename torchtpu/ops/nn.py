"""Neural-network ops: embedding, normalisation, losses, attention."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import torch

from .conv import _scatter_at_indices
from .dtypes import check_with_meta, opmath, scalar_type_name, upcast
from .elementwise import exact_rsqrt
from .indexing import summed_apart
from .registry import lowering

aten = torch.ops.aten


@lowering(aten.embedding, skip_meta=True)
def _embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    # (CPU's checks come first: eager/nn_checks.py)
    check_with_meta(aten.embedding.default, weight, indices, padding_idx, scale_grad_by_freq,
                    sparse)
    return jnp.take(weight, indices, axis=0)


@lowering(aten.embedding_dense_backward)
def _embedding_dense_backward(grad_output, indices, num_weights, padding_idx,
                              scale_grad_by_freq):
    flat = indices.reshape(-1)
    grad = grad_output.reshape(flat.shape[0], grad_output.shape[-1])  # (-1 fails for none)
    if padding_idx >= 0:
        grad = jnp.where((flat == padding_idx)[:, None], 0, grad)
    if scale_grad_by_freq:
        counts = jnp.zeros((num_weights,), grad.dtype).at[flat].add(1)
        grad = grad / counts[flat][:, None]
    out = jnp.zeros((num_weights, grad.shape[1]), grad.dtype)
    return summed_apart(out.at[flat].add(grad))


def _norm_axes(x, normalized_shape):
    return tuple(range(x.ndim - len(normalized_shape), x.ndim))




def _layer_norm(x, weight, bias, axes, eps):
    xf = upcast(x)
    mean = jnp.mean(xf, axis=axes, keepdims=True)
    var = jnp.mean(jnp.square(xf - mean), axis=axes, keepdims=True)
    rstd = exact_rsqrt(var + eps)
    out = (xf - mean) * rstd
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out.astype(x.dtype), mean, rstd


@lowering(aten.native_layer_norm, skip_meta=True)
def _native_layer_norm(input, normalized_shape, weight, bias, eps):  # noqa: A002
    # The meta kernel says float32 statistics; CPU keeps them in the input's dtype unless the
    # parameters are float32 (its "mixed type"). Its checks still run.
    check_with_meta(aten.native_layer_norm.default, input, normalized_shape, weight, bias, eps)
    out, mean, rstd = _layer_norm(input, weight, bias, _norm_axes(input, normalized_shape), eps)
    mixed = any(p is not None and p.dtype == jnp.float32 for p in (weight, bias))
    stats = jnp.float32 if mixed else input.dtype
    return out, mean.astype(stats), rstd.astype(stats)


@lowering(aten.native_layer_norm_backward)
def _native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight,  # noqa: A002
                                bias, output_mask):
    axes = _norm_axes(input, normalized_shape)
    # Low precision computes in float32, as CPU does; and in CPU's form, x * rstd - mean *
    # rstd rather than (x - mean) * rstd, which rounds differently (a one-element
    # normalisation's weight gradient is not 0 on CPU).
    grad_out, x, mean, rstd, w = (upcast(v) for v in (grad_out, input, mean, rstd, weight))
    g = grad_out if w is None else grad_out * w
    scale = 1 / math.prod(input.shape[a] for a in axes)
    ds = jnp.sum(g * x, axis=axes, keepdims=True)
    db = jnp.sum(g, axis=axes, keepdims=True)
    b = (db * mean - ds) * rstd * rstd * rstd * scale
    c = -b * mean - db * rstd * scale
    grad_input = rstd * g + b * x + c
    lead = tuple(range(input.ndim - len(axes)))
    xhat = x * rstd + -rstd * mean
    grad_weight = (jnp.sum(grad_out * xhat, axis=lead).astype(weight.dtype)
                   if weight is not None else None)
    grad_bias = jnp.sum(grad_out, axis=lead).astype(bias.dtype) if bias is not None else None
    return (
        grad_input.astype(input.dtype) if output_mask[0] else None,
        grad_weight if output_mask[1] else None,
        grad_bias if output_mask[2] else None,
    )


@lowering(aten._weight_norm_interface_backward)
@opmath
def _weight_norm_backward(grad_w, saved_v, saved_g, saved_norms, dim):
    # w = g * v / |v|, the norm taken over every dimension but ``dim``.
    axes = tuple(a for a in range(saved_v.ndim) if a != dim % saved_v.ndim)
    grad_g = jnp.sum(grad_w * saved_v, axis=axes, keepdims=True) / saved_norms
    grad_v = saved_g / saved_norms * (grad_w - saved_v * (grad_g / saved_norms))
    return grad_v, grad_g.reshape(saved_g.shape)


@lowering(aten._fused_rms_norm)
def _fused_rms_norm(input, normalized_shape, weight, eps):  # noqa: A002
    axes = _norm_axes(input, normalized_shape)
    xf = input.astype(jnp.float32) if input.dtype in (jnp.bfloat16, jnp.float16) else input
    if eps is None:
        eps = jnp.finfo(xf.dtype).eps
    rstd = exact_rsqrt(jnp.mean(jnp.square(xf), axis=axes, keepdims=True) + eps)
    out = xf * rstd
    if weight is not None:
        out = out * weight
    return out.astype(input.dtype), rstd


# CPU's TORCH_CHECK wording for a bare condition.
_ATEN_CHECK = ("Expected {} to be true, but got false.  (Could this error message be improved?  "
               "If so, please report an enhancement request to PyTorch.)")


@lowering(aten._transform_bias_rescale_qkv, skip_meta=True)  # (PyTorch has no meta kernel)
def _transform_bias_rescale_qkv(qkv, qkv_bias, num_heads):
    """CPU's transform_bias_rescale_qkv_cpu: a (B, T, 3D) projection plus its bias split into
    q, k and v of (B, heads, T, D / heads), q times 1 / sqrt(D / heads)."""
    if qkv.ndim < 3:  # CPU reads sizes 0, 1 and 2 in turn
        if qkv.ndim == 0:
            raise IndexError("Dimension specified as 0 but tensor has no dimensions")
        raise IndexError(f"Dimension out of range (expected to be in range of [{-qkv.ndim}, "
                         f"{qkv.ndim - 1}], but got {qkv.ndim})")
    batch, length, width = qkv.shape[:3]
    dim = width // 3
    if dim % num_heads:
        raise RuntimeError(_ATEN_CHECK.format("D % num_head == 0"))
    if width % 3:
        raise RuntimeError(_ATEN_CHECK.format("_3D % 3 == 0"))
    dtype = jnp.dtype(qkv.dtype)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise NotImplementedError('"transform_bias_rescale_qkv" not implemented for '
                                  f"'{scalar_type_name(dtype)}'")
    head = dim // num_heads
    # CPU's kernel reads the first B * T * 3D elements of each buffer whatever its rank, adds
    # and scales in float32 for the half-width floats (one rounding), by 1 / sqrtf(head)
    # rounded to that precision.
    x = qkv.reshape(-1)[:batch * length * width].reshape(batch, length, width)
    x = upcast(x) + upcast(qkv_bias.reshape(-1)[:width].astype(dtype))
    inv_sqrt = x.dtype.type(1.0 / float(np.sqrt(x.dtype.type(head))))
    q, k, v = x.reshape(batch, length, 3, num_heads, head).transpose(2, 0, 3, 1, 4)
    return (q * inv_sqrt).astype(dtype), k.astype(dtype), v.astype(dtype)


def _nll(self, target, weight, reduction, ignore_index):
    batched = self.ndim > 1
    logp = self if batched else self[None]
    tgt = target if batched else target[None]
    c_axis = 1
    safe = jnp.where(tgt == ignore_index, 0, tgt)
    picked = jnp.take_along_axis(logp, jnp.expand_dims(safe, c_axis), axis=c_axis)
    picked = jnp.squeeze(picked, c_axis)
    w = jnp.ones_like(picked) if weight is None else weight[safe]
    w = jnp.where(tgt == ignore_index, 0, w).astype(self.dtype)
    loss = -picked * w
    if reduction == 0:
        return (loss if batched else loss[0]), jnp.zeros((), self.dtype)
    total = jnp.sum(w)
    if reduction == 1:
        return jnp.sum(loss) / total, total
    return jnp.sum(loss), total


@lowering(aten.nll_loss_forward, aten.nll_loss2d_forward)
def _nll_loss_forward(self, target, weight, reduction, ignore_index):
    return _nll(self, target, weight, reduction, ignore_index)


@lowering(aten.nll_loss_backward, aten.nll_loss2d_backward)
def _nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index,
                       total_weight):
    # A one-hot select rather than the scatter the gather's VJP would be: XLA fuses it into
    # log_softmax's backward instead of materialising zeros and scattering into them.
    batched = self.ndim > 1
    tgt = target if batched else target[None]
    kept = tgt != ignore_index
    safe = jnp.where(kept, tgt, 0)
    g = grad_output.astype(self.dtype)
    if reduction == 0:
        g = g if batched else g[None]
    elif reduction == 1:
        g = g / total_weight.astype(self.dtype)
    scale = jnp.broadcast_to(-g, safe.shape)
    if weight is not None:
        scale = weight[safe].astype(self.dtype) * scale
    # Class ids fit in int32, and int64 compares cost XLA:CPU twice the time.
    shape = (self if batched else self[None]).shape
    index = jnp.int32 if shape[1] < 2 ** 31 else safe.dtype
    classes = jax.lax.broadcasted_iota(index, shape, 1)
    hit = (classes == jnp.expand_dims(safe.astype(index), 1)) & jnp.expand_dims(kept, 1)
    out = jnp.where(hit, jnp.expand_dims(scale, 1), jnp.zeros((), self.dtype))
    return out if batched else out[0]


# Backward rules for ops that forward through decompositions: autograd calls them directly.


def _replication_pad(x, padding):
    """Edge padding of the last len(padding)//2 dims; negative pads crop."""
    nd = len(padding) // 2
    for i in range(nd):
        axis = x.ndim - 1 - i
        lo, hi = padding[2 * i], padding[2 * i + 1]
        n = x.shape[axis]
        idx = jnp.clip(jnp.arange(-lo, n + hi), 0, n - 1)
        x = jnp.take(x, idx, axis=axis)
    return x


@lowering(aten.replication_pad1d_backward, aten.replication_pad2d_backward,
          aten.replication_pad3d_backward)
def _replication_pad_backward(grad_output, self, padding):
    _, vjp = jax.vjp(lambda x: _replication_pad(x, tuple(padding)), self)
    return vjp(grad_output.astype(self.dtype))[0]


def _adaptive_max_pool(x, output_size):
    """Max over PyTorch's adaptive windows, one spatial dim at a time (max is separable; the
    first maximum in row-major order wins, as on CPU), with flat indices per plane."""
    nd = len(output_size)
    spatial = x.shape[-nd:]
    idx = jnp.broadcast_to(jnp.arange(math.prod(spatial)).reshape(spatial), x.shape)
    low = -jnp.inf if jnp.issubdtype(x.dtype, jnp.floating) else jnp.iinfo(x.dtype).min
    val = x
    for k in reversed(range(nd)):
        axis = x.ndim - nd + k
        n_in, n_out = val.shape[axis], output_size[k]
        o, i = jnp.arange(n_out)[:, None], jnp.arange(n_in)[None, :]
        member = (i >= (o * n_in) // n_out) & (i < ((o + 1) * n_in + n_out - 1) // n_out)
        v = jnp.where(member, jnp.moveaxis(val, axis, -1)[..., None, :], low)
        key = jnp.where(jnp.isnan(v), jnp.inf, v) if jnp.issubdtype(v.dtype, jnp.floating) else v
        j = jnp.argmax(key, axis=-1)[..., None]
        ix = jnp.broadcast_to(jnp.moveaxis(idx, axis, -1)[..., None, :], v.shape)
        val = jnp.moveaxis(jnp.take_along_axis(v, j, -1)[..., 0], -1, axis)
        idx = jnp.moveaxis(jnp.take_along_axis(ix, j, -1)[..., 0], -1, axis)
    return val, idx.astype(jnp.int64)


@lowering(aten.adaptive_max_pool2d, aten.adaptive_max_pool3d)
def _adaptive_max_pool_rule(self, output_size):
    return _adaptive_max_pool(self, tuple(output_size))


@lowering(aten.adaptive_max_pool2d_backward)
def _adaptive_max_pool2d_backward(grad_output, self, indices):
    return _scatter_at_indices(grad_output, self, indices, 2)


@lowering(aten.adaptive_max_pool3d_backward)
def _adaptive_max_pool3d_backward(grad_output, self, indices):
    return _scatter_at_indices(grad_output, self, indices, 3)


@lowering(aten.masked_scatter_backward)
def _masked_scatter_backward(grad_output, mask, sizes):
    """The source's gradient: the masked elements of grad_output in order, then zeros."""
    shape = jnp.broadcast_shapes(mask.shape, grad_output.shape)
    m = jnp.broadcast_to(mask, shape).reshape(-1)
    g = jnp.broadcast_to(grad_output, shape).reshape(-1)
    n = math.prod(sizes)
    pos = jnp.where(m, jnp.cumsum(m) - 1, n)
    return summed_apart(jnp.zeros((n,), g.dtype).at[pos].add(g, mode="drop")).reshape(tuple(sizes))
