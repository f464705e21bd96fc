"""Products of sparse COO tpu tensors (``sparse.py``) with dense ones: mm, mv, bmm, addmm,
each an ``index_add`` of the dense operand's rows scaled by the entries, in entry order (CPU's
loop); and of two sparse ones (mm); CPU's checks and messages."""

from __future__ import annotations

import torch

from .ops.dtypes import scalar_type_name as _name
from .sparse import SparseTensor, make, refused, unmultipliable
from .sparse_ops import _alpha_times, _op, _sd
from .tensor import DEVICE

aten = torch.ops.aten


# --- products with a dense operand ---

def _check_mm(s, dense):
    if s.dim() != 2 or dense.dim() != 2:
        raise RuntimeError(f"addmm: matrices expected, got {min(s.dim(), dense.dim())}D tensor")
    if _sd(s) != 2:
        raise RuntimeError(f"addmm: matrices expected, got {_sd(s)}D tensor")


def _sparse_dense(s, dense, alpha=1):
    """alpha * (s @ dense), s sparse [m, k], dense [k, n]: each entry's row of ``dense``
    scaled and added into its row, in entry order (CPU's loop)."""
    _check_mm(s, dense)
    if dense.shape[0] != s.shape[1]:
        raise RuntimeError(f"addmm: Argument #3 (dense): Expected dim 0 size {s.shape[1]}, got "
                           f"{dense.shape[0]}")
    if dense.dtype != s.dtype:
        raise RuntimeError(f"expected scalar type {_name(s.dtype)} but found "
                           f"{_name(dense.dtype)}")
    rows, cols = s._i[0], s._i[1]
    scaled = _alpha_times(s._v, alpha)[:, None] * dense[cols]
    out = torch.zeros((s.shape[0], dense.shape[1]), dtype=s.dtype, device=DEVICE)
    return out.index_add(0, rows, scaled)


def _dense_sparse(dense, s):
    """dense [p, k] @ s [k, n]: each entry's column of ``dense`` scaled into its column."""
    _check_mm(s, dense)
    if dense.shape[1] != s.shape[0]:
        raise unmultipliable(dense, s)
    if dense.dtype != s.dtype:
        raise RuntimeError(f"expected scalar type {_name(dense.dtype)} but found "
                           f"{_name(s.dtype)}")
    rows, cols = s._i[0], s._i[1]
    scaled = dense[:, rows] * s._v
    out = torch.zeros((dense.shape[0], s.shape[1]), dtype=s.dtype, device=DEVICE)
    return out.index_add(1, cols, scaled)


def _sparse_sparse(a, b):
    """a [m, k] @ b [k, n], both sparse: every pair of an entry (i, k) of ``a`` with an entry
    (k, j) of ``b`` gives a product at (i, j), summed by coalescing (CPU's result: coalesced,
    an entry wherever some pair met, zero or not)."""
    for name, s in (("mat1_", a), ("mat2_", b)):
        if s.dim() != 2:
            raise RuntimeError(f"Expected {name}.dim() == 2 to be true, but got false.  (Could "
                               f"this error message be improved?  If so, please report an "
                               f"enhancement request to PyTorch.)")
        if _sd(s) != 2:
            raise RuntimeError(f"sparse_sparse_matmul_tpu: scalar values expected, got "
                               f"{s._v.dim() - 1}D values")
    if a.shape[1] != b.shape[0]:
        raise unmultipliable(a, b)
    if a.dtype != b.dtype:
        raise RuntimeError(f"mat1 dtype {_name(a.dtype)} does not match mat2 dtype "
                           f"{_name(b.dtype)}")
    a, b = a.coalesce(), b.coalesce()
    (rows, inner), (b_rows, cols) = a._i, b._i
    per_row = torch.bincount(b_rows, minlength=b.shape[0])  # b's entries, sorted by row
    first = per_row.cumsum(0) - per_row
    pairs = per_row[inner]  # how many of b's entries each of a's entries meets
    total = int(pairs.sum())  # the result's size depends on the data: a sync, as on CPU
    of_a = torch.repeat_interleave(torch.arange(inner.shape[0], device=DEVICE), pairs,
                                   output_size=total)
    within = torch.arange(total, device=DEVICE) - (pairs.cumsum(0) - pairs)[of_a]
    of_b = first[inner[of_a]] + within
    product = make(torch.stack([rows[of_a], cols[of_b]]), a._v[of_a] * b._v[of_b],
                   (a.shape[0], b.shape[1]), False)
    return product.coalesce()


@_op(aten.mm.default, aten._sparse_mm.default, aten._sparse_sparse_matmul.default)
def _mm(a, b):
    if type(a) is SparseTensor and type(b) is not SparseTensor:
        return _sparse_dense(a, b)
    if type(b) is SparseTensor and type(a) is not SparseTensor:
        return _dense_sparse(a, b)
    return _sparse_sparse(a, b)


@_op(aten.hspmm.default)
def _hspmm(s, dense):
    """s @ dense as a hybrid sparse tensor: the product's rows where ``s`` has entries (CPU's:
    sorted, flagged uncoalesced)."""
    if type(s) is not SparseTensor or type(dense) is SparseTensor:
        raise refused(aten.hspmm.default)
    product = _sparse_dense(s, dense)
    rows = torch.unique(s._i[0])
    return make(rows[None], product[rows], product.shape, False)


