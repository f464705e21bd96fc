"""Sparse compressed tensors (CSR and CSC layouts) on tpu.

Unlike sparse COO (``sparse.py``), these are PyTorch's own ``SparseCsrTensorImpl``: its
constructors (``torch.sparse_csr_tensor(..., device="tpu")``, ``csr.to("tpu")``) build one
around tpu member tensors (compressed indices, plain indices, values) with no kernel of ours,
and its ops dispatch to the ``SparseCsrPrivateUse1`` key, where this module registers kernels.
Each computes with ordinary tpu ops on the members, so strict, fused and debug eager run them
through the one lowering registry, and autograd runs above with PyTorch's formulas. An op with
no kernel here is refused with a ``NotImplementedError`` naming the op and the layout.

2-d tensors without batch dimensions; values may carry dense dimensions (hybrid). Block
layouts (BSR, BSC) are refused.
"""

from __future__ import annotations

import torch
from torch._C import DispatchKey, DispatchKeySet
from torch._prims_common import canonicalize_dim

from .ops.dtypes import scalar_type_name as _name
from .sparse import REPORT, make, unmultipliable
from .tensor import DEVICE

aten = torch.ops.aten
KERNELS: dict = {}
_COMPRESSED = (torch.sparse_csr, torch.sparse_csc)

# CPU's kernels of these never read the members' data: they return members, or build and
# fill tensors through ops on the tensor's own device. A tpu tensor is redispatched to them.
_DEVICE_GENERIC = (aten.crow_indices.default, aten.col_indices.default,
                   aten.ccol_indices.default, aten.row_indices.default, aten.values.default,
                   aten._nnz.default, aten.dense_dim.default, aten.sparse_dim.default,
                   aten.empty.memory_format, aten.empty_like.default, aten.zero_.default,
                   aten.fill_.Scalar, aten.resize_as_sparse_.default)
_CPU_KERNELS = DispatchKeySet(DispatchKey.SparseCsrCPU)


def _kernel(*funcs):
    def register(fn):
        for f in funcs:
            KERNELS[f] = fn
        return fn

    return register


def refused(func, layout=None) -> NotImplementedError:
    where = f"sparse compressed tensors (layout={layout})" if layout else \
        "sparse compressed tensors (CSR, CSC)"
    return NotImplementedError(
        f"torchtpu: {func} is not supported for {where} on tpu. Supported: construction, "
        f"crow/col/ccol/row_indices, values, to_dense, conversion to and from dense and COO, "
        f"CSR <-> CSC, mm/addmm/mv/matmul (with a dense operand, or CSR @ CSR), transpose, "
        f"select, sum, clone, copies and value-wise functions that keep zeros (neg, abs, sqrt, "
        f"sin, tanh, relu, mul by a number...). Convert with .to_dense(), .to_sparse() or .cpu(), "
        f"and please report it at {REPORT} with this message.")


def _layout_of(args) -> torch.layout | None:
    for a in args:
        if isinstance(a, torch.Tensor) and a.layout is not torch.strided:
            return a.layout
    return None


# --- members ---

def _check_2d(t, func) -> None:
    if t.layout not in _COMPRESSED or t.dim() - t.dense_dim() != 2:
        # batched (3-d and more index tensors) or block layouts
        raise refused(func, t.layout)


def entries(t, func=aten._to_dense.default):
    """(rows, cols, values) of a CSR or CSC tpu tensor, in its storage order."""
    _check_2d(t, func)
    values = t.values()
    if t.layout is torch.sparse_csr:
        compressed, plain, outer = t.crow_indices(), t.col_indices(), t.shape[0]
    else:
        compressed, plain, outer = t.ccol_indices(), t.row_indices(), t.shape[1]
    counts = compressed[1:] - compressed[:-1]
    repeated = torch.repeat_interleave(
        torch.arange(outer, device=DEVICE), counts.long(), output_size=values.shape[0])
    plain = plain.long()
    return (repeated, plain, values) if t.layout is torch.sparse_csr else \
        (plain, repeated, values)


def compressed(rows, cols, values, size, layout, index_dtype=torch.int64):
    """A CSR (or CSC) tpu tensor of entries already ordered by row (by column)."""
    outer, plain, n = (rows, cols, size[0]) if layout is torch.sparse_csr else \
        (cols, rows, size[1])
    counts = torch.bincount(outer, minlength=n) if outer.numel() else \
        torch.zeros(n, dtype=torch.int64, device=DEVICE)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64, device=DEVICE), counts.cumsum(0)])
    return aten._sparse_compressed_tensor_unsafe.default(
        offsets.to(index_dtype), plain.to(index_dtype), values, tuple(size),
        dtype=values.dtype, layout=layout, device=DEVICE)


