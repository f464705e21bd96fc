"""The ops of sparse COO tpu tensors (``sparse.py``), each computed with ordinary tpu ops on
their indices and values, matching CPU's results: values, dtypes, nnz and the coalesced flag
(CPU's kernels decide when a result is coalesced; each handler says what CPU's does). Here:
metadata, coalescing and conversions, elementwise arithmetic, addition; products are in
``sparse_matmul.py``, sums and softmax in ``sparse_reductions.py``, transposes, selections,
joins and resizing in ``sparse_shape.py``."""

from __future__ import annotations

import math

import torch

from .ops.dtypes import scalar_type_name as _name
from .sparse import SparseTensor, make, refused, set_size
from .tensor import DEVICE

aten = torch.ops.aten
OPS: dict = {}


def _op(*funcs):
    def register(fn):
        for f in funcs:
            OPS[f] = fn
        return fn

    return register


def _sd(s) -> int:
    return s._i.shape[0]


def _nnz_of(s) -> int:
    return s._i.shape[1]


# --- metadata ---

_op(aten.sparse_dim.default)(_sd)
_op(aten._nnz.default)(_nnz_of)
_op(aten.dense_dim.default)(lambda s: s._v.dim() - 1)
_op(aten.is_coalesced.default)(lambda s: s._coalesced)
_op(aten._indices.default)(lambda s: aten.alias.default(s._i))
_op(aten._values.default)(lambda s: aten.alias.default(s._v))
_op(aten.is_same_size.default)(lambda a, b: a.shape == b.shape)


def _coalesced_part(name: str, attr: str):
    def part(s):
        if not s._coalesced:
            raise RuntimeError(f"Cannot get {name} on an uncoalesced tensor, please call "
                               f".coalesce() first")
        return aten.alias.default(getattr(s, attr))

    return part


OPS[aten.indices.default] = _coalesced_part("indices", "_i")
OPS[aten.values.default] = _coalesced_part("values", "_v")


@_op(aten._coalesced_.default)
def _set_coalesced(s, coalesced):
    s._coalesced = bool(coalesced)
    return s


@_op(aten.detach.default, aten.alias.default)
def _detach(s):
    return make(s._i, s._v, s.shape, s._coalesced)


@_op(aten.clone.default)
def _clone(s, *, memory_format=None):
    return make(s._i.clone(), s._v.clone(), s.shape, s._coalesced)


@_op(aten._to_copy.default)
def _to_copy(s, *, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False,
             memory_format=None):
    if layout not in (None, torch.sparse_coo):
        raise refused(aten._to_copy.default)
    values = s._v.to(dtype) if dtype is not None else s._v
    if device is not None and torch.device(device).type != "tpu":
        # CPU's (or another device's) sparse tensor of the host copies
        return aten._sparse_coo_tensor_with_dims_and_tensors.default(
            _sd(s), s._v.dim() - 1, list(s.shape), s._i.to(device), values.to(device),
            dtype=values.dtype, layout=torch.sparse_coo, device=torch.device(device),
            is_coalesced=s._coalesced)
    return make(s._i.clone(), values if dtype not in (None, s.dtype) else values.clone(),
                s.shape, s._coalesced)


@_op(aten.zeros_like.default, aten.empty_like.default)
def _zeros_like(s, *, dtype=None, layout=None, device=None, pin_memory=None,
                memory_format=None):
    dtype = dtype or s.dtype
    if layout is not None and layout != torch.sparse_coo:
        return torch.zeros(s.shape, dtype=dtype, layout=layout, device=device or DEVICE)
    if device is not None and torch.device(device).type != "tpu":
        return torch.zeros_like(s.cpu(), dtype=dtype, device=device)
    indices = torch.zeros((_sd(s), 0), dtype=torch.int64, device=DEVICE)
    values = torch.zeros((0, *s._v.shape[1:]), dtype=dtype, device=DEVICE)
    return make(indices, values, s.shape, True)


