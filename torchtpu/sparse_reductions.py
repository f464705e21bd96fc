"""Sums and softmax of sparse COO tpu tensors (``sparse.py``), with their gradients: CPU's
results, flags and messages, computed with tpu ops on the indices and values."""

from __future__ import annotations

import torch
from torch._prims_common import canonicalize_dim

from .ops.dtypes import scalar_type_name as _name
from .sparse import SparseTensor, make, refused
from .sparse_ops import (
    OPS,
    _coalesce_if_needed,
    _linear,
    _looked_up,
    _nnz_of,
    _op,
    _sd,
    _summed,
    _unravel,
    _zeros_like,
)
from .tensor import DEVICE

aten = torch.ops.aten


# --- reductions ---

@_op(aten.sum.default)
def _sum(s, *, dtype=None):
    return s._v.sum(dtype=dtype)


@_op(aten.any.default)
def _any(s):
    return s._v.any()  # (CPU's: the stored values, duplicates not summed)


@_op(aten._sparse_sum.default, aten._sparse_sum.dtype)
def _sparse_sum_all(s, dtype=None):
    return s._v.sum(dtype=dtype)


@_op(aten._sparse_sum.dim, aten._sparse_sum.dim_dtype, aten.sum.dim_IntList)
def _sparse_sum(s, dim, keepdim=False, *, dtype=None):
    """torch.sparse.sum(s, dim) (and s.sum(dim)): dense when every sparse dim is summed, else
    a coalesced sparse tensor over the sparse dims left."""
    if isinstance(dim, int):
        dim = [dim]
    if keepdim:
        raise refused(aten.sum.dim_IntList)
    ndim, sd = s.dim(), _sd(s)
    dims = sorted({canonicalize_dim(ndim, d, wrap_scalar=False) for d in dim})
    values = s._v if dtype is None else s._v.to(dtype)
    dense_dims = [d - sd + 1 for d in dims if d >= sd]
    if dense_dims:
        values = values.sum(dense_dims)
    kept = [d for d in range(sd) if d not in dims]
    if not kept:
        return values.sum(0)
    sizes = [s.shape[d] for d in kept]
    linear = _linear(s._i[kept], sizes)
    unique, inverse = torch.unique(linear, sorted=True, return_inverse=True)
    shape = [s.shape[d] for d in range(ndim) if d not in dims]
    return make(_unravel(unique, sizes), _summed(values, inverse, unique.shape[0]), shape, True)


@_op(aten._sparse_sum_backward.default)
def _sparse_sum_backward(grad, s, dim):
    """CPU's: the gradient of each entry of the coalesced ``s``, the incoming gradient at the
    entry's kept indices (zero where a sparse gradient has none), broadcast over what was
    summed; coalesced."""
    if (type(grad) is SparseTensor and not _nnz_of(grad)) or not grad.numel():
        return _zeros_like(s)
    c = _coalesce_if_needed(s)
    ndim, sd = s.dim(), _sd(s)
    dims = {d % ndim for d in dim}
    dense_summed = sorted(d - sd + 1 for d in dims if d >= sd)
    kept = [d for d in range(sd) if d not in dims]
    if not kept:
        if type(grad) is SparseTensor:
            raise RuntimeError("_sparse_sum_backward_cpu: expected grad_ Tensor to be dense since "
                               "all sparse dims are summed")
        values = grad
        for d in dense_summed:
            values = values.unsqueeze(d - 1)
        values = values.expand(c._v.shape[1:]).expand(c._v.shape)
    else:
        if type(grad) is not SparseTensor:
            raise RuntimeError("_sparse_sum_backward_cpu: expected grad_ Tensor to be sparse, but "
                               "got dense")
        values = _looked_up(_coalesce_if_needed(grad), c._i[kept])
        for d in dense_summed:
            values = values.unsqueeze(d)
        values = values.expand(c._v.shape)
    return make(c._i.clone(), values.contiguous(), s.shape, c._coalesced)


# --- softmax ---

def _pools(c, dim: int):
    """The entries of a coalesced ``c`` that softmax over sparse ``dim`` normalizes together
    (those sharing every other sparse index): each one's pool, and how many pools."""
    sd = _sd(c)
    others = [d for d in range(sd) if d != dim]
    if not others:
        return torch.zeros(_nnz_of(c), dtype=torch.int64, device=DEVICE), 1
    keys = _linear(c._i[others], [c.shape[d] for d in others])
    unique, pool = torch.unique(keys, return_inverse=True)
    return pool, unique.shape[0]


def _pooled(values, pool, n: int, reduce: str):
    index = pool.view(-1, *[1] * (values.dim() - 1)).expand(values.shape)
    out = torch.zeros((n, *values.shape[1:]), dtype=values.dtype, device=DEVICE)
    return out.scatter_reduce(0, index, values, reduce, include_self=False)


def _softmax_of(log: bool):
    def softmax(s, dim, half_to_float=False):
        if half_to_float:
            raise refused(aten._sparse_softmax.default)
        if not s.is_floating_point():
            name = "log_softmax" if log else "softmax"
            raise NotImplementedError(f'"{name}" not implemented for \'{_name(s.dtype)}\'')
        c = _coalesce_if_needed(s)
        dim = dim % s.dim()
        if dim >= _sd(c):  # a dense dim: each entry's values on their own
            f = torch.log_softmax if log else torch.softmax
            values = f(c._v, dim - _sd(c) + 1)
        elif not _nnz_of(c):
            values = c._v.clone()
        else:
            pool, n = _pools(c, dim)
            shifted = c._v - _pooled(c._v, pool, n, "amax")[pool]
            sums = _pooled(shifted.exp(), pool, n, "sum")[pool]
            values = shifted - sums.log() if log else shifted.exp() / sums
        return make(c._i.clone(), values, s.shape, True)

    return softmax


def _softmax_backward_of(log: bool):
    def backward(grad, output, dim, input_):
        dim = dim % output.dim()
        g = _looked_up(_coalesce_if_needed(grad), output._i) if type(grad) is SparseTensor \
            else grad[tuple(output._i)]
        out = output._v
        if dim >= _sd(output):
            d = dim - _sd(output) + 1
            summed = (g if log else g * out).sum(d, keepdim=True)
        elif not _nnz_of(output):
            summed = torch.zeros_like(out)
        else:
            pool, n = _pools(output, dim)
            summed = _pooled(g if log else g * out, pool, n, "sum")[pool]
        values = g - out.exp() * summed if log else out * (g - summed)
        return make(output._i.clone(), values, output.shape, output._coalesced)

    return backward


OPS[aten._sparse_softmax.default] = _softmax_of(log=False)
OPS[aten._sparse_log_softmax.default] = _softmax_of(log=True)
OPS[aten._sparse_softmax_backward_data.default] = _softmax_backward_of(log=False)
OPS[aten._sparse_log_softmax_backward_data.default] = _softmax_backward_of(log=True)
