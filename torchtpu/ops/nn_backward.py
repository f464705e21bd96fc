"""Upsampling, grid sampling and margin losses: the backward ops (and missing forwards).

Each backward is the VJP (or, for a linear op, the transpose) of a JAX forward that follows
PyTorch's CPU kernels: the same source indices, weights and padding rules
(``ATen/native/UpSample.h``, ``GridSamplerUtils.h``, ``LossMultiMargin.cpp``,
``LossMultiLabelMargin.cpp``). Linear and cubic upsampling, grid sampling and the margin
losses have their forward rules here too, beside their backward (nearest upsampling's are in
conv.py).
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import torch
from jax import lax

from .dtypes import scalar_type_name, upcast
from .registry import lowering

aten = torch.ops.aten




def _transpose(forward, input_size, grad):
    """The gradient of a linear ``forward`` at an input of ``input_size``: its transpose."""
    g = upcast(grad)
    (out,) = jax.linear_transpose(forward, jax.ShapeDtypeStruct(tuple(input_size), g.dtype))(g)
    return out.astype(grad.dtype)


# Upsampling. Indices and weights depend only on sizes and scales, so they are numpy
# constants computed in the CPU kernels' opmath type: float32 for float and half inputs,
# float64 for double (``ft``).


def _opmath(x):
    return np.float64 if x.dtype == np.float64 else np.float32


def _area_scale(n_in, n_out, align_corners, scale, ft=np.float32):
    """area_pixel_compute_scale: input positions per output position."""
    if align_corners:
        return ft((n_in - 1) / (n_out - 1)) if n_out > 1 else ft(0)
    return _scale_value(n_in, n_out, scale, ft)


def _scale_value(n_in, n_out, scale, ft=np.float32):
    """compute_scales_value: 1 / scale when the caller gave one, else the size ratio."""
    if scale is not None and scale > 0:
        return ft(1.0 / scale)
    return ft(n_in) / ft(n_out)


def _source_index(n_in, n_out, align_corners, scale, cubic, ft, fused=True):
    """area_pixel_compute_source_index for every output position."""
    s = _area_scale(n_in, n_out, align_corners, scale, ft)
    dst = np.arange(n_out, dtype=ft)
    if align_corners:
        return s * dst
    # CPU's kernels in ATen/native/cpu are built for AVX2 with FMA, and the compiler fuses
    # this multiply-add: one rounding, which float64 gives exactly for float32 operands
    # (345 -> 270 rows: row 200 at 255.694443 rather than 255.694458). The bicubic backward
    # kernel lives outside that folder and rounds twice (``fused=False``).
    wide = np.float64 if ft == np.float32 and fused else ft
    src = (wide(s) * (dst.astype(wide) + wide(0.5)) - wide(0.5)).astype(ft)
    return src if cubic else np.maximum(src, ft(0))


def _guard(src, n_in, ft):
    """guard_index_and_lambda: the left neighbour and the distance to it, both in range."""
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    return i0, np.clip(src - i0.astype(ft), 0, 1).astype(ft)


def _linear_taps(n_in, n_out, align_corners, scale, ft):
    """compute_source_index_and_lambda: [(indices, weights)] for the two neighbours."""
    if n_in == n_out:  # copied, whatever the scale says
        i = np.arange(n_out)
        return [(i, np.ones(n_out, ft))]
    i0, lam = _guard(_source_index(n_in, n_out, align_corners, scale, False, ft), n_in, ft)
    i1 = i0 + (i0 < n_in - 1)
    return [(i0, ft(1) - lam), (i1, lam)]


_A = -0.75  # the cubic convolution constant PyTorch uses (a Python float keeps x's dtype)


def _cubic_near(x):
    return ((_A + 2) * x - (_A + 3)) * x * x + 1


def _cubic_far(x):
    return ((_A * x - 5 * _A) * x + 8 * _A) * x - 4 * _A


def _cubic_taps(n_in, n_out, align_corners, scale, ft, fused=True):
    """Four neighbours per output position, clamped to the input, with cubic weights."""
    i0, t = _guard(_source_index(n_in, n_out, align_corners, scale, True, ft, fused), n_in, ft)
    one = ft(1)
    weights = (_cubic_far(t + one), _cubic_near(t), _cubic_near(one - t),
               _cubic_far(ft(2) - t))
    return [(np.clip(i0 - 1 + k, 0, n_in - 1), w) for k, w in enumerate(weights)]


def _nearest_exact_taps(n_in, n_out, scale):
    """nearest_neighbor_exact_compute_source_index: round half up, not down."""
    s = _scale_value(n_in, n_out, scale)
    src = np.floor((np.arange(n_out, dtype=np.float32) + np.float32(0.5)) * s)
    return [(np.minimum(src.astype(np.int64), n_in - 1), np.ones(n_out, np.float32))]


def _resample(x, taps_per_axis):
    """Apply one axis after another: out = sum over taps of x[index] * weight."""
    nd = len(taps_per_axis)
    for i, taps in enumerate(taps_per_axis):
        axis = x.ndim - nd + i
        shape = (-1,) + (1,) * (nd - 1 - i)
        out = None
        for index, weight in taps:
            term = jnp.take(x, jnp.asarray(index), axis=axis)
            if not np.all(weight == 1):
                term = term * jnp.asarray(weight).reshape(shape)
            out = term if out is None else out + term
        x = out
    return x


def _scales(scales, nd):
    return list(scales) + [None] * (nd - len(scales))


def _axis_taps(taps_of, input_size, output_size, scales):
    """The taps of each resampled (trailing) axis."""
    nd = len(output_size)
    sc = _scales(scales, nd)
    return [taps_of(input_size[-nd + i], output_size[i], sc[i]) for i in range(nd)]


def _interp_backward(taps_of, grad_output, output_size, input_size, scales):
    taps = _axis_taps(taps_of, input_size, output_size, scales)
    return _transpose(lambda x: _resample(x, taps), input_size, grad_output)


def to_uint8(x):
    """CPU's fixed-point uint8 resizes round half up and clamp."""
    return jnp.clip(jnp.floor(x + 0.5), 0, 255).astype(jnp.uint8)