def _rebuilt(t, values):
    """``t``'s indices with new values (a value-wise function's result, or fewer dense dims)."""
    if t.layout is torch.sparse_csr:
        outer, plain = t.crow_indices(), t.col_indices()
    else:
        outer, plain = t.ccol_indices(), t.row_indices()
    return aten._sparse_compressed_tensor_unsafe.default(
        outer.clone(), plain.clone(), values, (*t.shape[:2], *values.shape[1:]),
        dtype=values.dtype, layout=t.layout, device=t.device)


def _index_dtype(t):
    return (t.crow_indices() if t.layout is torch.sparse_csr else t.ccol_indices()).dtype


# --- conversions ---

@_kernel(aten._to_dense.default)
def _to_dense(t, dtype=None, masked_grad=None):
    rows, cols, values = entries(t)
    if dtype is not None:
        values = values.to(dtype)
    out = torch.zeros(t.shape, dtype=values.dtype, device=DEVICE)
    return out.index_put_((rows, cols), values, accumulate=True)  # duplicates add, as CPU


def _ordered(rows, cols, values, size, by_column: bool):
    """The entries sorted by (row, column), or by (column, row)."""
    key = cols * size[0] + rows if by_column else rows * size[1] + cols
    order = torch.argsort(key, stable=True)
    return rows[order], cols[order], values[order]


@_kernel(aten._to_sparse.default, aten._to_sparse.sparse_dim)
def _to_sparse(t, *rest, **kwargs):
    layout = kwargs.get("layout") if not rest else torch.sparse_coo
    if layout is not None and layout is not torch.sparse_coo:
        return _to_compressed(t, layout)
    if rest and rest[0] != 2:
        raise refused(aten._to_sparse.sparse_dim, t.layout)
    rows, cols, values = entries(t, aten._to_sparse.default)
    # (CPU keeps the storage order: a CSC tensor's entries come out uncoalesced)
    return make(torch.stack([rows, cols]), values, t.shape, t.layout is torch.sparse_csr)


def _to_compressed(t, layout):
    if t.layout is layout:
        return t
    rows, cols, values = entries(t, aten._to_sparse_csr.default)
    rows, cols, values = _ordered(rows, cols, values, t.shape,
                                  by_column=layout is torch.sparse_csc)
    return compressed(rows, cols, values, t.shape, layout, _index_dtype(t))


@_kernel(aten._to_sparse_csr.default)
def _to_csr(t, dense_dim=None):
    return _to_compressed(t, torch.sparse_csr)


@_kernel(aten._to_sparse_csc.default)
def _to_csc(t, dense_dim=None):
    return _to_compressed(t, torch.sparse_csc)


def from_dense(self, layout, dense_dim=None):
    """A dense tpu tensor's ``to_sparse_csr()`` / ``to_sparse_csc()``: its nonzero entries
    in row (column) order."""
    if (dense_dim or 0) or self.dim() != 2:
        raise NotImplementedError(
            f"torchtpu: converting a {self.dim()}-d tensor{' with dense dims' * bool(dense_dim)}"
            f" to {layout} is not supported on tpu (2-d only). Please report it at {REPORT}.")
    source = self.t() if layout is torch.sparse_csc else self
    nonzero = (source != 0).nonzero()
    outer, plain = nonzero[:, 0], nonzero[:, 1]
    rows, cols = (plain, outer) if layout is torch.sparse_csc else (outer, plain)
    return compressed(rows, cols, self[rows, cols], self.shape, layout)


def dense_handler(layout):
    """The dense tpu tensor's ``_to_sparse_csr`` / ``_to_sparse_csc`` (eager/special.py)."""
    return lambda args, kwargs: from_dense(*args, layout=layout, **kwargs)


def from_coo(s, layout):
    """A sparse COO tpu tensor's ``to_sparse_csr()`` / ``to_sparse_csc()``."""
    if s.sparse_dim() != 2:
        raise refused(aten._to_sparse_csr.default, torch.sparse_coo)
    s = s.coalesce()
    rows, cols = s._i[0], s._i[1]
    values = s._v
    if layout is torch.sparse_csc:
        rows, cols, values = _ordered(rows, cols, values, s.shape, by_column=True)
    return compressed(rows, cols, values, s.shape, layout)


# --- products with a dense operand ---

