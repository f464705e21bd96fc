"""Conversions between sorted COO row indices and compressed (CSR) row pointers.

Both sides are dense integer tensors, so these serve dense code (PyG's ``index2ptr`` for
EdgeConv, RGCNConv and HeteroLinear); the sparse layouts themselves are not supported."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from .registry import lowering

aten = torch.ops.aten


def _index_dtype(out_int32: bool):
    return jnp.int32 if out_int32 else jnp.int64


@lowering(aten._convert_indices_from_coo_to_csr, static=("size", "out_int32"))
def _convert_indices_from_coo_to_csr(self, size, *, out_int32=False):
    # ptr[r] counts the indices below r. CPU's loop assumes sorted input; so does this.
    rows = self.reshape(-1).astype(jnp.int64)
    ptr = jnp.searchsorted(rows, jnp.arange(size + 1, dtype=jnp.int64), side="left")
    return ptr.astype(_index_dtype(out_int32))


def _rows_of(crow, nnz: int):
    """The row of each of ``nnz`` entries: the last row whose pointer is at or before it."""
    positions = jnp.arange(nnz, dtype=jnp.int64)
    return jnp.searchsorted(crow.astype(jnp.int64), positions, side="right") - 1


@lowering(aten._convert_indices_from_csr_to_coo, static=("out_int32", "transpose"))
def _convert_indices_from_csr_to_coo(crow_indices, col_indices, *, out_int32=False,
                                     transpose=False):
    dtype = _index_dtype(out_int32)
    col = col_indices.astype(dtype)
    if crow_indices.ndim == 1:
        rows = _rows_of(crow_indices, col.shape[-1]).astype(dtype)
        return jnp.stack([col, rows] if transpose else [rows, col])
    # batched: (batch, rows, cols) triples, the batch of each entry first
    batch, nnz = col.shape
    rows = jax.vmap(lambda c: _rows_of(c, nnz))(crow_indices).astype(dtype)
    batches = jnp.repeat(jnp.arange(batch, dtype=dtype), nnz)
    rows, col = rows.reshape(-1), col.reshape(-1)
    return jnp.stack([batches] + ([col, rows] if transpose else [rows, col]))