@_op(aten.new_zeros.default, aten.new_empty.default)
def _new_zeros(s, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    """Sparse like CPU's: every dim sparse, no entries."""
    if device is not None and torch.device(device).type != "tpu":
        return aten.new_zeros.default(s.cpu(), size, dtype=dtype, layout=layout, device=device)
    if layout is not None and layout != torch.sparse_coo:
        return torch.zeros(size, dtype=dtype or s.dtype, layout=layout, device=DEVICE)
    return empty(size, dtype=dtype or s.dtype)


def empty(size, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    """``torch.empty(size, layout=torch.sparse_coo, device="tpu")``: every dim sparse, no
    entries (also zeros', which zeroes it)."""
    dtype = dtype or torch.get_default_dtype()
    indices = torch.zeros((len(size), 0), dtype=torch.int64, device=DEVICE)
    return make(indices, torch.zeros((0,), dtype=dtype, device=DEVICE), size, True)


@_op(aten.zero_.default)
def _zero_(s):
    s._i = torch.zeros((_sd(s), 0), dtype=torch.int64, device=DEVICE)
    s._v = torch.zeros((0, *s._v.shape[1:]), dtype=s.dtype, device=DEVICE)
    s._coalesced = True
    return s


# --- coalescing and conversions ---

def _linear(indices, sizes):
    """Each entry's position in the row-major order of the sparse dims (an int64 per entry)."""
    strides = [math.prod(sizes[d + 1:]) for d in range(len(sizes))]
    weights = torch.tensor(strides, dtype=torch.int64).to(DEVICE)
    return (indices * weights[:, None]).sum(0)


def _unravel(linear, sizes):
    rows = []
    for d in range(len(sizes)):
        stride = math.prod(sizes[d + 1:])
        rows.append(torch.remainder(torch.div(linear, stride, rounding_mode="floor"), sizes[d]))
    if not rows:
        return torch.zeros((0, linear.shape[0]), dtype=torch.int64, device=DEVICE)
    return torch.stack(rows)


def _summed(values, inverse, n: int):
    """``values`` summed into ``n`` rows by ``inverse``, in order (as CPU adds duplicates)."""
    summing = values if values.dtype != torch.bool else values.to(torch.int8)
    out = torch.zeros((n, *values.shape[1:]), dtype=summing.dtype, device=DEVICE)
    out = out.index_add(0, inverse, summing)
    return out if values.dtype != torch.bool else out != 0


@_op(aten._coalesce.default)
def _coalesce(s):
    """Duplicates summed, indices sorted (row-major): CPU's coalesce. Fewer than two entries
    are only flagged, as on CPU."""
    if _nnz_of(s) < 2:
        return make(s._i.clone(), s._v.clone(), s.shape, True)
    sizes = list(s.shape[:_sd(s)])
    linear = _linear(s._i, sizes)
    ordered, order = torch.sort(linear, stable=True)
    unique, inverse = torch.unique_consecutive(ordered, return_inverse=True)
    values = _summed(s._v[order], inverse, unique.shape[0])
    return make(_unravel(unique, sizes), values, s.shape, True)


@_op(aten.coalesce.default)
def _coalesce_if_needed(s):
    return s if s._coalesced else _coalesce(s)


def _dense_of(s, dtype=None):
    out = torch.zeros(s.shape, dtype=dtype or s.dtype, device=DEVICE)
    if not _nnz_of(s):
        return out
    if _sd(s) == 0:  # every entry is the whole tensor
        return out + s._v.sum(0).to(out.dtype)
    return out.index_put_(tuple(s._i), s._v.to(out.dtype), accumulate=True)


@_op(aten._to_dense.default, aten.to_dense.default)
def _to_dense(s, dtype=None, masked_grad=None):
    return _dense_of(s, dtype)


def _to_compressed(layout):
    def convert(s, dense_dim=None):
        from .sparse_compressed import from_coo

        if dense_dim:
            raise refused(aten._to_sparse_csr.default)
        return from_coo(s, layout)

    return convert


_op(aten._to_sparse_csr.default)(_to_compressed(torch.sparse_csr))
_op(aten._to_sparse_csc.default)(_to_compressed(torch.sparse_csc))


@_op(aten._to_sparse.default)
def _to_sparse(s, *, layout=None, blocksize=None, dense_dim=None):
    if layout in (None, torch.sparse_coo):
        return s
    if layout in (torch.sparse_csr, torch.sparse_csc) and blocksize is None:
        return _to_compressed(layout)(s, dense_dim)
    raise refused(aten._to_sparse.default)


@_op(aten.sparse_mask.default)
def _sparse_mask(self, mask):
    """``x.sparse_mask(sparse)``: ``x``'s entries at ``mask``'s indices, in ``mask``'s order
    and with its flag (zero where a sparse ``x`` has no entry)."""
    if self.shape != mask.shape:
        raise RuntimeError(f"sparse_mask(): operands have incompatible sizes; self has size "
                           f"{list(self.shape)} but mask has size {list(mask.shape)}")
    if type(self) is SparseTensor:
        values = _looked_up(_coalesce_if_needed(self), mask._i)
    elif _sd(mask):
        values = self[tuple(mask._i)]
    else:
        values = self.expand(_nnz_of(mask), *self.shape)
    return make(mask._i.clone(), values.contiguous(), mask.shape, mask._coalesced)


@_op(aten._sparse_mask_projection.default)
def _sparse_mask_projection(self, mask, accumulate_matches=False):
    """``self``'s entries, zeroed where ``mask`` has none: ``self``'s indices and flag (the
    backward of sparse_mask and of sparse @ sparse)."""
    if type(self) is not SparseTensor or type(mask) is not SparseTensor:
        raise refused(aten._sparse_mask_projection.default)
    if self.shape != mask.shape:
        raise RuntimeError(f"_sparse_mask_projection(): operands have incompatible sizes; self "
                           f"has size {list(self.shape)} but mask has size {list(mask.shape)}")
    _, found = _found(_coalesce_if_needed(mask), self._i)
    found = found.view(-1, *[1] * (self._v.dim() - 1))
    values = torch.where(found, self._v, torch.zeros((), dtype=self.dtype, device=DEVICE))
    return make(self._i.clone(), values, self.shape, self._coalesced)


def _found(s, indices):
    """Where each of ``indices`` sits among a coalesced ``s``'s entries, and whether ``s``
    has an entry there."""
    sizes = list(s.shape[:_sd(s)])
    keys, wanted = _linear(s._i, sizes), _linear(indices, sizes)
    at = torch.searchsorted(keys, wanted).clamp(max=max(keys.shape[0] - 1, 0))
    if not keys.shape[0]:
        return at, torch.zeros_like(wanted, dtype=torch.bool)
    return at, keys[at] == wanted


def _looked_up(s, indices):
    """A coalesced ``s``'s values at ``indices`` (zero where it has none)."""
    if not _nnz_of(s):
        return torch.zeros((indices.shape[1], *s._v.shape[1:]), dtype=s.dtype, device=DEVICE)
    at, found = _found(s, indices)
    found = found.view(-1, *[1] * (s._v.dim() - 1))
    return torch.where(found, s._v[at], torch.zeros((), dtype=s.dtype, device=DEVICE))


# --- arithmetic ---

def _number(x) -> bool:
    return not isinstance(x, torch.Tensor) or (type(x) is not SparseTensor and x.dim() == 0)


@_op(aten.mul.Tensor, aten.mul.Scalar)
def _mul(a, b):
    if type(a) is SparseTensor and _number(b):
        return make(a._i.clone(), torch.mul(a._v, b), a.shape, a._coalesced)
    if type(b) is SparseTensor and _number(a):
        return make(b._i.clone(), torch.mul(a, b._v), b.shape, b._coalesced)
    if type(a) is SparseTensor and type(b) is SparseTensor:
        return _mul_sparse(a, b)
    s, dense = (a, b) if type(a) is SparseTensor else (b, a)
    shape = torch.broadcast_shapes(s.shape, dense.shape)
    if shape != s.shape:
        return _mul_broadcast(s, dense, shape)
    # each entry times the dense value at its place: the sparse operand's indices and flag
    values = s._v * dense.expand(s.shape)[tuple(s._i)]
    return make(s._i.clone(), values, s.shape, s._coalesced)


def _mul_broadcast(s, dense, shape):
    """sparse * dense where the dense operand adds leading dims: CPU's result is sparse over
    those dims too, the coalesced operand's entries repeated for each leading index (in order),
    each times the dense value at its place; coalesced."""
    lead = shape[:len(shape) - s.dim()]
    if shape[len(lead):] != s.shape:
        raise refused(aten.mul.Tensor)  # (a sparse operand broadcast in its own dims)
    s = _coalesce_if_needed(s)
    n, repeats = _nnz_of(s), math.prod(lead)
    leading = _unravel(torch.arange(repeats, device=DEVICE), lead)
    indices = torch.cat([leading.repeat_interleave(n, 1), s._i.repeat(1, repeats)])
    at = dense.expand(shape).reshape(repeats, *s.shape)[(slice(None), *s._i)]
    values = (s._v * at).reshape(repeats * n, *s._v.shape[1:])
    return make(indices, values, shape, True)


def _mul_sparse(a, b):
    """sparse * sparse, as CPU's kernel: two coalesced operands give the entries both have
    (coalesced); otherwise the uncoalesced operand's entries (the right one's when both are),
    each times the other's summed value at its place, flagged uncoalesced."""
    if a.shape != b.shape:
        raise RuntimeError(f"mul operands have incompatible sizes: {list(a.shape)} and "
                           f"{list(b.shape)}")
    if a._coalesced and b._coalesced:
        at, found = _found(b, a._i)
        both = found.nonzero().squeeze(1)
        return make(a._i[:, both], a._v[both] * b._v[at[both]], a.shape, True)
    pattern, other = (a, b) if b._coalesced else (b, a)
    values = pattern._v * _looked_up(_coalesce_if_needed(other), pattern._i)
    return make(pattern._i.clone(), values, a.shape, False)


@_op(aten.div.Tensor, aten.div.Scalar, aten.div.Tensor_mode, aten.div.Scalar_mode)
def _div(a, b, *, rounding_mode=None):
    if type(a) is not SparseTensor:
        raise refused(aten.div.Tensor)
    if isinstance(b, torch.Tensor) and (type(b) is SparseTensor or b.dim()):
        raise RuntimeError(f"Sparse division requires a scalar or zero-dim dense tensor divisor "
                           f"(got shape {list(b.shape)} for divisor)")
    if rounding_mode is not None:  # rounding is not linear: CPU rounds coalesced sums
        a = _coalesce_if_needed(a)
    values = torch.div(a._v, b, rounding_mode=rounding_mode)
    return make(a._i.clone(), values, a.shape, a._coalesced)


@_op(aten.neg.default)
def _neg(s):
    return make(s._i.clone(), torch.neg(s._v), s.shape, s._coalesced)


# neg_ and div_ change the values in place: a tensor made from them (torch.sparse_coo_tensor(i,
# v) aliases v, as on CPU) sees it.
@_op(aten._conj_physical.default, aten.conj_physical.default)
def _conj_physical(s):
    return make(s._i.clone(), torch.conj_physical(s._v), s.shape, s._coalesced)


@_op(aten.neg_.default)
def _neg_(s):
    s._v.neg_()
    return s


@_op(aten.mul_.Tensor, aten.mul_.Scalar)
def _mul_(s, other):
    if type(s) is not SparseTensor or not _number(other):
        raise refused(aten.mul_.Tensor)
    s._v = torch.mul(s._v, other).to(s.dtype)  # (CPU's gives the tensor new values)
    return s


@_op(aten.div_.Tensor, aten.div_.Scalar)
def _div_(s, other):
    if type(s) is not SparseTensor:
        raise refused(aten.div_.Tensor)
    _div(s, other)  # (its checks)
    s._v.div_(other)
    return s


@_op(aten.copy_.default)
def _copy_(self, src, non_blocking=False):
    """Sparse into sparse, across devices too (load_state_dict of a sparse buffer): the
    source's entries and flag, in ``self``'s dtype."""
    if not (self.is_sparse and src.is_sparse):
        raise RuntimeError(f"copy_() between dense and sparse Tensors is not implemented! "
                           f"Found self type = {self.type()} and src type = {src.type()}")
    if type(self) is not SparseTensor:  # a CPU sparse tensor from a tpu one
        return self.copy_(aten._to_copy.default(src, device=self.device), non_blocking)
    if src.device.type != "tpu":
        src = aten._to_copy.default(src, device=DEVICE)
    self._i, self._v = src._i.clone(), src._v.to(self.dtype, copy=True)
    self._coalesced = src.is_coalesced()
    set_size(self, src.shape)  # (CPU's resizes self to the source's size)
    return self


# Ops CPU computes on the values of the coalesced tensor (f(0) == 0, but f(a + b) is not
# f(a) + f(b)); their in-place forms refuse an uncoalesced tensor.
_ON_COALESCED = ("abs", "sin", "tan", "sqrt", "sign", "sgn", "trunc", "floor", "ceil", "round",
                 "asin", "atan", "sinh", "tanh", "asinh", "atanh", "expm1", "log1p", "erf",
                 "erfinv", "frac", "deg2rad", "rad2deg", "nan_to_num", "signbit", "isnan",
                 "isinf", "isposinf", "isneginf", "relu", "pow")


def _on_coalesced(func):
    def run(s, *args, **kwargs):
        if type(s) is not SparseTensor or any(
                isinstance(a, torch.Tensor) for a in (*args, *kwargs.values())):
            raise refused(func)
        c = _coalesce_if_needed(s)
        return make(c._i.clone(), func(c._v, *args, **kwargs), s.shape, True)

    return run


def _on_coalesced_(func, name: str):
    def run(s, *args, **kwargs):
        if type(s) is not SparseTensor or any(
                isinstance(a, torch.Tensor) for a in (*args, *kwargs.values())):
            raise refused(func)
        if not s._coalesced:
            raise RuntimeError(f"{name}_ requires coalesced input")
        func(s._v, *args, **kwargs)
        return s

    return run


for _name_ in _ON_COALESCED:
    for _packet, _make in ((getattr(aten, _name_), _on_coalesced),
                           (getattr(aten, _name_ + "_", None), None)):
        if _packet is None:
            continue
        for _overload in _packet.overloads():
            if _overload.endswith("out") or _overload in ("Tensor_Tensor", "Scalar", "Tensor"):
                continue
            f = getattr(_packet, _overload)
            OPS[f] = _make(f) if _make else _on_coalesced_(f, _name_)


@_op(aten.floor_divide.default, aten.floor_divide.Scalar)
def _floor_divide(s, other):
    if type(s) is not SparseTensor:
        raise refused(aten.floor_divide.default)
    if isinstance(other, torch.Tensor) and (type(other) is SparseTensor or other.dim()):
        raise RuntimeError(f"Sparse floor division requires a scalar or zero-dim dense tensor "
                           f"divisor (got shape {list(other.shape)} for divisor)")
    c = _coalesce_if_needed(s)
    return make(c._i.clone(), torch.floor_divide(c._v, other), s.shape, True)


def _alpha_times(values, alpha):
    return values if alpha == 1 else torch.mul(values, alpha)


def _add_dense_sparse(dense, s, alpha, out_dtype):
    if dense.shape != s.shape:
        raise RuntimeError(
            f"add: expected 'self' and 'other' to have same size, but self has size "
            f"{list(dense.shape)} while other has size {list(s.shape)} (FYI: dense-sparse "
            f"addition does not currently support broadcasting)")
    dtype = torch.promote_types(dense.dtype, s.dtype)
    added = _dense_of(make(s._i, _alpha_times(s._v.to(dtype), alpha), s.shape, s._coalesced))
    return (dense.to(dtype) + added).to(out_dtype or dtype)


def _merged(a, b):
    """CPU's sparse + sparse: a merge of the two entry lists in their order, one pair compared
    at a time, equal indices added into one entry; coalesced when both are. The walk's order
    is read from the host (as CPU's is data-dependent); the values stay on tpu. Two coalesced
    lists merge into their sorted union, found on the device."""
    if a._coalesced and b._coalesced:
        sizes = list(a.shape[:_sd(a)])
        keys = torch.cat([_linear(a._i, sizes), _linear(b._i, sizes)])
        unique, rows = torch.unique(keys, sorted=True, return_inverse=True)
        return rows, unique.shape[0]
    ia, ib = a._i.cpu(), b._i.cpu()
    na, nb = ia.shape[1], ib.shape[1]
    ta, tb = ia.t().tolist(), ib.t().tolist()
    ra, rb = [], []  # each entry's row in the result
    i = j = r = 0
    while i < na or j < nb:
        if i >= na:
            cmp = -1
        elif j >= nb:
            cmp = 1
        else:
            cmp = (ta[i] < tb[j]) - (ta[i] > tb[j])
        if cmp >= 0:
            ra.append(r)
            i += 1
        if cmp <= 0:
            rb.append(r)
            j += 1
        r += 1
    return torch.tensor(ra + rb, dtype=torch.int64), r


def _add_or_sub(sign: int, name: str):
    def add(a, b, *, alpha=1):
        alpha = alpha * sign
        if type(a) is not SparseTensor:  # dense + sparse: dense
            if _number(b) or type(b) is not SparseTensor:
                raise refused(getattr(aten, name).Tensor)
            return _add_dense_sparse(a, b, alpha, None)
        if type(b) is not SparseTensor:
            raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) "
                               "instead.")
        return _add_sparse(a, b, alpha)

    return add