def _product(a, b, alpha=1):
    """alpha * (a @ b) with one of them compressed: each entry's row (column) of the dense
    operand scaled and added into its row (column) of the result."""
    sparse_first = a.layout in _COMPRESSED
    s, dense = (a, b) if sparse_first else (b, a)
    if b.layout in _COMPRESSED and a.layout in _COMPRESSED:
        # (CPU's result is CSR whatever the operands' compressed layouts)
        product = torch.mm(a.to_sparse(), b.to_sparse())
        return from_coo(product * alpha if alpha != 1 else product, torch.sparse_csr)
    if a.dim() != 2 or b.dim() != 2:
        raise RuntimeError(f"mm: expected 2-D tensors, got {a.dim()}-D and {b.dim()}-D")
    if a.shape[1] != b.shape[0]:
        raise unmultipliable(a, b)
    if a.dtype != b.dtype:
        raise RuntimeError(f"expected scalar type {_name(a.dtype)} but found {_name(b.dtype)}")
    rows, cols, values = entries(s, aten.mm.default)
    if alpha != 1:
        values = values * alpha
    if sparse_first:
        out = torch.zeros((a.shape[0], b.shape[1]), dtype=a.dtype, device=DEVICE)
        return out.index_add(0, rows, values[:, None] * dense[cols])
    out = torch.zeros((a.shape[0], b.shape[1]), dtype=a.dtype, device=DEVICE)
    return out.index_add(1, cols, dense[:, rows] * values)


@_kernel(aten.sparse_sampled_addmm.default)
def _sampled_addmm(self, mat1, mat2, *, beta=1, alpha=1):
    """beta * self + alpha * (mat1 @ mat2) at ``self``'s entries only (its indices kept)."""
    if mat1.layout is not torch.strided or mat2.layout is not torch.strided:
        raise refused(aten.sparse_sampled_addmm.default, self.layout)
    if mat1.shape[-1] != mat2.shape[-2]:
        raise unmultipliable(mat1, mat2, "sampled_addmm: ")
    if self.shape[-2] != mat1.shape[-2]:
        raise RuntimeError("sampled_addmm: self.shape[-2] must match mat1.shape[-2]")
    if self.shape[-1] != mat2.shape[-1]:
        raise RuntimeError("sampled_addmm: self.shape[-1] must match mat2.shape[-1]")
    if mat1.dtype != mat2.dtype:
        raise RuntimeError(f"sampled_addmm: Expected mat1 and mat2 to have the same dtype, but "
                           f"got {_name(mat1.dtype)} and {_name(mat2.dtype)}")
    rows, cols, values = entries(self, aten.sparse_sampled_addmm.default)
    sampled = (mat1[rows] * mat2.t()[cols]).sum(-1)
    return _rebuilt(self, values * beta + sampled * alpha if beta else sampled * alpha)


@_kernel(aten.mm.default)
def _mm(a, b):
    return _product(a, b)


@_kernel(aten.addmm.default)
def _addmm(input_, a, b, *, beta=1, alpha=1):
    if input_.layout is not torch.strided:
        raise refused(aten.addmm.default, input_.layout)
    product = _product(a, b, alpha)
    if beta == 0:
        return product
    return torch.add(product, input_.expand(product.shape), alpha=beta)


@_kernel(aten.mv.default)
def _mv(s, vec):
    if vec.layout is not torch.strided or vec.dim() != 1:
        raise refused(aten.mv.default, s.layout)
    return _product(s, vec.unsqueeze(1)).squeeze(1)


# --- value-wise ---

# Functions with f(0) == 0: applied to the values, the indices kept (CPU's kernels likewise).
_KEEPING_ZEROS = ("abs", "neg", "sqrt", "sin", "sinh", "tan", "tanh", "asin", "asinh", "atan",
                  "atanh", "erf", "erfinv", "expm1", "log1p", "ceil", "floor", "round", "trunc",
                  "frac", "sign", "sgn", "rad2deg", "deg2rad", "relu", "conj_physical")
_PREDICATES = ("signbit", "isnan", "isinf", "isposinf", "isneginf")


def _value_wise(name):
    op = getattr(aten, name).default
    return lambda t: _rebuilt(t, op(t.values()))


def _value_wise_(name):
    op = getattr(aten, name + "_").default
    return lambda t: (op(t.values()), t)[1]


for _fn in _KEEPING_ZEROS + _PREDICATES:
    KERNELS[getattr(aten, _fn).default] = _value_wise(_fn)
for _fn in _KEEPING_ZEROS:
    if hasattr(aten, _fn + "_"):
        KERNELS[getattr(aten, _fn + "_").default] = _value_wise_(_fn)


def _scalar(other, func):
    if isinstance(other, torch.Tensor):
        if other.dim() != 0 or other.layout is not torch.strided:
            raise refused(func)
    return other


@_kernel(aten.mul.Scalar, aten.mul.Tensor)
def _mul(a, b):
    if isinstance(a, torch.Tensor) and a.layout in _COMPRESSED:
        return _rebuilt(a, a.values() * _scalar(b, aten.mul.Tensor))
    return _rebuilt(b, _scalar(a, aten.mul.Tensor) * b.values())


