"""Histograms: histc, histogram and histogramdd (bin edges and counts).

PyTorch's CPU kernels (ATen/native/Histogram.cpp, cpu/HistogramKernel.cpp) build equal-width
edges with linspace in the input dtype and place each value by linear interpolation, checked
against the neighbouring edges (histogram, histogramdd) or not (histc); explicit edges are
searched with std::upper_bound. The rules repeat that arithmetic so values on a bin edge land
in the same bin as on CPU. Values outside the outer edges, and NaN, are not counted.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import torch

from .dtypes import LOW_PRECISION
from .registry import lowering

aten = torch.ops.aten


def _linspace(start, end, steps: int, dtype):
    """CPU's linspace kernel: from the start up to half way, from the end after it."""
    start, end = start.astype(dtype), end.astype(dtype)
    # XLA:CPU turns a division by a constant into a multiplication by its reciprocal (an ulp
    # off); in float64 and rounded back, the quotient is float32's correctly rounded one.
    narrow = jnp.float32 if dtype in LOW_PRECISION else dtype
    step = ((end - start).astype(jnp.float64) / (steps - 1)).astype(narrow).astype(dtype)
    idx = jnp.arange(steps)
    # PyTorch's float32 kernel is compiled to fused multiply-adds (one rounding): in float64
    # the product is exact, so rounding the sum once matches. bfloat16 rounds every step.
    wide = jnp.float64 if dtype == jnp.float32 else dtype
    start, end, step = start.astype(wide), end.astype(wide), step.astype(wide)
    up = start + step * idx.astype(wide)
    down = end - step * (steps - idx - 1).astype(wide)
    return jnp.where(idx < steps // 2, up, down).astype(dtype)


def _outer_edges(x2d, ranges):
    """Per dimension (leftmost, rightmost) as float64: the given range, else the data's
    extent (0 and 1 for no data), widened by 0.5 each way when empty."""
    n = x2d.shape[1]
    if ranges is not None:
        lo = jnp.asarray(ranges[0::2], jnp.float64)
        hi = jnp.asarray(ranges[1::2], jnp.float64)
    elif x2d.shape[0] > 0:
        lo = jnp.min(x2d, axis=0).astype(jnp.float64)
        hi = jnp.max(x2d, axis=0).astype(jnp.float64)
    else:
        lo, hi = jnp.zeros((n,), jnp.float64), jnp.ones((n,), jnp.float64)
    same = lo == hi
    return jnp.where(same, lo - 0.5, lo), jnp.where(same, hi + 0.5, hi)


def _upper_bound(edges, first, length, x):
    """libstdc++'s std::upper_bound over edges[first:first + length], elementwise in x; the
    same probes as on CPU, so unsorted edges give CPU's answer too."""
    last = edges.shape[0] - 1
    for _ in range(max(edges.shape[0], 1).bit_length() + 1):
        half = length >> 1
        middle = first + half
        left = x < edges[jnp.clip(middle, 0, last)]
        active = length > 0
        first = jnp.where(active & ~left, middle + 1, first)
        length = jnp.where(active, jnp.where(left, half, length - half - 1), length)
    return first


def _bin_of(x, edges, method: str):
    """Bin index of each value of x and whether it is counted. method: "linear" (histc),
    "local" (linear, then corrected against the edges) or "search" (explicit edges)."""
    n_edges = edges.shape[0]
    left, right = edges[0], edges[-1]
    inside = (x >= left) & (x <= right)
    xs = jnp.where(inside, x, left)
    if method == "search":
        pos = _upper_bound(edges, jnp.zeros(x.shape, jnp.int64),
                           jnp.full(x.shape, n_edges, jnp.int64), xs) - 1
    else:
        pos = ((xs - left) * (n_edges - 1) / (right - left)).astype(jnp.int64)
        if method == "local":
            first = jnp.maximum(pos - 1, 0)
            stop = jnp.minimum(pos + 2, n_edges)
            pos = _upper_bound(edges, first, stop - first, xs) - 1
    pos = jnp.where(pos == n_edges - 1, pos - 1, pos)
    return jnp.clip(pos, 0, max(n_edges - 2, 0)), inside


def _histogramdd(x2d, edges, weight, density, method):
    """Counts (or weights) of the rows of x2d in the grid of bins given by ``edges``."""
    dtype = x2d.dtype
    shape = tuple(e.shape[0] - 1 for e in edges)
    flat = jnp.zeros(x2d.shape[:1], jnp.int64)
    counted = jnp.ones(x2d.shape[:1], bool)
    for d, e in enumerate(edges):
        pos, inside = _bin_of(x2d[:, d], e, method)
        flat = flat * shape[d] + pos
        counted = counted & inside
    acc = jnp.float32 if dtype in LOW_PRECISION else dtype
    w = jnp.ones(x2d.shape[:1], acc) if weight is None else weight.reshape(-1).astype(acc)
    size = 1
    for s in shape:
        size *= s
    hist = jnp.zeros((size,), acc).at[flat].add(jnp.where(counted, w, 0)).astype(dtype)
    hist = hist.reshape(shape)
    if density:
        hist = hist / jnp.sum(hist)
        for d, e in enumerate(edges):
            along_d = tuple(-1 if i == d else 1 for i in range(len(edges)))
            hist = hist / (e[1:] - e[:-1]).reshape(along_d)
    return hist


def _check(self, x2d, bins, ranges, weight):
    """ATen's argument checks (those the values of the data do not decide)."""
    if self.ndim < 2:
        raise RuntimeError("torch.histogramdd: input tensor should have at least 2 dimensions")
    n = x2d.shape[1]
    if len(bins) != n:
        raise RuntimeError("histogramdd: The size of bins must be equal to the innermost "
                           "dimension of the input.")
    if ranges is not None:
        if len(ranges) != 2 * n:
            raise RuntimeError(f"torch.histogramdd: for a {n}-dimensional histogram range "
                               f"should have {2 * n} elements, but got {len(ranges)}")
        for d in range(n):
            lo, hi = ranges[2 * d], ranges[2 * d + 1]
            if not (np.isfinite(lo) and np.isfinite(hi)):
                raise RuntimeError(f"torch.histogramdd: dimension {d}'s range [{lo:g}, "
                                   f"{hi:g}] is not finite")
            if lo > hi:
                raise RuntimeError(f"torch.histogramdd: min should not exceed max, but got "
                                   f"min {lo:g} max {hi:g} for dimension {d}")
    for d, b in enumerate(bins):
        if isinstance(b, int) and b <= 0:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {b} for "
                               f"dimension {d}")
    if weight is not None and weight.dtype != self.dtype:
        raise RuntimeError("torch.histogramdd: if weight tensor is provided, input tensor and "
                           "weight tensor should have the same dtype")
    expected = self.shape[:-1] or (1,)
    if weight is not None and (weight.shape or (1,)) != expected:
        raise RuntimeError("torch.histogramdd: if weight tensor is provided it should have the "
                           "same shape as the input tensor excluding its innermost dimension, "
                           f"but got input with shape {list(self.shape)} and weight with shape "
                           f"{list(weight.shape)}")


