"""Reductions into indexed places: index_reduce, segment_reduce.

Scatters with a combining function (XLA's scatter with multiply, max, min or add), after the
places not reduced into are set as PyTorch's CPU kernels set them.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import torch

from .dtypes import LOW_PRECISION
from .registry import lowering

aten = torch.ops.aten


def _lowest(dtype):
    return -jnp.inf if jnp.issubdtype(dtype, jnp.inexact) else jnp.iinfo(dtype).min


def _highest(dtype):
    return jnp.inf if jnp.issubdtype(dtype, jnp.inexact) else jnp.iinfo(dtype).max


@lowering(aten.index_reduce)
def _index_reduce(self, dim, index, source, reduce, *, include_self=True):
    if self.ndim == 0:  # indexed as a one-element vector, as PyTorch does
        return _index_reduce(self.reshape(1), 0, index.reshape(-1), source.reshape(1), reduce,
                             include_self=include_self).reshape(())
    dt = self.dtype
    key = (slice(None),) * (dim % self.ndim) + (index.reshape(-1),)
    src = source.astype(dt)
    base = self
    if not include_self:
        # The places reduced into start from the reduction's identity instead of self.
        init = {"prod": 1, "amax": _lowest(dt), "amin": _highest(dt), "mean": 0}[reduce]
        base = base.at[key].set(jnp.asarray(init, dt))
    if reduce == "prod":
        return base.at[key].multiply(src)
    if reduce == "amax":
        return base.at[key].max(src)
    if reduce == "amin":
        return base.at[key].min(src)
    total = base.at[key].add(src)
    counts = jnp.full(self.shape, 1 if include_self else 0, jnp.int64).at[key].add(1)
    counts = jnp.maximum(counts, 1).astype(dt)
    if jnp.issubdtype(dt, jnp.inexact):
        return total / counts
    return jnp.floor_divide(total, counts)


def _segments(lengths, offsets):
    """(start, end) of each segment, shaped like the lengths (or offsets less one)."""
    if lengths is not None:
        ends = jnp.cumsum(lengths, axis=-1)
        return ends - lengths, ends
    return offsets[..., :-1], offsets[..., 1:]


@lowering(aten.segment_reduce, static=("axis", "unsafe"))
def _segment_reduce(data, reduce, *, lengths=None, indices=None, offsets=None, axis=0,
                    unsafe=False, initial=None):
    if lengths is None and offsets is None:
        raise RuntimeError("segment_reduce(): Either lengths or offsets must be defined")
    starts, ends = _segments(lengths, offsets)
    axis = (lengths if lengths is not None else offsets).ndim - 1
    outer, n = data.shape[:axis], data.shape[axis]
    segments = starts.shape[-1]
    rows = int(np.prod(outer, dtype=np.int64))
    x = data.reshape((rows, n, -1))
    starts, ends = starts.reshape(rows, segments), ends.reshape(rows, segments)
    pos = jnp.arange(n)
    # The segment holding each position: the first whose end lies beyond it (empty segments
    # end where they start); positions outside every segment go to a spare one.
    seg = jax.vmap(lambda e: jnp.searchsorted(e, pos, side="right"))(ends)
    first = starts[:, :1] if segments else jnp.full((rows, 1), n)
    inside = (pos >= first) & (seg < segments)
    seg = jnp.where(inside, seg, segments)
    if x.dtype in LOW_PRECISION:
        out = _sequential(x, seg, segments, reduce, initial)
    else:
        out = _segment_op(x, seg, segments, reduce, initial)
    length = (ends - starts)[..., None].astype(out.dtype)
    if reduce == "mean":
        divided = jnp.where((length > 0) & ~jnp.isnan(out), out / jnp.maximum(length, 1), out)
        out = jnp.where(length == 0, jnp.nan, divided) if initial is None else divided
    return out.astype(data.dtype).reshape(outer + (segments,) + data.shape[axis + 1:])


_COMBINE = {"sum": jnp.add, "mean": jnp.add, "prod": jnp.multiply, "max": jnp.maximum,
            "min": jnp.minimum}


def _identity(reduce):
    return {"sum": 0, "mean": 0, "prod": 1, "max": -jnp.inf, "min": jnp.inf}[reduce]


def _segment_op(x, seg, segments, reduce, initial):
    """Per row of x (rows, n, inner), the reduction of each segment, then the initial value."""
    fn = {"sum": jax.ops.segment_sum, "mean": jax.ops.segment_sum,
          "prod": jax.ops.segment_prod, "max": jax.ops.segment_max,
          "min": jax.ops.segment_min}[reduce]
    out = jax.vmap(lambda x, s: fn(x, s, segments + 1)[:segments])(x, seg)
    return out if initial is None else _COMBINE[reduce](out, initial)


def _sequential(x, seg, segments, reduce, initial):
    """CPU's loop, one position after the other from the initial value: in bfloat16 every
    step rounds, so the order of the steps shows in the result."""
    rows, n, inner = x.shape
    start = _identity(reduce) if initial is None else initial
    acc = jnp.full((rows, segments + 1, inner), start, x.dtype)
    row = jnp.arange(rows)

    def step(j, acc):
        s = seg[:, j]
        return acc.at[row, s].set(_COMBINE[reduce](acc[row, s], x[:, j]).astype(x.dtype))

    return jax.lax.fori_loop(0, n, step, acc)[:, :segments]
