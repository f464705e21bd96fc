"""The shape ops of sparse COO tpu tensors (``sparse.py``): transposes and permutes, narrowing,
unsqueeze, select/index_select/unbind, cat/stack, and resizing, computed on their indices and
values with CPU's results and flags (``sparse_ops.py`` has the rest)."""

from __future__ import annotations

import functools

import torch
from torch._prims_common import canonicalize_dim

from .sparse import SparseTensor, make, refused, set_size
from .sparse_ops import OPS, _detach, _nnz_of, _op, _sd
from .tensor import DEVICE

aten = torch.ops.aten


# --- transposes ---

@_op(aten.transpose.int)
def _transpose(s, dim0, dim1):
    ndim, sd = s.dim(), _sd(s)
    d0, d1 = (canonicalize_dim(ndim, d) for d in (dim0, dim1))
    if ndim == 0:  # (transpose(0, 0) and (-1, -1) of a 0-d tensor: itself, as on CPU)
        return make(s._i, s._v, s.shape, s._coalesced)
    if d0 >= sd or d1 >= sd:
        raise RuntimeError(f"sparse transpose: transposed dimensions must be sparse Got "
                           f"sparse_dim: {sd}, d0: {d0}, d1: {d1}")
    order = list(range(sd))
    order[d0], order[d1] = order[d1], order[d0]
    shape = list(s.shape)
    shape[d0], shape[d1] = shape[d1], shape[d0]
    # CPU's sparse transpose flags its result uncoalesced unless it has no entries, whatever
    # it holds
    return make(s._i[order], s._v, shape, s._coalesced and (d0 == d1 or not _nnz_of(s)))


@_op(aten.t.default)
def _t(s):
    sd, dd = _sd(s), s._v.dim() - 1
    if sd > 2 or dd:
        raise RuntimeError(f"t() expects a tensor with <= 2 sparse and 0 dense dimensions, but "
                           f"got {sd} sparse and {dd} dense dimensions")
    return _transpose(s, 0, 1) if s.dim() == 2 else _detach(s)


def _transposed_in_place(s, dim0, dim1):
    """``transpose_``/``t_``: CPU swaps the rows of the indices in place (a tensor they were
    made from sees it), and the tensor's size."""
    result = _transpose(s, dim0, dim1)
    set_size(s, result.shape)
    s._i.copy_(result._i)
    s._coalesced = result._coalesced
    return s


def _t_(s):
    _t(s)  # (its checks)
    return _transposed_in_place(s, 0, 1) if s.dim() == 2 else s


OPS[aten.t_.default] = _t_
OPS[aten.transpose_.default] = _transposed_in_place


@_op(aten.permute.default)
def _permute(s, dims):
    ndim, sd = s.dim(), _sd(s)
    if len(dims) != ndim:
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does "
                           f"not match the length of the desired ordering of dimensions i.e. "
                           f"input.dim() = {ndim} is not equal to len(dims) = {len(dims)}")
    dims = [canonicalize_dim(ndim, d) for d in dims]
    if sorted(dims[:sd]) != list(range(sd)):
        raise RuntimeError("permute(sparse_coo): transpositions between sparse and dense "
                           "dimensions are not allowed.Only transpositions within sparse and "
                           "dense dimensions are supported.")
    values = s._v.permute(0, *[d - sd + 1 for d in dims[sd:]])
    # (CPU flags the result uncoalesced, whatever the order)
    return make(s._i[dims[:sd]], values, [s.shape[d] for d in dims], False)


@_op(aten.narrow_copy.default)
def _narrow_copy(s, dim, start, length):
    shape = list(torch.empty(s.shape, device="meta").narrow_copy(dim, start, length).shape)
    dim, sd = canonicalize_dim(s.dim(), dim), _sd(s)
    if start < 0 or start + length > s.shape[dim]:  # (no negative start, unlike dense)
        raise RuntimeError(f"Invalid range to narrow. range(start, start+length) must be a "
                           f"subset of range(0, {s.shape[dim]}).")
    if dim >= sd:  # a dense dim: every entry, part of its values
        values = s._v.narrow_copy(dim - sd + 1, start, length)
        return make(s._i.clone(), values, shape, s._coalesced)
    kept = ((s._i[dim] >= start) & (s._i[dim] < start + length)).nonzero().squeeze(1)
    indices = s._i[:, kept]
    indices[dim] -= start
    return make(indices, s._v[kept], shape, s._coalesced)


