"""A jagged nested tensor's values to and from a padded dense tensor (``to_padded_tensor``,
reductions over the ragged dimension): one ragged dimension, rows given by offsets."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .registry import lowering

aten = __import__("torch").ops.aten


@lowering(aten._jagged_to_padded_dense_forward)
def _jagged_to_padded_dense(values, offsets, max_lengths, padding_value=0.0):
    (offsets,), (width,) = offsets, max_lengths
    starts, lengths = offsets[:-1], offsets[1:] - offsets[:-1]
    column = jnp.arange(width)
    rows = jnp.clip(starts[:, None] + column, 0, max(values.shape[0] - 1, 0))
    inside = (column < lengths[:, None]).reshape(rows.shape + (1,) * (values.ndim - 1))
    return jnp.where(inside, values[rows], jnp.asarray(padding_value, values.dtype))


@lowering(aten._padded_dense_to_jagged_forward, eager=True)
def _padded_dense_to_jagged(dense, offsets, total_L=None):
    (offsets,) = offsets
    host = np.asarray(offsets)
    batch = np.repeat(np.arange(len(host) - 1), np.diff(host))
    column = np.arange(host[-1]) - np.repeat(host[:-1], np.diff(host))
    return dense[jnp.asarray(batch), jnp.asarray(column)]
