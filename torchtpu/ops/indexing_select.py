"""Selection by value: unique_consecutive (its length depends on the data: computed on the
host, as PyTorch synchronises for it on cuda) and nonzero_static (a fixed size: on device)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import torch

from .registry import lowering

aten = torch.ops.aten


def _runs(rows):
    """For rows (n, k): where a new run starts (a row differing from the one before it;
    NaN differs from everything, as on CPU)."""
    if rows.shape[0] == 0:
        return np.zeros((0,), bool)
    differs = np.any(rows[1:] != rows[:-1], axis=1)
    return np.concatenate([[True], differs])


def unique_dim_check(shape: tuple, dim: int) -> int:
    """CPU's checks for unique over a dim (_unique_dim_cpu_template, which unique_consecutive
    shares): ``self.size(dim)``'s, then of empty dimensions; returns the wrapped dim."""
    ndim = len(shape)
    if ndim == 0:  # size() does not take a 0-d tensor's dims -1 and 0, as dims elsewhere do
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    if not -ndim <= dim < ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, "
                         f"{ndim - 1}], but got {dim})")
    dim %= ndim
    empty = shape.count(0)
    if shape[dim] == 0 and empty > 1:
        raise RuntimeError("Number of zero sized dimensions is more than one, so unique "
                           "cannot be applied ")
    if shape[dim] != 0 and empty:
        raise RuntimeError("There are 0 sized dimensions, and they aren't selected, so unique "
                           "cannot be applied")
    return dim


@lowering(aten.unique_consecutive, eager=True)
def _unique_consecutive(self, return_inverse=False, return_counts=False, dim=None):
    host = np.asarray(self)
    if dim is None:
        rows = host.reshape(-1, 1)
    else:
        dim = unique_dim_check(host.shape, dim)
        moved = np.moveaxis(host, dim, 0)
        rows = moved.reshape(moved.shape[0], int(np.prod(moved.shape[1:], dtype=np.int64)))
    starts = _runs(rows)
    first = np.flatnonzero(starts)
    if dim is None:
        values = host.reshape(-1)[first]
        inverse_shape = host.shape
    else:
        values = np.moveaxis(moved[first], 0, dim)
        inverse_shape = (rows.shape[0],)
    empty = np.zeros((0,), np.int64)
    inverse = (np.cumsum(starts) - 1).reshape(inverse_shape) if return_inverse else empty
    counts = np.diff(np.append(first, rows.shape[0])) if return_counts else empty
    return (jnp.asarray(values), jnp.asarray(inverse.astype(np.int64)),
            jnp.asarray(counts.astype(np.int64)))


@lowering(aten.nonzero_static)
def _nonzero_static(self, *, size, fill_value=-1):
    if self.ndim == 0:
        return jnp.zeros((size, 0), jnp.int64)
    if self.size == 0:  # (jnp.nonzero pads an empty input with zeros, not fill_value)
        return jnp.full((size, self.ndim), fill_value, jnp.int64)
    found = jnp.nonzero(self, size=size, fill_value=fill_value)
    return jnp.stack(found, axis=1).astype(jnp.int64)