@_op(aten.unsqueeze.default)
def _unsqueeze(s, dim):
    ndim, sd = s.dim() + 1, _sd(s)
    dim = canonicalize_dim(ndim, dim)
    shape = [*s.shape[:dim], 1, *s.shape[dim:]]
    if dim <= sd:  # a new sparse dim, index 0 everywhere
        zeros = torch.zeros((1, _nnz_of(s)), dtype=torch.int64, device=DEVICE)
        indices = torch.cat([s._i[:dim], zeros, s._i[dim:]])
        values = s._v
    else:
        indices, values = s._i, s._v.unsqueeze(dim - sd + 1)
    # CPU's result is flagged as any new tensor: coalesced only with fewer than two entries
    return make(indices, values, shape, _nnz_of(s) < 2)


@_op(aten.select.int)
def _select(s, dim, index):
    """The entries at ``index`` of ``dim``: sparse over the dims left, dense when no sparse dim
    is left (duplicates summed); flagged as any new tensor (coalesced with fewer than two
    entries), as CPU's, whatever ``s`` is."""
    ndim, sd = s.dim(), _sd(s)
    if ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    dim = canonicalize_dim(ndim, dim)
    size = s.shape[dim]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(s.shape)} at dimension {dim}")
    index %= size
    shape = [n for d, n in enumerate(s.shape) if d != dim]
    if dim >= sd:  # a dense dim: every entry keeps its place
        return make(s._i.clone(), s._v.select(dim - sd + 1, index), shape, _nnz_of(s) < 2)
    kept = (s._i[dim] == index).nonzero().squeeze(1)
    values = s._v[kept]
    if sd == 1:
        return values.sum(0)
    others = [d for d in range(sd) if d != dim]
    return make(s._i[others][:, kept], values, shape, kept.shape[0] < 2)


@_op(aten.index_select.default)
def _index_select(s, dim, index):
    """The entries at each of ``index``'s positions along ``dim``, in the order of the
    positions, then of the entries; flagged as any new tensor (coalesced with fewer than two
    entries), as CPU's."""
    if type(s) is not SparseTensor or type(index) is SparseTensor:
        raise refused(aten.index_select.default)
    ndim, sd = s.dim(), _sd(s)
    dim = canonicalize_dim(ndim, dim)
    if index.dim() > 1 or index.dtype not in (torch.int64, torch.int32):
        raise IndexError("index_select() argument index must be 1-D strided (non-sparse) "
                         "long-tensor.")
    size = s.shape[dim]
    bad = index.cpu()
    bad = bad[(bad < -size) | (bad >= size)]
    if bad.numel():
        raise IndexError(f"index_select(): index contains {int(bad[0])} that is out of range "
                         f"for tensor of size {list(s.shape)} at dimension {dim}")
    index = index.to(DEVICE).long().remainder(size)
    shape = list(s.shape)
    shape[dim] = index.shape[0]
    if dim >= sd:
        values = s._v.index_select(dim - sd + 1, index)
        return make(s._i.clone(), values, shape, _nnz_of(s) < 2)
    position, entry = (s._i[dim][None, :] == index[:, None]).nonzero().unbind(1)
    indices = s._i[:, entry].clone()
    indices[dim] = position
    return make(indices, s._v[entry], shape, entry.shape[0] < 2)


@_op(aten.unbind.int)
def _unbind(s, dim=0):
    return tuple(_select(s, dim, i) for i in range(s.shape[dim]))


@_op(aten.cat.default)
def _cat(tensors, dim=0):
    """Sparse tensors joined along a sparse dim: their entries, each one's indices moved past
    the tensors before it; never flagged coalesced (CPU's)."""
    for at, t in enumerate(tensors):
        if type(t) is not SparseTensor:
            raise RuntimeError(f"Concatenating sparse tensors, but a dense tensor was found at "
                               f"position {at}.")
    first = tensors[0]
    ndim, sd = first.dim(), _sd(first)
    dim = canonicalize_dim(ndim, dim)
    for at, t in enumerate(tensors):
        if (_sd(t), t._v.dim() - 1) != (sd, first._v.dim() - 1):
            raise RuntimeError(
                f"All tensors must have the same sparse_dim and dense_dim: {sd}, "
                f"{first._v.dim() - 1}, but tensor at position {at} has {_sd(t)}, "
                f"{t._v.dim() - 1}.")
        if [n for d, n in enumerate(t.shape) if d != dim] != \
                [n for d, n in enumerate(first.shape) if d != dim]:
            raise RuntimeError(f"All tensors must have the same shape: {list(first.shape)} "
                               f"(except in the concatenating dimension), but found shape: "
                               f"{list(t.shape)} at position {at}.")
    if dim >= sd:
        return _cat_dense_dim(tensors, dim, sd)
    indices, offset = [], 0
    for t in tensors:
        moved = t._i.clone()
        moved[dim] += offset
        indices.append(moved)
        offset += t.shape[dim]
    shape = list(first.shape)
    shape[dim] = offset
    dtype = functools.reduce(torch.promote_types, (t.dtype for t in tensors))
    values = torch.cat([t._v.to(dtype) for t in tensors])
    return make(torch.cat(indices, 1), values, shape, False)