@_kernel(aten.mul_.Scalar, aten.mul_.Tensor)
def _mul_(a, b):
    a.values().mul_(_scalar(b, aten.mul_.Tensor))
    return a


@_kernel(aten.add.Tensor)
def _add(a, b, *, alpha=1):
    """CSR + CSR (or CSC + CSC): the union of their entries, sorted; with a dense operand,
    a dense result (CPU's kernels)."""
    if a.layout is torch.strided or b.layout is torch.strided:
        dense = [x if x.layout is torch.strided else x.to_dense() for x in (a, b)]
        return torch.add(*dense, alpha=alpha)
    if a.layout is not b.layout or a.shape != b.shape:
        raise refused(aten.add.Tensor, a.layout)
    total = (a.to_sparse() + b.to_sparse() * alpha).coalesce()
    return from_coo(total, a.layout).to(dtype=total.dtype)


@_kernel(aten.add_.Tensor)
def _add_(a, b, *, alpha=1):
    if a.layout is not torch.strided:
        raise refused(aten.add_.Tensor, a.layout)
    return a.add_(b.to_dense(), alpha=alpha)


@_kernel(aten.sparse_mask.default)
def _sparse_mask(self, mask):
    """A dense ``self`` at ``mask``'s entries, with its indices (to_dense's backward)."""
    if self.layout is not torch.strided:
        raise refused(aten.sparse_mask.default, self.layout)
    if self.shape != mask.shape:
        raise RuntimeError(f"sparse_mask(): operands have incompatible sizes; self has size "
                           f"{list(self.shape)} but mask has size {list(mask.shape)}")
    rows, cols, _ = entries(mask, aten.sparse_mask.default)
    return _rebuilt(mask, self[rows, cols])


@_kernel(aten.sum.default)
def _sum(t, dtype=None):
    return t.values().sum(dtype=dtype)


@_kernel(aten.select.int)
def _select(t, dim, index):
    """A row or column as a 1-d sparse COO tensor (CPU's: flagged coalesced, its entries in
    order), or, along a dense dim of the values, a compressed tensor of the same pattern.
    CPU refuses some selections whose values cannot be a view of the members' (a row of a
    CSC tensor); here each one is a copy."""
    dim = canonicalize_dim(t.dim(), dim)
    size = t.shape[dim]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(t.shape)} at dimension {dim}")
    index %= size
    if dim >= 2:
        return _rebuilt(t, t.values().select(dim - 1, index))
    rows, cols, values = entries(t, aten.select.int)
    picked, kept = (rows, cols) if dim == 0 else (cols, rows)
    at = (picked == index).nonzero().squeeze(1)
    shape = [n for d, n in enumerate(t.shape) if d != dim]
    return make(kept[at][None], values[at], shape, True)


@_kernel(aten.clone.default)
def _clone(t, memory_format=None):
    return _rebuilt(t, t.values().clone())


@_kernel(aten.copy_.default)
def _copy_(dst, src, non_blocking=False):
    if dst.layout is not src.layout or dst.shape != src.shape or dst._nnz() != src._nnz():
        raise RuntimeError("torchtpu: copy_ between sparse compressed tensors needs the same "
                           f"layout, size and nnz (got {dst.layout} {tuple(dst.shape)} nnz "
                           f"{dst._nnz()} and {src.layout} {tuple(src.shape)} nnz "
                           f"{src._nnz()})")
    names = ("crow_indices", "col_indices") if dst.layout is torch.sparse_csr else \
        ("ccol_indices", "row_indices")
    for name in names:
        getattr(dst, name)().copy_(getattr(src, name)())
    dst.values().copy_(src.values())
    return dst


def _as_cpu_does(func):
    return lambda *args, **kwargs: func.redispatch(_CPU_KERNELS, *args, **kwargs)


for _func in _DEVICE_GENERIC:
    KERNELS[_func] = _as_cpu_does(_func)


def run(func, args, kwargs):
    """``func`` with a CSR/CSC tpu operand that reached the dense tensor's dispatch."""
    kernel = KERNELS.get(func)
    if kernel is None:
        raise refused(func, _layout_of(args))
    return kernel(*args, **kwargs)


def _refusing(func, *args, **kwargs):
    raise refused(func, _layout_of(args))


def register() -> None:
    """Install the kernels on the ``SparseCsrPrivateUse1`` key, and a fallback refusing the
    rest by name (PyTorch's default error names no op)."""
    global _libs
    impl = torch.library.Library("aten", "IMPL")
    for func, fn in KERNELS.items():
        impl.impl(func, fn, "SparseCsrPrivateUse1")
    fallback = torch.library.Library("_", "IMPL")
    fallback.fallback(_refusing, "SparseCsrPrivateUse1")
    _libs = (impl, fallback)


_libs: tuple = ()