def _add_sparse(a, b, alpha):
    if a.shape != b.shape:
        raise RuntimeError(f"add: expected sizes of 'self' and 'other' to match, but "
                           f"{list(a.shape)} != {list(b.shape)}")
    dtype = torch.promote_types(a.dtype, b.dtype)
    if _nnz_of(b) == 0:
        return make(a._i.clone(), a._v.to(dtype, copy=True), a.shape, a._coalesced)
    if _nnz_of(a) == 0:
        return make(b._i.clone(), _alpha_times(b._v.to(dtype), alpha).clone(), a.shape,
                    b._coalesced)
    if _sd(a) != _sd(b):
        raise RuntimeError(f"add: expected 'self' and 'other' to have same density, but "
                           f"'self' has {_sd(a)} sparse dimensions while 'other' has {_sd(b)} "
                           f"sparse dimensions")
    rows, n = _merged(a, b)
    rows = rows.to(DEVICE)
    both = torch.cat([a._i, b._i], 1)
    indices = torch.zeros((_sd(a), n), dtype=torch.int64, device=DEVICE)
    indices = indices.index_copy(1, rows, both)
    values = torch.cat([a._v.to(dtype), _alpha_times(b._v.to(dtype), alpha)])
    return make(indices, _summed(values, rows, n), a.shape, a._coalesced and b._coalesced)


OPS[aten.add.Tensor] = _add_or_sub(1, "add")
OPS[aten.sub.Tensor] = _add_or_sub(-1, "sub")


def _add_or_sub_(sign: int):
    def add_(a, b, *, alpha=1):
        if type(a) is not SparseTensor:  # dense += sparse (a dense gradient taking a sparse one)
            return a.copy_(_add_dense_sparse(a, b, alpha * sign, a.dtype))
        r = OPS[aten.add.Tensor](a, b, alpha=alpha * sign)
        if r.dtype != a.dtype:
            if not torch.can_cast(r.dtype, a.dtype):
                raise RuntimeError(f"Can't convert result type {_name(r.dtype)} to output "
                                   f"{_name(a.dtype)} in add operation")
            r = make(r._i, r._v.to(a.dtype), r.shape, r._coalesced)
        a._i, a._v, a._coalesced = r._i, r._v, r._coalesced
        return a

    return add_


OPS[aten.add_.Tensor] = _add_or_sub_(1)
OPS[aten.sub_.Tensor] = _add_or_sub_(-1)


# The other families register their ops in OPS as they are imported.
from . import sparse_matmul, sparse_reductions, sparse_shape  # noqa: E402, F401