def _cat_dense_dim(tensors, dim: int, sd: int):
    """Joined along a dense dim: every tensor's entries, each one's values placed at its offset
    in zeros of the joined dense size (CPU's: never flagged coalesced)."""
    at = dim - sd + 1  # in the values
    total = sum(t.shape[dim] for t in tensors)
    dtype = functools.reduce(torch.promote_types, (t.dtype for t in tensors))
    values, offset = [], 0
    for t in tensors:
        before, after = offset, total - offset - t.shape[dim]
        pad = [0, 0] * (t._v.dim() - 1 - at) + [before, after]
        values.append(torch.nn.functional.pad(t._v.to(dtype), pad))
        offset += t.shape[dim]
    shape = list(tensors[0].shape)
    shape[dim] = total
    return make(torch.cat([t._i for t in tensors], 1), torch.cat(values), shape, False)


@_op(aten.stack.default)
def _stack(tensors, dim=0):
    if not tensors or any(type(t) is not SparseTensor for t in tensors):
        raise refused(aten.stack.default)
    ndim = tensors[0].dim() + 1
    dim = canonicalize_dim(ndim, dim)
    return _cat([_unsqueeze(t, dim) for t in tensors], dim)


# --- resizing ---

_KEEP = ("\nYou could try the following options:\n1. If you need an empty sparse tensor of this "
         "size, call `x = torch.sparse_coo_tensor(size)`.\n2. If you need to resize this tensor, "
         "you have the following options:\n    1. For both sparse and dense dimensions, keep the "
         "number of them constant and the size of them non-shrinking, and then try the same "
         "call again.\n    2. Or, create a new sparse tensor with the correct indices and values "
         "from this sparse tensor.")


def _check_dims(size, sparse_dim: int, dense_dim: int) -> None:
    if len(size) != sparse_dim + dense_dim:
        raise RuntimeError(f"'len(size) == sparse_dim + dense_dim' is not satisfied: len(size) "
                           f"= {len(size)}, sparse_dim = {sparse_dim}, dense_dim = {dense_dim}")


def _check_resize(s, size, sparse_dim: int, dense_dim: int) -> None:
    _check_dims(size, sparse_dim, dense_dim)
    if not _nnz_of(s):
        return
    sd, dd = _sd(s), s._v.dim() - 1
    for kind, old, new in (("sparse", sd, sparse_dim), ("dense", dd, dense_dim)):
        if old != new:
            raise RuntimeError(f"changing the number of {kind} dimensions (from {old} to {new}) "
                               f"on a non-empty sparse tensor is not supported.{_KEEP}")
    for kind, old, new in (("sparse", s.shape[:sd], size[:sd]),
                           ("dense", s.shape[sd:], size[sd:])):
        if any(n < o for o, n in zip(old, new, strict=True)):
            raise RuntimeError(f"shrinking the size of {kind} dimensions (from {list(old)} to "
                               f"{list(new)}) on a non-empty sparse tensor is not supported."
                               f"{_KEEP}")


@_op(aten.sparse_resize_.default)
def _sparse_resize_(s, size, sparse_dim, dense_dim):
    """CPU's: a tensor with entries keeps them (and its numbers of sparse and dense dims; sizes
    only grow; its values' new dense elements are zero here, uninitialised there); an empty one
    takes any dims."""
    size = tuple(size)
    _check_resize(s, size, sparse_dim, dense_dim)
    if not _nnz_of(s):
        return _sparse_resize_and_clear_(s, size, sparse_dim, dense_dim)
    s._v = s._v.clone().resize_((_nnz_of(s), *size[sparse_dim:]))
    set_size(s, size)
    return s


@_op(aten.sparse_resize_and_clear_.default)
def _sparse_resize_and_clear_(s, size, sparse_dim, dense_dim):
    size = tuple(size)
    _check_dims(size, sparse_dim, dense_dim)
    s._i = torch.zeros((sparse_dim, 0), dtype=torch.int64, device=DEVICE)
    s._v = torch.zeros((0, *size[sparse_dim:]), dtype=s.dtype, device=DEVICE)
    s._coalesced = True
    set_size(s, size)
    return s
