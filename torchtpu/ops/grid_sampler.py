"""grid_sampler_3d: volumes sampled at grid points (trilinear or nearest), with PyTorch's
coordinate conventions (align_corners, and zeros, border or reflection padding)."""

from __future__ import annotations

import jax.numpy as jnp
import torch

from .registry import lowering

aten = torch.ops.aten
_BILINEAR, _NEAREST = 0, 1
_ZEROS, _BORDER, _REFLECTION = 0, 1, 2


def _reflect(x, twice_low: int, twice_high: int):
    """Fold x into [twice_low / 2, twice_high / 2] by reflections at its ends."""
    if twice_low == twice_high:
        return jnp.zeros_like(x)
    low = twice_low / 2
    span = (twice_high - twice_low) / 2
    x = jnp.abs(x - low)
    extra = jnp.fmod(x, span)
    flips = jnp.floor(x / span)
    return jnp.where(jnp.fmod(flips, 2) == 0, extra + low, span - extra + low)


def _source_index(coord, size: int, padding_mode: int, align_corners: bool):
    """Grid coordinate in [-1, 1] -> position in the input along one dimension."""
    if align_corners:
        x = (coord + 1) / 2 * (size - 1)
    else:
        x = ((coord + 1) * size - 1) / 2
    if padding_mode == _BORDER:
        x = jnp.clip(x, 0, size - 1)
    elif padding_mode == _REFLECTION:
        x = _reflect(x, 0, 2 * (size - 1)) if align_corners else _reflect(x, -1, 2 * size - 1)
        x = jnp.clip(x, 0, size - 1)
    return x


def _gather(flat, shape, iz, iy, ix):
    """flat (N, C, D*H*W) at integer positions (N, P) -> (N, C, P), 0 outside the volume."""
    d, h, w = shape
    inside = (iz >= 0) & (iz < d) & (iy >= 0) & (iy < h) & (ix >= 0) & (ix < w)
    lin = (jnp.clip(iz, 0, d - 1) * h + jnp.clip(iy, 0, h - 1)) * w + jnp.clip(ix, 0, w - 1)
    vals = jnp.take_along_axis(flat, lin[:, None, :].astype(jnp.int64), axis=2)
    return vals, inside[:, None, :]


@lowering(aten.grid_sampler_3d, static=("interpolation_mode", "padding_mode", "align_corners"))
def _grid_sampler_3d(input, grid, interpolation_mode, padding_mode, align_corners):  # noqa: A002
    n, c, d, h, w = input.shape
    out_spatial = grid.shape[1:4]
    g = grid.reshape(n, -1, 3).astype(input.dtype)
    ix = _source_index(g[..., 0], w, padding_mode, align_corners)
    iy = _source_index(g[..., 1], h, padding_mode, align_corners)
    iz = _source_index(g[..., 2], d, padding_mode, align_corners)
    flat = input.reshape(n, c, -1)
    zero = jnp.zeros((), input.dtype)
    if interpolation_mode == _NEAREST:
        vals, inside = _gather(flat, (d, h, w), *(jnp.round(v).astype(jnp.int64)
                                                  for v in (iz, iy, ix)))
        out = jnp.where(inside, vals, zero)
    else:
        x0, y0, z0 = jnp.floor(ix), jnp.floor(iy), jnp.floor(iz)
        x1, y1, z1 = x0 + 1, y0 + 1, z0 + 1
        out = jnp.zeros((n, c, g.shape[1]), input.dtype)
        # CPU's corner order: top (z0) then bottom (z1); north-west, north-east, south-west,
        # south-east within each.
        for zc, wz in ((z0, z1 - iz), (z1, iz - z0)):
            for yc, wy in ((y0, y1 - iy), (y1, iy - y0)):
                for xc, wx in ((x0, x1 - ix), (x1, ix - x0)):
                    weight = wx * wy * wz
                    vals, inside = _gather(flat, (d, h, w), zc.astype(jnp.int64),
                                           yc.astype(jnp.int64), xc.astype(jnp.int64))
                    out = out + jnp.where(inside, vals * weight[:, None, :], zero)
    return out.reshape((n, c) + tuple(out_spatial))
