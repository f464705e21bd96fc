"""Products of sparse COO tpu tensors (``sparse.py``) with dense ones: mm, mv, bmm, addmm,
each an ``index_add`` of the dense operand's rows scaled by the entries, in entry order (CPU's
loop); CPU's checks and messages."""

from __future__ import annotations

import torch

from .ops.dtypes import scalar_type_name as _name
from .sparse import SparseTensor, refused
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
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({dense.shape[0]}x"
                           f"{dense.shape[1]} and {s.shape[0]}x{s.shape[1]})")
    if dense.dtype != s.dtype:
        raise RuntimeError(f"expected scalar type {_name(dense.dtype)} but found "
                           f"{_name(s.dtype)}")
    rows, cols = s._i[0], s._i[1]
    scaled = dense[:, rows] * s._v
    out = torch.zeros((dense.shape[0], s.shape[1]), dtype=s.dtype, device=DEVICE)
    return out.index_add(1, cols, scaled)


@_op(aten.mm.default, aten._sparse_mm.default)
def _mm(a, b):
    if type(a) is SparseTensor and type(b) is not SparseTensor:
        return _sparse_dense(a, b)
    if type(b) is SparseTensor and type(a) is not SparseTensor:
        return _dense_sparse(a, b)
    raise refused(aten.mm.default)


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
