"""EmbeddingBag (DLRM's tables): segment reductions over bags of looked-up rows; max_norm's
renormalisation of the rows looked up."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from .dtypes import LOW_PRECISION
from .registry import lowering

aten = torch.ops.aten
_SUM, _MEAN, _MAX = 0, 1, 2


def _bags(indices, offsets, include_last_offset):
    n_bags = offsets.shape[0] - 1 if include_last_offset else offsets.shape[0]
    # Bag of each index: the last offset at or before its position.
    offset2bag = jnp.searchsorted(offsets[:n_bags], jnp.arange(indices.shape[0]), side="right")
    return n_bags, (offset2bag - 1).astype(jnp.int64)


def _reduce(weight, indices, offset2bag, n_bags, mode, per_sample_weights, padding_idx):
    # CPU's kernels accumulate bfloat16 and half bags in float32 and round once.
    acc = jnp.float32 if weight.dtype in LOW_PRECISION else weight.dtype
    rows = jnp.take(weight, indices, axis=0).astype(acc)
    keep = indices != padding_idx if padding_idx >= 0 else jnp.ones(indices.shape, bool)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights[:, None].astype(acc)
    counts = jax.ops.segment_sum(keep.astype(jnp.int64), offset2bag, n_bags)
    if mode == _MAX:
        rows = jnp.where(keep[:, None], rows, -jnp.inf)
        out = jax.ops.segment_max(rows, offset2bag, n_bags)
        out = jnp.where(counts[:, None] > 0, out, 0).astype(weight.dtype)
        return out, counts
    rows = jnp.where(keep[:, None], rows, 0)
    out = jax.ops.segment_sum(rows, offset2bag, n_bags)
    if mode == _MEAN:
        out = out / jnp.maximum(counts, 1)[:, None].astype(out.dtype)
    return out.astype(weight.dtype), counts


@lowering(aten._embedding_bag, aten._embedding_bag_forward_only)
def _embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                   per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    n_bags, offset2bag = _bags(indices, offsets, include_last_offset)
    out, counts = _reduce(weight, indices, offset2bag, n_bags, mode, per_sample_weights,
                          padding_idx)
    if mode == _MAX:
        rows = jnp.take(weight, indices, axis=0)
        is_max = rows == out[offset2bag]
        pos = jnp.where(is_max, indices[:, None], jnp.iinfo(indices.dtype).max)  # (int32 too)
        max_indices = jax.ops.segment_min(pos, offset2bag, n_bags)
        max_indices = jnp.where(counts[:, None] > 0, max_indices, -1)
    else:
        max_indices = jnp.zeros((0,), jnp.int64)
    # One bag size per offset (include_last_offset's closing offset counts none), as the
    # meta kernel shapes it.
    bag_size = jnp.zeros(offsets.shape, jnp.int64).at[:n_bags].set(counts)
    return out, offset2bag, bag_size, max_indices


@lowering(aten._embedding_bag_dense_backward)
def _embedding_bag_dense_backward(grad, indices, offset2bag, bag_size, maximum_indices,
                                  num_weights, scale_grad_by_freq, mode, per_sample_weights,
                                  padding_idx=-1):
    weight = jnp.zeros((num_weights, grad.shape[1]), grad.dtype)
    n_bags = grad.shape[0]
    if mode == _MAX:
        # Each (bag, column) sends its gradient to the one row PyTorch picked as the max.
        cols = jnp.broadcast_to(jnp.arange(grad.shape[1]), grad.shape)
        valid = maximum_indices >= 0
        rows = jnp.where(valid, maximum_indices, 0)
        return weight.at[rows, cols].add(jnp.where(valid, grad, 0))
    _, vjp = jax.vjp(lambda w: _reduce(w, indices, offset2bag, n_bags, mode, per_sample_weights,
                                       padding_idx)[0], weight)
    (gw,) = vjp(grad)
    if scale_grad_by_freq:
        freq = jnp.zeros((num_weights,), grad.dtype).at[indices].add(1)
        gw = gw / jnp.maximum(freq, 1)[:, None]
    return gw


@lowering(aten._embedding_bag_per_sample_weights_backward)
def _embedding_bag_per_sample_weights_backward(grad, weight, indices, offsets, offset2bag,
                                               mode, padding_idx=-1):
    rows = jnp.take(weight, indices, axis=0)
    g = jnp.sum(rows * grad[offset2bag], axis=1)
    if padding_idx >= 0:
        g = jnp.where(indices == padding_idx, 0, g)
    return g


@lowering(aten.embedding_renorm)
def _embedding_renorm(self, indices, max_norm, norm_type):
    """Rows named in indices whose norm exceeds max_norm, scaled down to it (max_norm)."""
    acc = jnp.float32 if self.dtype in LOW_PRECISION else self.dtype
    rows = self.astype(acc)
    norm = jnp.linalg.vector_norm(rows, ord=norm_type, axis=1)
    named = jnp.zeros(self.shape[:1], bool).at[indices.reshape(-1)].set(True)
    scale = (max_norm / (norm.astype(jnp.float64) + 1e-7)).astype(acc)
    scale = jnp.where(named & (norm > max_norm), scale, 1)
    return (rows * scale[:, None]).astype(self.dtype)
