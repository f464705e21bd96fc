"""Antialiased bilinear and bicubic resizing (_upsample_bilinear2d_aa, _upsample_bicubic2d_aa:
interpolate(antialias=True)) and Lanczos resizing (_upsample_lanczos2d_aa: mode="lanczos").

Separable, as PyTorch's CPU kernel: width first, then height, each a weighted sum over a
window whose filter (a triangle, or Keys' cubic with a = -0.5) widens with the downscaling
factor. The weights are computed at
trace time with the kernel's own float32/float64 arithmetic and applied as a matrix product.
The forward is linear in its input, so the backward is its transpose.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import torch
from jax import lax

from .nn_backward import _transpose, to_uint8
from .registry import lowering

aten = torch.ops.aten


def _scale(align_corners: bool, size_in: int, size_out: int, scale, dt):
    if align_corners:
        return dt(size_in - 1) / dt(size_out - 1) if size_out > 1 else dt(0)
    if scale is not None and scale > 0:
        return dt(1.0 / scale)
    return dt(size_in) / dt(size_out)


def _triangle(x):
    return max(1 - abs(x), 0)


def _cubic(x, a=-0.5):
    x = abs(x)
    if x < 1:
        return ((a + 2) * x - (a + 3)) * x * x + 1
    if x < 2:
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return 0


def _lanczos(x, a=3):
    # sinc(x) * sinc(x / a) inside (-a, a)
    x = abs(x)
    if x >= a:
        return 0
    if x == 0:
        return 1
    return a * math.sin(math.pi * x) * math.sin(math.pi * x / a) / (math.pi * x) ** 2


# filter -> its interp_size: the window, in input pixels, at scale 1
_INTERP_SIZE = {_triangle: 2, _cubic: 4, _lanczos: 6}


def _weights(size_in: int, size_out: int, align_corners: bool, scale, dt,
             kernel=_triangle) -> np.ndarray:
    """(size_out, size_in): row i holds output i's normalised filter weights."""
    s = _scale(align_corners, size_in, size_out, scale, dt)
    half = _INTERP_SIZE[kernel] / 2
    support = dt(half * s) if s >= 1.0 else dt(half)
    max_size = int(math.ceil(support)) * 2 + 1
    invscale = dt(1.0 / s) if s >= 1.0 else dt(1.0)
    out = np.zeros((size_out, size_in), dt)
    for i in range(size_out):
        center = dt(float(s) * (i + 0.5))
        xmin = max(int(float(dt(center - support)) + 0.5), 0)
        xsize = min(int(float(dt(center + support)) + 0.5), size_in) - xmin
        xsize = min(max(xsize, 0), max_size)
        w = np.zeros(xsize, dt)
        for j in range(xsize):
            x = dt((float(dt(dt(j + xmin) - center)) + 0.5) * float(invscale))
            w[j] = dt(kernel(x))
        total = dt(0)
        for v in w:
            total = dt(total + v)
        if total != 0:
            w = (w / total).astype(dt)
        out[i, xmin:xmin + xsize] = w
    return out


def _resize(x, axis: int, size_out: int, align_corners: bool, scale, kernel=_triangle):
    size_in = x.shape[axis]
    if size_in == size_out:
        return x
    dt = np.float64 if x.dtype == jnp.float64 else np.float32
    m = jnp.asarray(_weights(size_in, size_out, align_corners, scale, dt, kernel))
    y = jnp.moveaxis(jnp.tensordot(x.astype(m.dtype), m, axes=[[axis], [1]],
                                   precision=lax.Precision.HIGHEST), -1, axis)
    return to_uint8(y) if x.dtype == jnp.uint8 else y.astype(x.dtype)


def _register(forward_op, backward_op, kernel):
    """The antialiased 2-d resize with ``kernel`` (width, then height) and its backward."""

    @lowering(forward_op, static=("output_size", "align_corners", "scales_h", "scales_w"))
    def forward(self, output_size, align_corners, scales_h=None, scales_w=None):
        out_h, out_w = output_size
        x = _resize(self, self.ndim - 1, out_w, align_corners, scales_w, kernel)
        return _resize(x, self.ndim - 2, out_h, align_corners, scales_h, kernel)

    @lowering(backward_op,
              static=("output_size", "input_size", "align_corners", "scales_h", "scales_w"))
    def backward(grad_output, output_size, input_size, align_corners, scales_h=None,
                 scales_w=None):
        def resize(x):
            return forward(x, tuple(output_size), align_corners, scales_h, scales_w)

        return _transpose(resize, input_size, grad_output)


_register(aten._upsample_bilinear2d_aa.default, aten._upsample_bilinear2d_aa_backward.default,
          _triangle)
_register(aten._upsample_bicubic2d_aa.default, aten._upsample_bicubic2d_aa_backward.default,
          _cubic)
_register(aten._upsample_lanczos2d_aa.default, aten._upsample_lanczos2d_aa_backward.default,
          _lanczos)