def _interp_forward(taps_of, x, output_size, scales):
    taps = _axis_taps(taps_of, x.shape, output_size, scales)
    if x.dtype != jnp.uint8:
        return _resample(upcast(x), taps).astype(x.dtype)
    # CPU resizes uint8 one axis at a time, the last first, into uint8 after each.
    for i in reversed(range(len(taps))):
        axis = x.ndim - len(taps) + i
        y = _resample(jnp.moveaxis(upcast(x), axis, -1), [taps[i]])
        x = to_uint8(jnp.moveaxis(y, -1, axis))
    return x


# torch._decomp's forms compute source positions on the device, rounding twice where CPU
# rounds once (_source_index).
@lowering(aten.upsample_linear1d.default, aten.upsample_bilinear2d.default,
          aten.upsample_trilinear3d.default)
def _upsample_linear(self, output_size, align_corners, *scales):
    ft = _opmath(self)
    taps = lambda n_in, n_out, s: _linear_taps(n_in, n_out, align_corners, s, ft)  # noqa: E731
    return _interp_forward(taps, self, output_size, scales)


@lowering(aten.upsample_bicubic2d.default)
def _upsample_bicubic2d(self, output_size, align_corners, scales_h=None, scales_w=None):
    ft = _opmath(self)
    taps = lambda n_in, n_out, s: _cubic_taps(n_in, n_out, align_corners, s, ft)  # noqa: E731
    return _interp_forward(taps, self, output_size, (scales_h, scales_w))


@lowering(aten.upsample_linear1d_backward.default, aten.upsample_bilinear2d_backward.default,
          aten.upsample_trilinear3d_backward.default)
def _upsample_linear_backward(grad_output, output_size, input_size, align_corners, *scales):
    ft = _opmath(grad_output)
    taps = lambda n_in, n_out, s: _linear_taps(n_in, n_out, align_corners, s, ft)  # noqa: E731
    return _interp_backward(taps, grad_output, output_size, input_size, scales)


@lowering(aten.upsample_bicubic2d_backward.default)
def _upsample_bicubic2d_backward(grad_output, output_size, input_size, align_corners,
                                 scales_h=None, scales_w=None):
    ft = _opmath(grad_output)

    def taps(n_in, n_out, s):
        return _cubic_taps(n_in, n_out, align_corners, s, ft, fused=False)

    return _interp_backward(taps, grad_output, output_size, input_size, (scales_h, scales_w))


@lowering(aten._upsample_nearest_exact1d_backward.default,
          aten._upsample_nearest_exact2d_backward.default,
          aten._upsample_nearest_exact3d_backward.default)