def _edges(x2d, bins, ranges):
    lo, hi = _outer_edges(x2d, ranges)
    return [_linspace(lo[d], hi[d], b + 1, x2d.dtype) for d, b in enumerate(bins)]


def _rows(self):
    """Input as (M, N) points: histogramdd's last dimension is the coordinate."""
    return self.reshape(-1, self.shape[-1]) if self.ndim else self.reshape(1, 1)


# The range is static: PyTorch's checks on it (max >= min) need its values at trace time.
@lowering(aten.histc, static=("min", "max"))
def _histc(self, bins=100, min=0, max=0):  # noqa: A002
    # Integer input is accepted, as on cuda (CPU refuses it): Hugging Face's MoE layers call
    # histc on integer expert ids on every device but cpu and mps.
    x = self.reshape(-1)
    lo, hi = jnp.asarray(min, jnp.float64), jnp.asarray(max, jnp.float64)
    if x.size:  # min == max means "the data's range"
        same = lo == hi
        lo = jnp.where(same, jnp.min(x).astype(jnp.float64), lo)
        hi = jnp.where(same, jnp.max(x).astype(jnp.float64), hi)
    same = lo == hi
    lo, hi = jnp.where(same, lo - 1, lo), jnp.where(same, hi + 1, hi)
    edges = _linspace(lo, hi, bins + 1, x.dtype)
    return _histogramdd(x[:, None], [edges], None, False, "linear")


@lowering(aten.histogram.bin_ct, static=("range",))
def _histogram_bin_ct(self, bins=100, *, range=None, weight=None, density=False):  # noqa: A002
    x2d = self.reshape(-1, 1)
    _check(x2d, x2d, (bins,), range, None if weight is None else weight.reshape(-1))
    edges = _edges(x2d, (bins,), range)
    return _histogramdd(x2d, edges, weight, density, "local"), edges[0]


@lowering(aten.histogram.bins_tensor)
def _histogram_bins_tensor(self, bins, *, weight=None, density=False):
    x2d = self.reshape(-1, 1)
    _check(x2d, x2d, (bins,), None, None if weight is None else weight.reshape(-1))
    return _histogramdd(x2d, [bins], weight, density, "search"), bins


@lowering(aten._histogramdd_bin_edges, static=("range",))
def _histogramdd_bin_edges(self, bins, *, range=None, weight=None, density=False):  # noqa: A002
    x2d = _rows(self)
    _check(self, x2d, bins, range, weight)
    return _edges(x2d, bins, range)


@lowering(aten._histogramdd_from_bin_cts, static=("range",))
def _histogramdd_from_bin_cts(self, bins, *, range=None, weight=None,  # noqa: A002
                              density=False):
    x2d = _rows(self)
    _check(self, x2d, bins, range, weight)
    return _histogramdd(x2d, _edges(x2d, bins, range), weight, density, "local")


@lowering(aten._histogramdd_from_bin_tensors)
def _histogramdd_from_bin_tensors(self, bins, *, weight=None, density=False):
    x2d = _rows(self)
    _check(self, x2d, bins, None, weight)
    return _histogramdd(x2d, list(bins), weight, density, "search")
