"""CPU's argument checks for index_add/index_reduce/index_copy/index_fill/take/put.

PyTorch's meta kernels for these are Python references that check less than CPU's kernels
(an int32 index for index_copy, take or put; a reduce of "sum" for index_reduce) or word the
check otherwise; each function here makes CPU's checks in CPU's order, on shapes and dtypes.
"""

from __future__ import annotations

import math

import torch

from ..ops.dtypes import scalar_type_name, to_torch_dtype

aten = torch.ops.aten


# The arguments are jax arrays for ops with a lowering rule, tensors for decomposed ones.
def _is(x, *dtypes: torch.dtype) -> bool:
    return to_torch_dtype(x.dtype) in dtypes


def _numel(x) -> int:
    return math.prod(x.shape)


def _index_func(name: str):
    """index_func_meta_impl (index_add, index_reduce): the index, the dtypes, the counts."""

    def check(self, dim, index, source, *_) -> Exception | str | None:
        if index.ndim > 1:
            return IndexError(
                f"{name}_(): Index is supposed to be a vector, but got dim: {index.ndim} with "
                f"type: {scalar_type_name(index.dtype)} and size: {list(index.shape)}")
        if not (_is(index, torch.int64, torch.int32)):
            return (f"{name}_(): Expected dtype int32/int64 for index but got: "
                    f"{scalar_type_name(index.dtype)}")
        if to_torch_dtype(self.dtype) != to_torch_dtype(source.dtype):
            return (f"{name}_(): self ({scalar_type_name(self.dtype)}) and source "
                    f"({scalar_type_name(source.dtype)}) must have the same scalar type")
        dim = dim % max(self.ndim, 1)
        if dim != 0 and dim >= source.ndim:
            return (f"{name}_(): Indexing dim {dim} is out of bounds of the source tensor with "
                    f"dim {source.ndim}")
        count = source.shape[dim] if source.ndim else 1
        if _numel(index) != count:
            return (f"{name}_(): Number of indices ({_numel(index)}) should be equal to "
                    f"source.size(dim): ({count}), for dim: {dim}")
        return None

    return check


def _index_reduce(self, dim, index, source, reduce, *rest,
                  include_self=True) -> Exception | str | None:
    if reduce not in ("prod", "mean", "amax", "amin"):
        return (f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got "
                f"{reduce}.")
    if found := _index_func("index_reduce")(self, dim, index, source):
        return found
    if not _is(self, torch.bool):
        return None
    # CPU's kernels for a bool self: the one starting from the identity and the one for a
    # vector take none; a larger self is reduced slice by slice, which takes all but a mean
    if not include_self:
        kernel = "index_reduce_func_exclude_input_init"
    elif self.ndim <= 1:
        kernel = "index_func_"
    elif reduce == "mean" and _numel(index):
        kernel = "div_floor_cpu"
    else:
        return None
    return NotImplementedError(f'"{kernel}" not implemented for \'Bool\'')


def _index_copy(self, dim, index, source) -> Exception | str | None:
    if index.ndim > 1:
        return IndexError(f"index_copy_(): Index should have dimension 1 or 0 (got {index.ndim})")
    if source.ndim == 0 and _numel(index) != 1:
        return IndexError("index_copy_(): When source is scalar, index should have one element "
                          f"(got {_numel(index)})")
    if source.ndim != self.ndim and source.ndim and self.ndim:
        return IndexError(
            "index_copy_(): When source and destination are not scalars, their dimensionality "
            f"must match. Source dimensionality ({source.ndim}), destination dimensionality "
            f"({self.ndim})")
    if not _is(index, torch.int64):
        return ("index_copy_(): Expected a long tensor for index, but got "
                f"{scalar_type_name(index.dtype)}")
    if to_torch_dtype(self.dtype) != to_torch_dtype(source.dtype):
        return ("index_copy_(): self and source expected to have the same dtype, but got (self) "
                f"{scalar_type_name(self.dtype)} and (source) {scalar_type_name(source.dtype)}")
    dim = dim % max(self.ndim, 1)
    dest = [n for i, n in enumerate(self.shape) if i != dim]
    src = [n for i, n in enumerate(source.shape) if i != dim]
    if dest != src:  # c10 prints the sizes space-separated
        return ("index_copy_(): Source/destination tensor must have same slice shapes. "
                f"Destination slice shape: {' '.join(map(str, dest))} at dimension {dim} and "
                f"source slice shape: {' '.join(map(str, src))} at dimension 0.")
    if source.ndim and _numel(index) != source.shape[dim]:
        return IndexError(f"index_copy_(): Number of indices ({_numel(index)}) should be equal to "
                          f"source.size(dim) ({source.shape[dim]})")
    return None


def _index_fill(self, dim, index, value) -> Exception | str | None:
    if getattr(value, "ndim", 0):
        return ("index_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                f"{value.ndim} dimension(s).")
    if not _is(index, torch.int64):
        return IndexError("index_fill_(): Expected dtype int64 for index.")
    if index.ndim > 1:
        return "Index has to be a vector/scalar"
    return None


def _take(self, index) -> str | None:
    if not _is(index, torch.int64):
        return f"take(): Expected a long tensor for index, but got {scalar_type_name(index.dtype)}"
    return None


def _put(self, index, source, accumulate=False) -> Exception | str | None:
    if not _is(index, torch.int64):
        return f"put_(): Expected a long tensor for index, but got {scalar_type_name(index.dtype)}"
    if to_torch_dtype(self.dtype) != to_torch_dtype(source.dtype):
        return ("put_(): self and source expected to have the same dtype, but got self.dtype = "
                f"{scalar_type_name(self.dtype)} and source.dtype = "
                f"{scalar_type_name(source.dtype)}")
    if (n := _numel(source)) != (k := _numel(index)):
        return IndexError("put_(): Expected source and index to have the same number of elements, "
                          f"but got source.numel() = {n}, index.numel() = {k}")
    return None


CHECKS = {
    aten.index_add.default: _index_func("index_add"),
    aten.index_reduce.default: _index_reduce,
    aten.index_copy.default: _index_copy,
    aten.index_fill.int_Scalar: _index_fill,
    aten.index_fill.int_Tensor: _index_fill,
    aten.take.default: _take,
    aten.put.default: _put,
}