def _upsample_nearest_exact_backward(grad_output, output_size, input_size, *scales):
    return _interp_backward(_nearest_exact_taps, grad_output, output_size, input_size, scales)


# Grid sampling. interpolation_mode: 0 bilinear, 1 nearest, 2 bicubic (2-D only);
# padding_mode: 0 zeros, 1 border, 2 reflection. The grid's last axis lists x, y(, z):
# the input's spatial axes in reverse.


def _unnormalize(coord, size, align_corners):
    """[-1, 1] to pixel coordinates."""
    if align_corners:
        return (coord + 1) * ((size - 1) / 2)
    return (coord + 1) * (size / 2) - 0.5


def _clip(coord, size):
    # The borders count as outside: there, and beyond, the gradient is zero (as on CPU).
    inside = (coord > 0) & (coord < size - 1)
    return jnp.where(inside, coord, lax.stop_gradient(jnp.clip(coord, 0, size - 1)))


def _reflect(coord, twice_low, twice_high):
    """reflect_coordinates: fold ``coord`` into [twice_low / 2, twice_high / 2]."""
    if twice_low == twice_high:
        return jnp.zeros_like(coord)
    low = twice_low / 2
    span = (twice_high - twice_low) / 2
    d = coord - low
    d = jnp.where(d < 0, -d, d)  # the gradient's sign flips below low; at low it is +1
    extra = jnp.fmod(d, span)
    flips = jnp.floor(d / span)
    return jnp.where(jnp.fmod(flips, 2) == 0, extra + low, span - extra + low)


def _pad_coordinates(coord, size, padding_mode, align_corners):
    """compute_coordinates: where a padding mode moves an out-of-range coordinate."""
    if padding_mode == 1:
        return _clip(coord, size)
    if padding_mode == 2:
        if align_corners:
            coord = _reflect(coord, 0, 2 * (size - 1))
        else:
            coord = _reflect(coord, -1, 2 * size - 1)
        return _clip(coord, size)
    return coord


def _gather(x, positions):
    """x[n, :, p0[n], p1[n], ...] at integral float positions, zero outside the input.

    The positions broadcast together to (N, *taps, *out); one gather fetches every tap, and
    the result is (N, C, *taps, *out).
    """
    spatial = x.shape[2:]
    positions = jnp.broadcast_arrays(*[lax.stop_gradient(p) for p in positions])
    inside = jnp.ones(positions[0].shape, bool)
    for p, n in zip(positions, spatial, strict=True):
        inside = inside & (p >= 0) & (p < n)
    index = [jnp.clip(p, 0, n - 1).astype(jnp.int32) for p, n in zip(positions, spatial,
                                                                       strict=True)]
    vals = jax.vmap(lambda img, *ix: img[(slice(None), *ix)])(x, *index)
    return jnp.where(inside[:, None], vals, 0)


def _settled(coord):
    """``coord`` computed once. The taps are gathered at its floor and weighted by its
    fraction; XLA:CPU otherwise recomputes a cheap coordinate (and the grid it comes from)
    inside each consumer's fusion, where it can round to the other side of an integer: the
    floor of one copy and the fraction of the other took the next row's pixel (a kornia
    warp in fused eager). A division is not duplicated into consumers (optimization
    barriers are dropped on XLA:CPU); by 1 it is exact, by 2 only where coord is NaN."""
    return coord / jnp.where(jnp.isnan(coord), 2, 1).astype(coord.dtype)


def _cubic_weights(t):
    one = jnp.ones_like(t)
    return (_cubic_far(t + 1), _cubic_near(t), _cubic_near(one - t), _cubic_far(2 - t))


