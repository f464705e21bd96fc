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


@lowering(aten.unique_consecutive, eager=True)
def _unique_consecutive(self, return_inverse=False, return_counts=False, dim=None):
    host = np.asarray(self)
    if dim is None:
        rows = host.reshape(-1, 1)
    else:
        dim = dim % max(host.ndim, 1)
        moved = np.moveaxis(host, dim, 0)
        if 0 in moved.shape[1:]:
            raise RuntimeError("There are 0 sized dimensions, and they aren't selected, so "
                               "unique cannot be applied")
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
