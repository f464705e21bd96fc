"""Convolution, pooling, group normalisation and upsampling (batch norm: nn_batch_norm.py).

Backward rules take the VJP of the forward rule: one definition, and XLA fuses the rest.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import torch
from jax import lax

from .dtypes import LOW_PRECISION, lowest, upcast
from .elementwise import exact_division, exact_rsqrt
from .linalg import _PRECISION
from .reduction import blocked_sum, channel_sum
from .registry import lowering

aten = torch.ops.aten


def _expand(param, nd):
    """PyTorch lets a one-element list stand for every spatial dimension (padding='valid')."""
    return tuple(param) * nd if len(param) == 1 else tuple(param)


def _conv(x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    nd = w.ndim - 2
    stride, padding, dilation, output_padding = (
        _expand(p, nd) for p in (stride, padding, dilation, output_padding))
    # bfloat16/float16 accumulate (and add the bias) in float32, rounding once, as on CPU.
    acc = jnp.float32 if x.dtype in LOW_PRECISION else None
    spatial = "DHW"[-nd:] if nd <= 3 else None
    dn = lax.conv_dimension_numbers(
        x.shape, w.shape, ("NC" + spatial, ("IO" if transposed else "OI") + spatial,
                           "NC" + spatial))
    if transposed:
        # A transposed conv is the gradient of a conv: dilate the input by the stride.
        k = [(w.shape[2 + i] - 1) * dilation[i] for i in range(nd)]
        pads = [(k[i] - padding[i], k[i] - padding[i] + output_padding[i]) for i in range(nd)]
        if groups > 1:
            # (in, out/groups, k...) -> (out, in/groups, k...), group by group.
            cin, cout = w.shape[0] // groups, w.shape[1]
            w = w.reshape((groups, cin, cout) + w.shape[2:])
            w = jnp.swapaxes(w, 1, 2).reshape((groups * cout, cin) + w.shape[3:])
            dn = lax.conv_dimension_numbers(x.shape, w.shape,
                                            ("NC" + spatial, "OI" + spatial, "NC" + spatial))
        else:
            w = jnp.swapaxes(w, 0, 1)
            dn = lax.conv_dimension_numbers(x.shape, w.shape,
                                            ("NC" + spatial, "OI" + spatial, "NC" + spatial))
        w = jnp.flip(w, tuple(range(2, 2 + nd)))
        out = lax.conv_general_dilated(x, w, (1,) * nd, pads, lhs_dilation=stride,
                                       rhs_dilation=dilation, dimension_numbers=dn,
                                       feature_group_count=groups, precision=_PRECISION,
                                       preferred_element_type=acc)
    else:
        out = lax.conv_general_dilated(x, w, stride, [(p, p) for p in padding],
                                       rhs_dilation=dilation, dimension_numbers=dn,
                                       feature_group_count=groups, precision=_PRECISION,
                                       preferred_element_type=acc)
    if b is not None:
        if not jnp.issubdtype(x.dtype, jnp.inexact):  # CPU's integer kernels cast the bias first
            b = b.astype(x.dtype)
        out = out + b.reshape((1, -1) + (1,) * nd)
    return out.astype(x.dtype)


def _unbatched(x, nd):
    return x.ndim == nd + 1


@lowering(aten.convolution)
def _convolution(input, weight, bias, stride, padding, dilation, transposed,  # noqa: A002
                 output_padding, groups):
    nd = weight.ndim - 2
    if any(p < 0 for p in padding):  # CPU's check; the meta kernel lets it through
        raise RuntimeError("negative padding is not supported")
    x = input[None] if _unbatched(input, nd) else input
    out = _conv(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    if x.shape[1] == 0:  # CPU's empty-input path: no input channels, no output channels
        out = out[:, :0]
    return out[0] if _unbatched(input, nd) else out


@lowering(aten.convolution_backward)
def _convolution_backward(grad_output, input, weight, bias_sizes, stride, padding,  # noqa: A002
                          dilation, transposed, output_padding, groups, output_mask):
    if input.shape[1] == 0:  # the forward gave no channels (above): nothing flows back
        gb = jnp.zeros(tuple(bias_sizes or weight.shape[:1]), grad_output.dtype)
        return (jnp.zeros_like(input) if output_mask[0] else None,
                jnp.zeros_like(weight) if output_mask[1] else None, gb if output_mask[2] else None)
    f = lambda x, w: _conv(x, w, None, stride, padding, dilation, transposed,  # noqa: E731
                           output_padding, groups)
    _, vjp = jax.vjp(f, input, weight)
    gx, gw = vjp(grad_output)
    nd = weight.ndim - 2
    gb = jnp.sum(grad_output, axis=(0,) + tuple(range(2, 2 + nd))) if output_mask[2] else None
    return (gx if output_mask[0] else None, gw if output_mask[1] else None, gb)


# What ``aten._convolution`` (a TorchScript trace's conv) calls on a backend of its own.
lowering(aten.convolution_overrideable)(_convolution)


@lowering(aten.convolution_backward_overrideable)
def _convolution_backward_overrideable(grad_output, input, weight, stride, padding,  # noqa: A002
                                       dilation, transposed, output_padding, groups,
                                       output_mask):
    return _convolution_backward(grad_output, input, weight, None, stride, padding, dilation,
                                 transposed, output_padding, groups, output_mask)


def _pool_cfg(x, kernel_size, stride, padding, dilation, nd):
    k = tuple(kernel_size) * (nd if len(kernel_size) == 1 else 1)
    s = tuple(stride) if stride else k
    s = s * (nd if len(s) == 1 else 1)
    p = tuple(padding) * (nd if len(padding) == 1 else 1)
    d = tuple(dilation) * (nd if len(dilation) == 1 else 1)
    lead = x.ndim - nd
    return ((1,) * lead + k, (1,) * lead + s, [(0, 0)] * lead + [(q, q) for q in p],
            (1,) * lead + d)


def _ceil_pad(x, window, strides, pads, dilation, ceil_mode):
    if not ceil_mode:
        return pads
    out = []
    for n, k, s, (lo, hi), d in zip(x.shape, window, strides, pads, dilation, strict=False):
        eff = (k - 1) * d + 1
        size = -(-(n + lo + hi - eff) // s) + 1
        if (size - 1) * s >= n + lo:
            size -= 1
        out.append((lo, max(hi, (size - 1) * s + eff - n - lo)))
    return out


def _one_window(xs, window, strides, pads, dil):
    """Dimensions with a single output window: slice the inputs ``xs`` to the elements that
    window covers and make it exactly that wide. Global pooling written as
    ``avg_pool2d(x, 2560, ceil_mode=True)`` on a 1x1 input (EfficientNet) otherwise has XLA
    sum 2560² padding elements per output, and constant-fold the divisor for minutes."""
    window, strides, pads = list(window), list(strides), list(pads)
    for axis, (n, k, s, (lo, hi), d) in enumerate(zip(xs[0].shape, window, strides, pads, dil,
                                                      strict=True)):
        if d != 1 or k == 1 or (n + lo + hi - k) // s + 1 != 1:
            continue
        end = min(n, k - lo)  # the window spans [-lo, k - lo) of the input
        xs = [lax.slice_in_dim(x, 0, end, axis=axis) for x in xs]
        window[axis], strides[axis], pads[axis] = end, 1, (0, 0)
    return xs, tuple(window), tuple(strides), pads


def _max_pool(x, kernel_size, stride, padding, dilation, ceil_mode, nd):
    window, strides, pads, dil = _pool_cfg(x, kernel_size, stride, padding, dilation, nd)
    pads = _ceil_pad(x, window, strides, pads, dil, ceil_mode)
    (x,), window, strides, pads = _one_window([x], window, strides, pads, dil)
    return lax.reduce_window(x, lowest(x.dtype), lax.max, window, strides, pads,
                             window_dilation=dil)


@lowering(aten.max_pool2d_with_indices, aten.max_pool3d_with_indices)
def _max_pool_with_indices(self, kernel_size, stride=(), padding=(0,), dilation=(1,),
                           ceil_mode=False):
    nd = 3 if len(kernel_size) == 3 else 2
    out = _max_pool(self, kernel_size, stride, padding, dilation, ceil_mode, nd)
    empty = _empty_window_indices(self.shape[-nd:], out.shape[-nd:], kernel_size, stride,
                                  padding, dilation)
    # Indices: flat position within each spatial plane of the max element.
    spatial = self.shape[-nd:]
    # int32 positions: float64 has no TPU support, and no plane holds 2^31 elements.
    plane = jnp.arange(math.prod(spatial), dtype=jnp.int32).reshape(spatial)
    plane = jnp.broadcast_to(plane, self.shape)
    window, strides, pads, dil = _pool_cfg(self, kernel_size, stride, padding, dilation, nd)
    pads = _ceil_pad(self, window, strides, pads, dil, ceil_mode)
    (self, plane), window, strides, pads = _one_window([self, plane], window, strides, pads, dil)

    def select(a, b):
        av, ai = a
        bv, bi = b
        take_b = (bv > av) | ((bv == av) & (bi < ai)) | jnp.isnan(bv)
        return jnp.where(take_b, bv, av), jnp.where(take_b, bi, ai)

    last = jnp.asarray(jnp.iinfo(jnp.int32).max, jnp.int32)
    _, idx = lax.reduce_window((self, plane), (lowest(self.dtype), last),
                               select, window, strides, pads, window_dilation=dil)
    idx = jnp.where(idx == last, jnp.asarray(empty, jnp.int32), idx)
    return out, idx.astype(jnp.int64)


def _empty_window_indices(spatial, out_spatial, kernel_size, stride, padding, dilation):
    """The index CPU's kernel gives a window that holds padding only (ceil_mode, or a dilation
    that steps over the input): its first position moved past the padding by whole dilations,
    flattened in the plane, even where that lies outside it."""
    nd = len(spatial)

    def per_dim(v, default):
        v = tuple(v) if v else default
        return v * nd if len(v) == 1 else v

    k = per_dim(kernel_size, None)
    s, p, d = per_dim(stride, k), per_dim(padding, (0,)), per_dim(dilation, (1,))
    flat = np.zeros(out_spatial, np.int64)
    plane_stride = 1
    for j in reversed(range(nd)):
        start = np.arange(out_spatial[j]) * s[j] - p[j]
        start = np.where(start < 0, start + (-start + d[j] - 1) // d[j] * d[j], start)
        flat += (start * plane_stride).reshape((-1,) + (1,) * (nd - 1 - j))
        plane_stride *= spatial[j]
    return flat.astype(np.int32)


@lowering(aten.max_pool2d_with_indices_backward, aten.max_pool3d_with_indices_backward)
def _max_pool_backward(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode,
                       indices):
    return _scatter_at_indices(grad_output, self, indices, 3 if len(kernel_size) == 3 else 2)


def _scatter_at_indices(grad_output, self, indices, nd):
    """Each output's gradient added at its input position: ``indices`` count positions in the
    last ``nd`` dimensions of ``self`` (one plane), as max and fractional max pooling give."""
    # Explicit sizes, not -1: an empty batch leaves -1 undetermined.
    planes = math.prod(self.shape[:-nd])
    flat_in, flat_out = math.prod(self.shape[-nd:]), math.prod(grad_output.shape[-nd:])
    out = jnp.zeros((planes, flat_in), grad_output.dtype)
    out = jax.vmap(lambda o, i, v: o.at[i].add(v))(
        out, indices.reshape(planes, flat_out), grad_output.reshape(planes, flat_out))
    return out.reshape(self.shape)


def _avg_divisor(shape, window, strides, pads, pads_c, count_include_pad):
    """CPU's divisor per output position, one dimension at a time (the product is separable):
    the window clipped to input plus padding, or to the input alone without count_include_pad;
    the ceil-mode overhang never counts."""
    divisor = np.ones((), np.int64)
    for n, k, s, (p, _), (_, hi) in zip(shape, window, strides, pads, pads_c, strict=True):
        start = np.arange((n + p + hi - k) // s + 1) * s - p
        end = np.minimum(start + k, n + p)
        if not count_include_pad:
            start, end = np.maximum(start, 0), np.minimum(end, n)
        divisor = np.multiply.outer(divisor, end - start)
    return divisor


def _avg_pool(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
              nd):
    window, strides, pads, dil = _pool_cfg(x, kernel_size, stride, padding, (1,), nd)
    pads_c = _ceil_pad(x, window, strides, pads, dil, ceil_mode)
    divisor = divisor_override or _avg_divisor(x.shape, window, strides, pads, pads_c,
                                               count_include_pad).astype(x.dtype)
    (x,), window, strides, pads_c = _one_window([x], window, strides, pads_c, dil)
    # A concrete (numpy) zero lets JAX see a window sum, which it can differentiate; a traced
    # init makes it a generic reduction with no VJP, and the backward rule below needs one.
    return lax.reduce_window(x, np.zeros((), x.dtype), lax.add, window, strides, pads_c) / divisor


@lowering(aten.avg_pool2d, aten.avg_pool3d)
def _avg_pool_rule(self, kernel_size, stride=(), padding=(0,), ceil_mode=False,
                   count_include_pad=True, divisor_override=None):
    nd = 3 if len(kernel_size) == 3 else 2
    # bfloat16/float16 sum and divide in float32, rounding once, as on CPU.
    out = _avg_pool(upcast(self), kernel_size, stride, padding, ceil_mode, count_include_pad,
                    divisor_override, nd)
    return out.astype(self.dtype)


@lowering(aten.avg_pool2d_backward, aten.avg_pool3d_backward)
def _avg_pool_backward(grad_output, self, kernel_size, stride, padding, ceil_mode,
                       count_include_pad, divisor_override):
    nd = 3 if len(kernel_size) == 3 else 2
    _, vjp = jax.vjp(lambda x: _avg_pool(x, kernel_size, stride, padding, ceil_mode,
                                         count_include_pad, divisor_override, nd), self)
    return vjp(grad_output)[0]


def _adaptive_avg(x, output_size):
    nd = len(output_size)
    if 0 in output_size:  # CPU's empty result
        return jnp.zeros(x.shape[:x.ndim - nd] + tuple(output_size), x.dtype)
    out = x
    for i, o in enumerate(output_size):
        axis = x.ndim - nd + i
        n = x.shape[axis]
        starts = [(j * n) // o for j in range(o)]
        ends = [-(-((j + 1) * n) // o) for j in range(o)]
        pieces = [jnp.mean(lax.slice_in_dim(out, s, e, axis=axis), axis=axis, keepdims=True)
                  for s, e in zip(starts, ends, strict=False)]
        out = jnp.concatenate(pieces, axis=axis)
    return out


@lowering(aten._adaptive_avg_pool2d)
def _adaptive_avg_pool(self, output_size):
    # One dimension at a time: bfloat16 stays float32 in between and rounds once, as on CPU.
    return _adaptive_avg(upcast(self), tuple(output_size)).astype(self.dtype)


def _windows(n: int, o: int):
    """Adaptive pooling's windows along one axis: each window's indices padded to the
    longest (with a mask of the real ones), and each window's length."""
    starts = [(j * n) // o for j in range(o)]
    lengths = [-(-((j + 1) * n) // o) - s for j, s in enumerate(starts)]
    k = max(lengths)
    index = np.array([[min(s + i, n - 1) for i in range(k)] for s in starts])
    mask = np.array([[i < m for i in range(k)] for m in lengths])
    return index, mask, np.array(lengths)


@lowering(aten._adaptive_avg_pool3d)
def _adaptive_avg_pool3d(self, output_size):
    """CPU's 3-d kernel: each window summed element by element in the input's own dtype
    (depth, then height, then width), then divided by its depth, its height and its width in
    turn (bfloat16 and float16 lose bits at every step; a float32 sum rounds its own way)."""
    if 0 in output_size:
        return _adaptive_avg(self, tuple(output_size))
    lead = self.ndim - 3
    x, masks, lengths = self, [], []
    for i, o in enumerate(output_size):
        index, mask, length = _windows(self.shape[lead + i], o)
        axis = lead + 2 * i
        x = jnp.take(x, index.reshape(-1), axis=axis)
        x = x.reshape(x.shape[:axis] + index.shape + x.shape[axis + 1:])
        masks.append(mask)
        lengths.append(length)
    # (..., oD, kD, oH, kH, oW, kW) -> (kD * kH * kW, ..., oD, oH, oW)
    valid = (masks[0][:, :, None, None, None, None] & masks[1][None, None, :, :, None, None]
             & masks[2][None, None, None, None])
    x = jnp.where(valid, x, jnp.zeros((), x.dtype))
    x = jnp.moveaxis(x, (lead + 1, lead + 3, lead + 5), (0, 1, 2))
    terms = x.reshape((math.prod(x.shape[:3]),) + x.shape[3:])
    total, _ = lax.scan(lambda acc, t: (acc + t, None), jnp.zeros(terms.shape[1:], x.dtype),
                        terms)
    for length in (lengths[0][:, None, None], lengths[1][:, None], lengths[2]):
        # the barrier keeps XLA from making (a / b) / c one division, a / (b * c)
        total = lax.optimization_barrier(exact_division(total, length))
    return total


def _adaptive_avg_pool_backward(grad_output, self, spatial: int):
    # The pool's own dimension count: an unbatched 3-D input has as many dims as a batched 2-D.
    size = grad_output.shape[-spatial:]
    _, vjp = jax.vjp(lambda x: _adaptive_avg(x, tuple(size)), self)
    return vjp(grad_output)[0]


@lowering(aten._adaptive_avg_pool2d_backward)
def _adaptive_avg_pool2d_backward(grad_output, self):
    return _adaptive_avg_pool_backward(grad_output, self, 2)


@lowering(aten._adaptive_avg_pool3d_backward)
def _adaptive_avg_pool3d_backward(grad_output, self):
    return _adaptive_avg_pool_backward(grad_output, self, 3)


def _group_norm(x, weight, bias, N, C, HxW, group, eps):
    xf = x.astype(jnp.float32) if x.dtype in (jnp.bfloat16, jnp.float16) else x
    g = xf.reshape(N, group, C // group * HxW)  # -1 cannot be inferred for empty inputs
    # the mean summed about as accurately as CPU's; the variance of the deviations from it
    mean = (blocked_sum(g) / g.shape[-1]).astype(g.dtype)
    rstd = exact_rsqrt(jnp.mean(jnp.square(g - mean[..., None]), axis=-1) + eps)
    out = ((g - mean[..., None]) * rstd[..., None]).reshape(x.shape)
    shape = (1, C) + (1,) * (x.ndim - 2)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out.astype(x.dtype), mean, rstd


@lowering(aten.native_group_norm)
def _native_group_norm(input, weight, bias, N, C, HxW, group, eps):  # noqa: A002
    return _group_norm(input, weight, bias, N, C, HxW, group, eps)


@lowering(aten.native_group_norm_backward)
def _native_group_norm_backward(grad_out, input, mean, rstd, weight, N, C, HxW, group,  # noqa: A002
                                output_mask):
    param_dtype = weight.dtype if weight is not None else input.dtype
    # In float32 for bfloat16/float16, each gradient rounded once (as CPU).
    grad_out, x, w = map(upcast, (grad_out, input, weight if weight is not None
                                  else jnp.ones((C,), input.dtype)))
    # The backward op gets no eps: work from the saved mean and rstd.
    xf = x.reshape(N, group, C // group * HxW)
    xhat = ((xf - mean[..., None]) * rstd[..., None]).reshape(input.shape)
    shape = (1, C) + (1,) * (input.ndim - 2)
    g = grad_out * w.reshape(shape)
    gg = g.reshape(N, group, C // group * HxW)
    xh = xhat.reshape(N, group, C // group * HxW)
    n = gg.shape[-1]
    gx = (rstd[..., None] / n) * (n * gg - jnp.sum(gg, -1, keepdims=True)
                                  - xh * jnp.sum(gg * xh, -1, keepdims=True))
    return (gx.reshape(input.shape).astype(input.dtype) if output_mask[0] else None,
            channel_sum(grad_out * xhat).astype(param_dtype) if output_mask[1] else None,
            channel_sum(grad_out).astype(param_dtype) if output_mask[2] else None)


def _nearest_indices(n_in, n_out, scale, exact_sizes):
    # nearest_idx (ATen/native/UpSample.h): with exact_sizes, the same size copies and twice
    # the size halves, whatever the scale says; otherwise floor(i * scale) in float32.
    if exact_sizes and n_out == n_in:
        return jnp.arange(n_out)
    if exact_sizes and n_out == 2 * n_in:
        return jnp.arange(n_out) // 2
    s = 1.0 / scale if scale is not None and scale > 0 else n_in / n_out
    return jnp.minimum(jnp.floor(jnp.arange(n_out) * s).astype(jnp.int32), n_in - 1)


def _upsample_nearest(x, output_size, scales, exact_sizes=True):
    """``scales`` holds one entry (a float or None) per spatial axis, or none at all."""
    nd = len(output_size)
    for i, o in enumerate(output_size):
        axis = x.ndim - nd + i
        scale = scales[i] if scales else None
        x = jnp.take(x, _nearest_indices(x.shape[axis], o, scale, exact_sizes), axis=axis)
    return x


@lowering(aten.upsample_nearest2d.default, aten.upsample_nearest1d.default,
          aten.upsample_nearest3d.default)
def _upsample_nearest_rule(self, output_size, *scales):
    # On CPU the 2-D forward and every backward treat those sizes apart; the 1-D and 3-D
    # forwards do not (so their gradients disagree with them there, as on CPU).
    return _upsample_nearest(self, tuple(output_size), scales, len(output_size) == 2)


@lowering(aten.upsample_nearest2d_backward.default, aten.upsample_nearest1d_backward.default,
          aten.upsample_nearest3d_backward.default)
def _upsample_nearest_backward(grad_output, output_size, input_size, *scales):
    x = jnp.zeros(tuple(input_size), grad_output.dtype)
    _, vjp = jax.vjp(lambda x: _upsample_nearest(x, tuple(output_size), scales), x)
    return vjp(grad_output)[0]
