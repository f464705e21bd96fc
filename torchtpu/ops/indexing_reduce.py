"""Reductions into indexed places: index_reduce, segment_reduce.

Scatters with a combining function (XLA's scatter with multiply, max, min or add), after the
places not reduced into are set as PyTorch's CPU kernels set them.
segment_reduce's backward follows CPU's kernel at ties, zeros and NaNs.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import torch

from .dtypes import LOW_PRECISION, highest, lowest
from .registry import lowering

aten = torch.ops.aten


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
        init = {"prod": 1, "amax": lowest(dt), "amin": highest(dt), "mean": 0}[reduce]
        base = base.at[key].set(jnp.asarray(init, dt))
    if reduce == "prod":  # (of bools: CPU's mul_, a logical and)
        return base.at[key].min(src) if dt == jnp.bool_ else base.at[key].multiply(src)
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


# CPU's names for the reductions, each read as the kernel reads it.
_REDUCTIONS = {"sum": "sum", "mean": "mean", "prod": "prod", "max": "max", "amax": "max",
               "min": "min", "amin": "min"}


def _reduction(reduce):
    if reduce not in _REDUCTIONS:
        raise RuntimeError(
            f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    return _REDUCTIONS[reduce]


def _segment_layout(data, lengths, offsets):
    """data as (rows, n, inner) along the segmented axis; each position's segment (rows, n),
    a spare one (number ``segments``) for positions outside every segment; each segment's
    length (rows, segments); and the output's shape."""
    if lengths is None and offsets is None:
        raise RuntimeError("segment_reduce(): Either lengths or offsets must be defined")
    starts, ends = _segments(lengths, offsets)
    axis = (lengths if lengths is not None else offsets).ndim - 1
    outer, n = data.shape[:axis], data.shape[axis]
    segments = starts.shape[-1]
    rows = int(np.prod(outer, dtype=np.int64))
    inner = int(np.prod(data.shape[axis + 1:], dtype=np.int64))  # (-1 fails when n is 0)
    x = data.reshape((rows, n, inner))
    starts, ends = starts.reshape(rows, segments), ends.reshape(rows, segments)
    pos = jnp.arange(n)
    # The segment holding each position: the first whose end lies beyond it (empty segments
    # end where they start); positions outside every segment go to a spare one.
    seg = jax.vmap(lambda e: jnp.searchsorted(e, pos, side="right"))(ends)
    first = starts[:, :1] if segments else jnp.full((rows, 1), n)
    inside = (pos >= first) & (seg < segments)
    seg = jnp.where(inside, seg, segments)
    return x, seg, ends - starts, outer + (segments,) + data.shape[axis + 1:]


@lowering(aten.segment_reduce, static=("axis", "unsafe"))
def _segment_reduce(data, reduce, *, lengths=None, indices=None, offsets=None, axis=0,
                    unsafe=False, initial=None):
    reduce = _reduction(reduce)
    x, seg, length, out_shape = _segment_layout(data, lengths, offsets)
    segments = length.shape[-1]
    if x.dtype in LOW_PRECISION and x.shape[1]:  # (no steps to round when there is no data)
        out = _sequential(x, seg, segments, reduce, initial)
    else:
        out = _segment_op(x, seg, segments, reduce, initial)
    length = length[..., None].astype(out.dtype)
    if reduce == "mean":
        divided = jnp.where((length > 0) & ~jnp.isnan(out), out / jnp.maximum(length, 1), out)
        out = jnp.where(length == 0, jnp.nan, divided) if initial is None else divided
    return out.astype(data.dtype).reshape(out_shape)


@lowering(aten._segment_reduce_backward, static=("axis",))
def _segment_reduce_backward(grad, output, data, reduce, *, lengths=None, offsets=None, axis=0,
                             initial=None):
    """CPU's backward kernel (SegmentReduce.cpp), position by position: written out rather
    than a VJP, since CPU's answers at ties, zeros and NaNs are its own."""
    reduce = _reduction(reduce)
    x, seg, length, _ = _segment_layout(data, lengths, offsets)
    rows, n, inner = x.shape
    segments = length.shape[-1]
    dt = jnp.float32 if x.dtype in LOW_PRECISION else x.dtype
    x = x.astype(dt)
    inside = (seg < segments)[..., None]

    def per_position(v):
        """A per-segment (rows, segments, inner) value at each position; 0 outside."""
        v = jnp.broadcast_to(v, (rows, segments, inner)).astype(dt)
        v = jnp.concatenate([v, jnp.zeros((rows, 1, inner), dt)], axis=1)
        return jnp.take_along_axis(v, jnp.broadcast_to(seg[..., None], (rows, n, inner)), 1)

    def per_segment(v):
        """The sum over each segment of a per-position value."""
        return jax.vmap(lambda v, s: jax.ops.segment_sum(v, s, segments + 1)[:segments])(v, seg)

    g = per_position(grad.reshape(rows, segments, inner))
    if reduce == "sum":
        return g.astype(data.dtype).reshape(data.shape)
    if reduce == "mean":
        count = per_position(length[..., None])
        return jnp.where(inside, g / jnp.maximum(count, 1), 0).astype(data.dtype).reshape(
            data.shape)
    out = per_position(output.reshape(rows, segments, inner))
    if reduce in ("max", "min"):
        # Every element equal to the result (and every NaN) takes the gradient; where there
        # are several, CPU divides only the positive gradients among them.
        hit = inside & (jnp.isnan(x) | (x == out))
        ties = per_position(per_segment(hit.astype(dt)))
        res = jnp.where(hit, g, 0)
        res = jnp.where((ties >= 2) & (res > 0), res / ties, res)
        return res.astype(data.dtype).reshape(data.shape)
    # prod: grad * output / x, except at a zero or NaN, where CPU multiplies out the product
    # of the others (and the initial value).
    special = inside & ((x == 0) | jnp.isnan(x))
    others = per_position(jax.vmap(
        lambda v, s: jax.ops.segment_prod(v, s, segments + 1)[:segments])(
            jnp.where(special, 1, x), seg))
    if initial is not None:
        others = others * jnp.asarray(initial, dt)
    n_special = per_position(per_segment(special.astype(dt))) - 1
    n_nan = per_position(per_segment((inside & jnp.isnan(x)).astype(dt))) - jnp.isnan(x)
    # The other zeros and NaNs in the segment: a NaN among them makes NaN, a zero makes 0
    # (NaN too where the rest is infinite, as 0 * inf).
    others = jnp.where(n_special == 0, others, others * jnp.where(n_nan > 0, jnp.nan, 0))
    res = jnp.where(special, g * others, g * out / jnp.where(special, 1, x))
    return jnp.where(inside, res, 0).astype(data.dtype).reshape(data.shape)


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