def _grid_sample(x, grid, interpolation_mode, padding_mode, align_corners):
    spatial = x.shape[2:]
    coords = [grid[..., len(spatial) - 1 - i] for i in range(len(spatial))]
    if interpolation_mode == 2:
        # Bicubic: each of the 4 x 4 taps is padded on its own (get_value_bounded); the taps'
        # positions carry no gradient, their weights do. Rows first, then the column, in
        # CPU's order (it matters in bfloat16).
        h, w = spatial
        fy = _settled(_unnormalize(coords[0], h, align_corners))
        fx = _settled(_unnormalize(coords[1], w, align_corners))
        by, bx = jnp.floor(fy), jnp.floor(fx)
        wy, wx = _cubic_weights(fy - by), _cubic_weights(fx - bx)
        taps = jnp.arange(-1, 3, dtype=fy.dtype)[:, None, None]
        iy = _pad_coordinates(by[:, None] + taps, h, padding_mode, align_corners)
        ix = _pad_coordinates(bx[:, None] + taps, w, padding_mode, align_corners)
        v = _gather(x, [iy[:, :, None], ix[:, None, :]])  # (N, C, 4, 4, Ho, Wo)
        out = 0
        for j in range(4):
            row = 0
            for i in range(4):
                row = row + v[:, :, j, i] * wx[i][:, None]
            out = out + row * wy[j][:, None]
        return out
    f = [_settled(_pad_coordinates(_unnormalize(c, n, align_corners), n, padding_mode,
                                   align_corners)) for c, n in zip(coords, spatial, strict=True)]
    if interpolation_mode == 1:
        # Round half to even (nearbyint); the gradient with respect to the grid is zero.
        return _gather(x, [jnp.round(v) for v in f])
    nd = len(spatial)
    base = [jnp.floor(v) for v in f]
    frac = [v - b for v, b in zip(f, base, strict=True)]
    # Axis a's two neighbours on tap axis a: positions (N, 1.., 2, ..1, *out).
    corners = []
    for a, b in enumerate(base):
        step = jnp.arange(2, dtype=b.dtype).reshape((2,) + (1,) * (nd - 1 - a + b.ndim - 1))
        corners.append(b.reshape(b.shape[:1] + (1,) * nd + b.shape[1:]) + step)
    v = _gather(x, corners)  # (N, C, 2, ..., 2, *out)
    inside = True
    for p, n in zip(corners, spatial, strict=True):
        inside = inside & (p >= 0) & (p < n)
    out = 0
    for corner in itertools.product((0, 1), repeat=nd):
        w = 1
        for c, t in zip(corner, frac, strict=True):
            w = w * (t if c else 1 - t)
        if nd == 3:
            # CPU's 3-d kernel adds only the corners inside the input: an infinite coordinate's
            # NaN weights never meet its zeros (its vectorised 2-d kernel multiplies them).
            w = jnp.where(inside[(slice(None), *corner)], w, 0)
        out = out + v[(slice(None), slice(None), *corner)] * w[:, None]
    return out


# The CPU kernels compute in the input's own dtype, coordinates included (bfloat16 pixel
# positions are coarse): so do these, to give the same pixels.


@lowering(aten.grid_sampler_2d, aten.grid_sampler_3d)
def _grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):  # noqa: A002
    return _grid_sample(input, grid, interpolation_mode, padding_mode, align_corners)


@lowering(aten.grid_sampler_2d_backward, aten.grid_sampler_3d_backward)
def _grid_sampler_backward(grad_output, input, grid, interpolation_mode,  # noqa: A002
                           padding_mode, align_corners, output_mask):
    def f(x, g):
        return _grid_sample(x, g, interpolation_mode, padding_mode, align_corners)

    _, vjp = jax.vjp(f, input, grid)
    gx, gg = vjp(grad_output)
    return (gx if output_mask[0] else None, gg)


# Margin losses. reduction: 0 none, 1 mean, 2 sum. Inputs are (N, C), (C,) or a scalar.
# Their meta kernels give a 1-D input's unreduced loss shape (1,) where CPU gives (), so the
# forward rules skip them and check their arguments as the CPU kernels do.


def _check_margin_args(x, target, check_target, weight=None):
    """CPU's checks, in CPU's order: the input, the target's shape (``check_target(n, dim)``),
    the weight, the target's dtype."""
    ok = (x.ndim == 2 and x.shape[1] != 0) or (x.ndim == 1 and x.shape[0] != 0) or x.ndim == 0
    if not ok:
        raise RuntimeError("Expected non-empty vector or matrix with optional 0-dim batch size, "
                           f"but got: {list(x.shape)}")
    n = x.shape[0] if x.ndim == 2 else 1
    dim = x.shape[-1] if x.ndim else 1
    check_target(n, dim)
    if weight is not None and weight.ndim != 1:
        raise RuntimeError("weight must be one-dimensional")
    if weight is not None and weight.size != dim:
        raise RuntimeError(f"inconsistent weight size, expected {dim} but got "
                           f"{list(weight.shape)}")
    if target.dtype != jnp.int64:
        raise RuntimeError(f"expected scalar type Long but found {scalar_type_name(target.dtype)}")
    return n, dim