@_op(aten.mv.default)
def _mv(s, vec):
    if type(s) is not SparseTensor or type(vec) is SparseTensor:
        raise refused(aten.mv.default)
    return _sparse_dense(s, vec.unsqueeze(1)).squeeze(1)


@_op(aten.bmm.default)
def _bmm(s, dense):
    """s sparse [b, m, k] @ dense [b, k, n]: each entry's row of its batch's matrix, scaled
    into its row of its batch's result."""
    if type(s) is not SparseTensor:
        raise refused(aten.bmm.default)
    if dense.is_sparse:
        raise RuntimeError("bmm_sparse: Tensor 'mat2' must be dense")
    if s._v.dim() != 1:
        raise RuntimeError(f"bmm_sparse: Tensor 'self' must have 0 dense dims, but has "
                           f"{s._v.dim() - 1}")
    if _sd(s) != 3:
        raise RuntimeError(f"bmm_sparse: Tensor 'self' must have 3 sparse dims, but has {_sd(s)}")
    if dense.dim() != 3:
        raise RuntimeError(f"bmm_sparse: Tensor 'mat2' must have 3 dims, but has {dense.dim()}")
    if s.shape[0] != dense.shape[0]:
        raise RuntimeError("bmm_sparse: 'self.size(0)' and 'mat2.size(0)' must match")
    if s.shape[2] != dense.shape[1]:
        raise RuntimeError("bmm_sparse: 'self.size(2)' and 'mat2.size(1)' must match")
    if dense.dtype != s.dtype:
        raise RuntimeError(f"expected scalar type {_name(s.dtype)} but found "
                           f"{_name(dense.dtype)}")
    batch, m, n = s.shape[0], s.shape[1], dense.shape[2]
    b, i, j = s._i
    out = torch.zeros((batch * m, n), dtype=s.dtype, device=DEVICE)
    out = out.index_add(0, b * m + i, s._v[:, None] * dense[b, j])
    return out.view(batch, m, n)


@_op(aten.addmm.default, aten._sparse_addmm.default)
def _addmm(input_, s, dense, *, beta=1, alpha=1):
    if type(s) is not SparseTensor or type(dense) is SparseTensor or \
            type(input_) is SparseTensor:
        raise refused(aten.addmm.default)
    product = _sparse_dense(s, dense, alpha)
    if beta == 0:  # (input is not read: its NaNs do not show, as on CPU)
        return product
    return torch.add(product, input_.expand(product.shape), alpha=beta)


def _check_sspaddmm(input_, s, dense) -> None:
    if type(input_) is not SparseTensor:
        raise RuntimeError("tensor.sspaddmm(...) can only be called on sparse tensors")
    if dense.is_sparse:
        raise RuntimeError("sspaddmm: expected 'mat2' to have strided layout, got 'mat2' with "
                           "layout Sparse")
    for at, t in ((2, s), (3, dense)):
        if t.dim() != 2:
            raise RuntimeError(f"sspaddmm: Argument #{at}: matrices expected, got {t.dim()}D "
                               f"tensor")
    if _sd(s) != 2:
        raise RuntimeError(f"sspaddmm: Argument #2: matrices expected, got {_sd(s)}D tensor")
    for at, size, want, dim in ((3, dense.shape[0], s.shape[1], 0),
                                (1, input_.shape[0], s.shape[0], 0),
                                (1, input_.shape[1], dense.shape[1], 1)):
        if size != want:
            raise RuntimeError(f"sspaddmm: Argument #{at}: Expected dim {dim} size {want}, got "
                               f"{size}")
    for t in (s, dense):
        if t.dtype != input_.dtype:
            raise RuntimeError(f"expected scalar type {_name(input_.dtype)} but found "
                               f"{_name(t.dtype)}")


def _sspaddmm(input_, s, dense, beta, alpha):
    """beta * input + alpha * (s @ dense), sparse: input's entries (scaled), then a full row of
    the product for each row where ``s`` has entries, in row order (CPU's; flagged as any new
    tensor: coalesced with fewer than two entries)."""
    _check_sspaddmm(input_, s, dense)
    rows = torch.unique(s._i[0])
    product = _sparse_dense(s, dense, alpha)[rows]
    cols = torch.arange(dense.shape[1], device=DEVICE)
    indices = torch.stack([rows.repeat_interleave(dense.shape[1]), cols.repeat(rows.shape[0])])
    nnz = input_._i.shape[1] + indices.shape[1]
    return make(torch.cat([input_._i, indices], 1),
                torch.cat([_alpha_times(input_._v, beta), product.reshape(-1)]),
                input_.shape, nnz < 2)


@_op(aten.sspaddmm.default)
def _sspaddmm_default(input_, s, dense, *, beta=1, alpha=1):
    return _sspaddmm(input_, s, dense, beta, alpha)


@_op(aten.sspaddmm.out)
def _sspaddmm_out(input_, s, dense, *, beta=1, alpha=1, out):
    """(``torch.smm`` calls it with ``out`` as an empty input, which CPU resizes first.)"""
    if out is input_ and not out._i.shape[1] and s.dim() == dense.dim() == 2:
        out.sparse_resize_and_clear_((s.shape[0], dense.shape[1]), 2, 0)
    result = _sspaddmm(input_, s, dense, beta, alpha)
    return aten.copy_.default(out, result)
