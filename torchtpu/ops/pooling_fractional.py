"""Fractional max pooling (Graham, 2014): pooling windows at pseudo-random offsets.

The offsets come from ``random_samples`` (one uniform sample per plane and dimension) through
PyTorch's interval formula, so the same samples pick the same windows as on CPU. In a window
the first largest value wins, and a NaN wins over everything (the last NaN, as CPU scans).
The backward adds each output's gradient at its index, as max pooling's does.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import torch

from .conv import _scatter_at_indices
from .registry import lowering

aten = torch.ops.aten


def _starts(sample, size: int, out: int, pool: int):
    """Window starts along one dimension for each plane's sample: int((i + u) * alpha) -
    int(u * alpha) with alpha = (size - pool) / (out - 1); the last window ends the input."""
    if out == 1:
        return jnp.full(sample.shape + (1,), size - pool, jnp.int64)
    dt = np.dtype(sample.dtype)
    alpha = np.asarray(size - pool, dt) / np.asarray(out - 1, dt)
    i = jnp.arange(out - 1, dtype=sample.dtype)
    u = sample[..., None]
    seq = ((i + u) * alpha).astype(jnp.int64) - (u * alpha).astype(jnp.int64)
    last = jnp.full(sample.shape + (1,), size - pool, jnp.int64)
    return jnp.concatenate([seq, last], axis=-1)


def _fractional_max_pool(x, kernel, out_size, samples, order):
    """x (N, C, *spatial); samples (N, C, k) with sample order[d] for spatial dimension d."""
    n, c = x.shape[:2]
    if 0 in out_size:  # no windows (a window formula for none would still give the last)
        empty = (n, c, *out_size)
        return jnp.zeros(empty, x.dtype), jnp.zeros(empty, jnp.int64)
    samples = samples[:n]  # CPU reads the rows of the batch's planes; more are allowed
    spatial = x.shape[2:]
    nd = len(spatial)
    if 0 in kernel:  # CPU takes an empty window: -inf, at the window's start
        flat = 0
        for d in range(nd):
            start = _starts(samples[..., order[d]], spatial[d], out_size[d], kernel[d])
            shape = [n, c] + [1] * nd
            shape[2 + d] = out_size[d]
            flat = flat * spatial[d] + start.reshape(shape)
        flat = jnp.broadcast_to(flat, (n, c, *out_size))
        return jnp.full(flat.shape, -jnp.inf, x.dtype), flat.astype(jnp.int64)
    # The interval arithmetic is in the samples' dtype, rounding at every step in bfloat16.
    # Per dimension: indices (N, C, out_d, pool_d) of the window positions.
    grids = []
    for d in range(nd):
        start = _starts(samples[..., order[d]], spatial[d], out_size[d], kernel[d])
        grids.append(start[..., None] + jnp.arange(kernel[d]))
    # Broadcast to (N, C, out_0, pool_0, out_1, pool_1, ...).
    full = [n, c] + [s for d in range(nd) for s in (out_size[d], kernel[d])]

    def place(a, d):
        shape = [n, c] + [1] * (2 * nd)
        shape[2 + 2 * d], shape[3 + 2 * d] = out_size[d], kernel[d]
        return jnp.broadcast_to(a.reshape(shape), full)

    pos = [place(g, d) for d, g in enumerate(grids)]
    b = jnp.arange(n).reshape([n] + [1] * (2 * nd + 1))
    p = jnp.arange(c).reshape([1, c] + [1] * (2 * nd))
    vals = x[(b, p, *pos)]
    flat = 0
    for d in range(nd):
        flat = flat * spatial[d] + pos[d]
    # Windows last, in CPU's scan order (outer dimension first).
    perm = [0, 1] + [2 + 2 * d for d in range(nd)] + [3 + 2 * d for d in range(nd)]
    k = int(np.prod(kernel))
    vals = jnp.transpose(vals, perm).reshape(vals.shape[:2] + tuple(out_size) + (k,))
    flat = jnp.transpose(flat, perm).reshape(vals.shape)
    nan = jnp.isnan(vals)
    last_nan = k - 1 - jnp.argmax(nan[..., ::-1], axis=-1)
    pick = jnp.where(jnp.any(nan, axis=-1), last_nan, jnp.argmax(vals, axis=-1))[..., None]
    return (jnp.take_along_axis(vals, pick, -1)[..., 0],
            jnp.take_along_axis(flat, pick, -1)[..., 0].astype(jnp.int64))


def _batched(rule_nd):
    def rule(self, kernel_size, output_size, random_samples):
        unbatched = self.ndim == len(kernel_size) + 1
        x = self[None] if unbatched else self
        out, idx = rule_nd(x, tuple(kernel_size), tuple(output_size), random_samples)
        return (out[0], idx[0]) if unbatched else (out, idx)

    rule.__name__ = rule_nd.__name__
    return rule


@lowering(aten.fractional_max_pool2d)
@_batched
def _fractional_max_pool2d(x, kernel_size, output_size, random_samples):
    # Samples per plane: [width, height].
    return _fractional_max_pool(x, kernel_size, output_size, random_samples, order=(1, 0))


@lowering(aten.fractional_max_pool3d)
@_batched
def _fractional_max_pool3d(x, kernel_size, output_size, random_samples):
    # Samples per plane: [time, height, width].
    return _fractional_max_pool(x, kernel_size, output_size, random_samples, order=(0, 1, 2))


@lowering(aten.fractional_max_pool2d_backward, aten.fractional_max_pool3d_backward)
def _fractional_max_pool_backward(grad_output, self, kernel_size, output_size, indices):
    return _scatter_at_indices(grad_output, self, indices, len(output_size))