def _reduce(per_sample, reduction, shape):
    if reduction == 0:
        return per_sample.reshape(shape)
    return jnp.mean(per_sample) if reduction == 1 else jnp.sum(per_sample)


def _as_rows(x):
    return x.reshape(1, -1) if x.ndim < 2 else x


def _multi_margin(x, target, p, margin, weight, reduction):
    rows = _as_rows(x)
    n, c = rows.shape
    y = target.reshape(n, 1)
    x_y = jnp.take_along_axis(rows, y, axis=1)
    z = margin - x_y + rows
    h = z if p == 1 else z * z
    if weight is not None:
        h = h * jnp.take(weight, y)
    # Only positive margins count, and never the target's own class.
    keep = (z > 0) & (jnp.arange(c)[None, :] != y)
    per_sample = jnp.sum(jnp.where(keep, h, 0), axis=1) / c
    return _reduce(per_sample, reduction, target.shape)


@lowering(aten.multi_margin_loss, static=("p",), skip_meta=True)
def _multi_margin_loss(self, target, p=1, margin=1, weight=None, reduction=1):
    def check_target(n, dim):
        if target.ndim > 1 or target.size != n:
            raise RuntimeError(
                "multi_margin_loss: target tensor should be 1-D with size equal to the number "
                f"of input samples (batch size). Expected target size [{n}], but got "
                f"{list(target.shape)}. Input has shape {list(self.shape)}.")

    _check_margin_args(self, target, check_target, weight)
    return _multi_margin(upcast(self), target, p, margin, weight, reduction).astype(self.dtype)


@lowering(aten.multi_margin_loss_backward, static=("p",))
def _multi_margin_loss_backward(grad_output, self, target, p, margin, weight=None,
                                reduction=1):
    _, vjp = jax.vjp(lambda x: _multi_margin(x, target, p, margin, weight, reduction),
                     upcast(self))
    return vjp(upcast(grad_output))[0].astype(self.dtype)


def _multilabel_is_target(rows, target):
    """Each row's targets are its class indices up to the first negative one."""
    valid = jnp.cumprod(target >= 0, axis=1).astype(bool)
    hits = jax.nn.one_hot(jnp.where(valid, target, 0), rows.shape[1], dtype=rows.dtype)
    is_target = jnp.max(jnp.where(valid[..., None], hits, 0), axis=1)
    return valid, is_target


def _multilabel_margin(x, target, reduction):
    """(loss, is_target), as multilabel_margin_loss_forward returns them on CPU."""
    rows = _as_rows(x)
    t = target.reshape(rows.shape)
    valid, is_target = _multilabel_is_target(rows, t)
    x_t = jnp.take_along_axis(rows, jnp.where(valid, t, 0), axis=1)
    # Every (target j, non-target k) pair: max(0, 1 - (x[j] - x[k])), over the class count.
    z = 1 - x_t[:, :, None] + rows[:, None, :]
    keep = valid[:, :, None] & (is_target[:, None, :] == 0) & (z > 0)
    per_sample = jnp.sum(jnp.where(keep, z, 0), axis=(1, 2)) / rows.shape[1]
    shape = target.shape[:1] if target.ndim == 2 else ()
    return _reduce(per_sample, reduction, shape), is_target.reshape(target.shape)


@lowering(aten.multilabel_margin_loss_forward, skip_meta=True)
def _multilabel_margin_loss_forward(self, target, reduction):
    def check_target(n, dim):
        fits = (target.shape == (n, dim) if self.ndim == 2
                else target.ndim <= 1 and target.size == dim)
        if not fits:
            raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of "
                               f"size: {list(self.shape)}")

    _check_margin_args(self, target, check_target)
    loss, is_target = _multilabel_margin(upcast(self), target, reduction)
    return loss.astype(self.dtype), is_target.astype(self.dtype)


@lowering(aten.multilabel_margin_loss_backward)
def _multilabel_margin_loss_backward(grad_output, self, target, reduction, is_target):
    _, vjp = jax.vjp(lambda x: _multilabel_margin(x, target, reduction)[0], upcast(self))
    return vjp(upcast(grad_output))[0].astype(self.dtype)
