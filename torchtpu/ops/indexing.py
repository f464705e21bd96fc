"""Indexing, gathering, scattering, concatenation and data-dependent selection."""

from __future__ import annotations

import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import torch
from jax import lax

from ..runtime.execute import executable
from ..runtime.platform import platform
from .cpp_sort import std_sort
from .dtypes import (
    check_with_meta,
    highest,
    lowest,
    promote,
    result_type,
    scalar_type_name,
    upcast,
)
from .indexing_select import unique_dim_check
from .registry import lowering

aten = torch.ops.aten


_INDEX_DTYPES = (jnp.int64, jnp.int32, jnp.uint8, jnp.bool_)


def _checked_masks(self, indices):
    """CPU's checks of index tensors; uint8 ones are (deprecated) masks, as on CPU."""
    out, dim = [], 0
    for idx in indices:
        if idx is not None and idx.dtype not in _INDEX_DTYPES:
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        if idx is not None and idx.dtype == jnp.uint8:
            warnings.warn("indexing with dtype torch.uint8 is now deprecated, please use a "
                          "dtype torch.bool instead.", UserWarning, stacklevel=2)
            idx = idx.astype(jnp.bool_)
        if idx is not None and idx.dtype == jnp.bool_:
            for j, n in enumerate(idx.shape):
                if dim + j >= self.ndim or self.shape[dim + j] != n:
                    raise IndexError(
                        f"The shape of the mask {list(idx.shape)} at index {j} does not match "
                        f"the shape of the indexed tensor {list(self.shape)} at index {dim + j}")
            dim += idx.ndim
        else:
            dim += 1
        out.append(idx)
    return out


def _expand_bool(indices):
    """Checked indices (_checked_masks) with bool masks as integer index arrays (a host sync,
    as in PyTorch)."""
    out = []
    for idx in indices:
        if idx is not None and idx.dtype == jnp.bool_:
            out.extend(jnp.asarray(i) for i in np.nonzero(np.asarray(idx)))
        else:
            out.append(idx)
    shapes = [i.shape for i in out if i is not None]
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        raise IndexError("shape mismatch: indexing tensors could not be broadcast together "
                         f"with shapes {', '.join(str(list(s)) for s in shapes)}") from None
    return out


def _key(indices):
    return tuple(slice(None) if i is None else i for i in indices)


@executable()
def _index_jit(self, indices):
    return self[_key(indices)]


@lowering(aten.index.Tensor, eager=True, records=True)
def _index(self, indices):
    indices = _expand_bool(_checked_masks(self, indices))
    _check_count(self, indices)
    return _index_jit(self, indices)


def _check_count(self, indices):
    if len(indices) > max(self.ndim, 1):
        raise IndexError(
            f"too many indices for tensor of dimension {self.ndim} (got {len(indices)})"
        )
    # every index into an empty dimension is out of bounds: known from shapes (in fused eager
    # and compile too, which check no index values)
    if any(i is not None and i.size and self.shape[d] == 0 for d, i in enumerate(indices)):
        raise IndexError("index is out of bounds for dimension with size 0")


def summed_apart(scattered):
    """A scatter-add's result, kept as computed. XLA folds ``zeros.at[i].add(u) + y`` into
    ``y.at[i].add(u)``: another summation order where indices repeat, so a gradient scattered
    into zeros (embedding, gather, indexing backwards) and then accumulated would differ,
    fused or compiled, from strict eager and CPU. A barrier keeps the two sums apart."""
    return lax.optimization_barrier(scattered)


@executable(static_argnums=(3,))
def _index_put_jit(self, indices, values, accumulate):
    ref = self.at[_key(indices)]
    values = values.astype(self.dtype)
    if not accumulate:
        return ref.set(values)
    if self.dtype == jnp.bool_:  # logical or
        return ref.max(values)
    return summed_apart(ref.add(values))


@executable()
def _masked_set_jit(self, mask, values):
    mask = mask.reshape(mask.shape + (1,) * (self.ndim - mask.ndim))
    return jnp.where(mask, values.astype(self.dtype), self)


@lowering(aten.index_put, aten._unsafe_index_put, aten._index_put_impl, eager=True, records=True)
def _index_put(self, indices, values, accumulate=False, unsafe=False):
    indices = _checked_masks(self, indices)
    if (not accumulate and values.ndim == 0 and len(indices) == 1
            and indices[0] is not None and indices[0].dtype == jnp.bool_):
        return _masked_set_jit(self, indices[0], values)  # x[mask] = scalar: no host sync
    indices = _expand_bool(indices)  # checked above
    _check_count(self, indices)
    if values.dtype != self.dtype:  # CPU's check (x[i] = a 0-d tensor of another dtype too),
        try:  # after the shapes'
            jax.eval_shape(lambda s, v: s.at[_key(indices)].set(v), self,
                           jax.ShapeDtypeStruct(values.shape, self.dtype))
        except ValueError:
            raise _shape_mismatch(self, indices, values) from None
        raise RuntimeError(
            "Index put requires the source and destination dtypes match, got "
            f"{scalar_type_name(self.dtype)} for the destination and "
            f"{scalar_type_name(values.dtype)} for the source.")
    try:
        return _index_put_jit(self, indices, values, bool(accumulate))
    except ValueError:
        raise _shape_mismatch(self, indices, values) from None


def _shape_mismatch(self, indices, values) -> RuntimeError:
    result = jax.eval_shape(lambda s: s[_key(indices)], self).shape
    return RuntimeError(f"shape mismatch: value tensor of shape {list(values.shape)} cannot be "
                        f"broadcast to indexing result of shape {list(result)}")


@lowering(aten._unsafe_index)
def _unsafe_index(self, indices):
    return self[_key(indices)]


@lowering(aten.index_select)
def _index_select(self, dim, index):
    if self.ndim == 0:
        return self
    return jnp.take(self, index.reshape(-1), axis=dim % self.ndim)


@lowering(aten.gather)
def _gather(self, dim, index, *, sparse_grad=False):
    # The result has the index's shape; an empty index may have any number of dimensions.
    if index.size == 0:
        return jnp.zeros(index.shape, self.dtype)
    if self.ndim == 0:
        return jnp.broadcast_to(self, index.shape)
    if index.ndim == 0:  # PyTorch takes a 0-d index into a 1-d self as a 1-element one
        return _gather(self, dim, index.reshape(1)).reshape(())
    axis = dim % self.ndim
    # PyTorch lets the index be shorter than self along the other dimensions (not broadcast)
    self = self[tuple(slice(None) if d == axis else slice(0, n)
                      for d, n in enumerate(index.shape))]
    return jnp.take_along_axis(self, index, axis=axis, mode="clip")


def _scatter_indices(self, dim, index):
    dim = dim % max(self.ndim, 1)
    grids = jnp.meshgrid(*[jnp.arange(n) for n in index.shape], indexing="ij")
    grids[dim] = index
    return tuple(grids)


def _added(self, key, src):
    """``self.at[key].add(src)`` as CPU's kernels add bfloat16/float16: every term summed in
    float32 and the total rounded once, not rounded after each addition."""
    return summed_apart(upcast(self).at[key].add(upcast(src))).astype(self.dtype)


def _scatter_reduce_apply(self, idx, src, reduce):
    ref = self.at[idx]
    if self.dtype == jnp.bool_:  # PyTorch's bool sum is a logical or, its product an and
        reduce = {"sum": "amax", "add": "amax", "prod": "amin", "multiply": "amin"}.get(
            reduce, reduce)
    if reduce in ("sum", "add"):
        return _added(self, idx, src)
    if reduce in ("prod", "multiply"):
        return ref.multiply(src)
    if reduce == "amax":
        return ref.max(src)
    if reduce == "amin":
        return ref.min(src)
    return ref.set(src)


@lowering(aten.scatter.src, aten.scatter.value, aten.scatter.reduce,
          aten.scatter.value_reduce, static=("reduce",))
def _scatter(self, dim, index, src=None, value=None, *, reduce=None):
    if index.size == 0:  # nothing written; an empty index may have any number of dimensions
        return self
    if self.ndim == 0:  # PyTorch indexes a 0-d tensor as a 1-element vector
        src = src.reshape(-1) if hasattr(src, "ndim") and src.ndim else src
        return _scatter(self.reshape(1), 0, index.reshape(-1), src, value,
                        reduce=reduce).reshape(())
    if index.ndim == 0:  # and a 0-d index into a 1-d self as a 1-element one
        src = src.reshape(-1)[:1] if hasattr(src, "ndim") and src.ndim else src
        return _scatter(self, dim, index.reshape(1), src, value, reduce=reduce)
    idx = _scatter_indices(self, dim, index)
    if not hasattr(src, "shape") or src.ndim == 0:
        src = jnp.full(index.shape, src, self.dtype)
    else:
        src = src[tuple(slice(0, n) for n in index.shape)].astype(self.dtype)
    return _scatter_reduce_apply(self, idx, src, reduce)


@lowering(aten.scatter_add)
def _scatter_add(self, dim, index, src):
    return _scatter(self, dim, index, src, reduce="add")


def _identity(reduce, dtype):
    """The identity of a reduction in ``dtype``: what an untouched-by-self slot starts from."""
    if reduce in ("sum", "prod"):
        return jnp.asarray(0 if reduce == "sum" else 1).astype(dtype)
    return highest(dtype) if reduce == "amin" else lowest(dtype)


@lowering(aten.scatter_reduce.two, static=("reduce", "include_self"))
def _scatter_reduce(self, dim, index, src, reduce, *, include_self=True):
    reduce = {"max": "amax", "min": "amin"}.get(reduce, reduce)  # (CPU's aliases)
    if self.ndim == 0:  # PyTorch indexes a 0-d tensor as a 1-element vector
        one = _scatter_reduce(self.reshape(1), 0, index.reshape(-1), src.reshape(-1), reduce,
                              include_self=include_self)
        return one.reshape(())
    idx = _scatter_indices(self, dim, index)
    src = src[tuple(slice(0, n) for n in index.shape)].astype(self.dtype)
    if reduce == "mean":
        counts = jnp.zeros(self.shape, self.dtype).at[idx].add(1)
        total = _added(self if include_self else jnp.zeros_like(self), idx, src)
        counts = counts + (1 if include_self else 0)
        if jnp.issubdtype(self.dtype, jnp.inexact):
            mean = total / jnp.maximum(counts, 1)
        else:  # PyTorch divides integer sums with floor rounding
            mean = jnp.floor_divide(total, jnp.maximum(counts, 1))
        return jnp.where(counts > 0, mean, self).astype(self.dtype)
    base = self
    if not include_self:
        touched = jnp.zeros(self.shape, bool).at[idx].set(True)
        base = jnp.where(touched, _identity(reduce, self.dtype), self)
    return _scatter_reduce_apply(base, idx, src, reduce)


def _as_vector(rule):
    """A 0-d ``self`` is indexed as a 1-element vector, as PyTorch does."""

    def run(self, dim, index, source, **kwargs):
        if self.ndim:
            return rule(self, dim, index, source, **kwargs)
        src = jnp.reshape(source, (-1,)) if hasattr(source, "ndim") and source.ndim else source
        return rule(self.reshape(1), 0, index.reshape(-1), src, **kwargs).reshape(())

    run.__name__ = rule.__name__
    return run


@lowering(aten.index_add)
def _index_add(self, dim, index, source, *, alpha=1):
    # CPU's check, which the meta kernel lacks: the slices beside `dim` must agree.
    d = dim % max(self.ndim, 1)
    if source.dtype != self.dtype:
        raise RuntimeError(f"index_add_(): self ({scalar_type_name(self.dtype)}) and source "
                           f"({scalar_type_name(source.dtype)}) must have the same scalar type")
    self_rest = [n for i, n in enumerate(self.shape) if i != d]
    source_rest = [n for i, n in enumerate(source.shape) if i != d]
    if self_rest != source_rest:
        raise RuntimeError(
            "source tensor shape must match self tensor shape, excluding the specified "
            f"dimension. Got self.shape = {list(self.shape)} source.shape = "
            f"{list(source.shape)}")
    return _index_add_vector(self, dim, index, source, alpha=alpha)


@_as_vector
def _index_add_vector(self, dim, index, source, *, alpha=1):
    dim = dim % max(self.ndim, 1)
    key = (slice(None),) * dim + (index,)
    if self.dtype == jnp.bool_:  # bool addition is a logical or
        return self.at[key].max(jnp.logical_and(source, alpha))
    return _added(self, key, (upcast(source) * alpha).astype(upcast(self).dtype))


@lowering(aten.index_copy)
@_as_vector
def _index_copy(self, dim, index, source):
    if source.dtype != self.dtype:
        raise RuntimeError("index_copy_(): self and source expected to have the same dtype, "
                           f"but got (self) {scalar_type_name(self.dtype)} and (source) "
                           f"{scalar_type_name(source.dtype)}")
    dim = dim % max(self.ndim, 1)
    index = index.reshape(-1)  # a 0-d index (and its 0-d source) is one of one, as on CPU
    source = source.reshape(self.shape[:dim] + index.shape + self.shape[dim + 1:])
    return self.at[(slice(None),) * dim + (index,)].set(source.astype(self.dtype))


@lowering(aten.index_fill.int_Scalar, aten.index_fill.int_Tensor)
@_as_vector
def _index_fill(self, dim, index, value):
    dim = dim % max(self.ndim, 1)
    return self.at[(slice(None),) * dim + (index,)].set(jnp.asarray(value, self.dtype))


@lowering(aten.put)
def _put(self, index, source, accumulate=False):
    flat = self.reshape(-1)
    ref = flat.at[_flat_positions(index.reshape(-1), flat.size)]
    src = source.reshape(-1).astype(self.dtype)
    if not accumulate:
        return ref.set(src).reshape(self.shape)
    # Accumulating into bool is a logical or, as True + True is True.
    return (ref.max(src) if self.dtype == jnp.bool_ else ref.add(src)).reshape(self.shape)


@lowering(aten.take)
def _take(self, index):
    # (one program; the decomposition's flattened[index] was a view for a 0-d index until
    # dispatch copied such results: _in_memory_of_its_own)
    flat = self.reshape(-1)
    return flat[_flat_positions(index, flat.size)]


def _flat_positions(index, size: int):
    """put's and take's positions into the flattened tensor: negative ones count from its
    end."""
    return jnp.where(index < 0, index + size, index)


@lowering(aten.cat, skip_meta=True)
def _cat(tensors, dim=0):
    # The meta kernel fails on a 0-d tensor with an IndexError; CPU raises this first.
    for i, t in enumerate(tensors):
        if t.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be "
                               "concatenated")
    check_with_meta(aten.cat.default, list(tensors), dim)
    dtype = result_type(*tensors)
    # PyTorch skips legacy empty 1-D tensors in cat.
    kept = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)] or list(tensors[:1])
    nd = kept[0].ndim
    return jnp.concatenate([t.astype(dtype) for t in kept], axis=dim % max(nd, 1))


@lowering(aten.narrow_copy, skip_meta=True)
def _narrow_copy(self, dim, start, length):
    # CPU's checks in CPU's order (the meta kernel raises IndexError for the first).
    if self.ndim == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    if dim >= self.ndim:
        raise RuntimeError("Expected dim < static_cast<int64_t>(self_sizes.size()) to be true, "
                           "but got false.")
    if dim < -self.ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-self.ndim}, "
                         f"{self.ndim - 1}], but got {dim})")
    dim %= self.ndim
    size = self.shape[dim]
    if not -size <= start <= size:
        raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], "
                         f"but got {start})")
    start = start % size if start < 0 else start
    if length < 0 or start + length > size:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size "
                           f"({size}).")
    return lax.slice_in_dim(self, start, start + length, axis=dim)


@lowering(aten.stack)
def _stack(tensors, dim=0):
    dtype = result_type(*tensors)
    return jnp.stack([t.astype(dtype) for t in tensors], axis=dim % (tensors[0].ndim + 1))


@lowering(aten.flip)
def _flip(self, dims):
    return jnp.flip(self, [d % self.ndim for d in dims]) if self.ndim else self


def _check_roll(shape, shifts, dims) -> None:
    """ATen's roll checks in its order (the meta kernel wraps the dims before it compares the
    counts, and words that otherwise); an empty tensor's dims are not looked at."""
    if len(shifts) != 1 or len(dims) != 1:
        if not shifts:
            raise RuntimeError("`shifts` required")
        if len(shifts) != len(dims) and not (not dims and len(shifts) == 1):
            raise RuntimeError("shifts and dimensions must align. "
                               f"shifts: {len(shifts)}, dims:{len(dims)}")
    if math.prod(shape) == 0:
        return
    for d in dims:
        if not shape:
            raise IndexError(f"Dimension specified as {d} but tensor has no dimensions")
        if not -len(shape) <= d < len(shape):
            raise IndexError("Dimension out of range (expected to be in range of "
                             f"[{-len(shape)}, {len(shape) - 1}], but got {d})")


@lowering(aten.roll, skip_meta=True)
def _roll(self, shifts, dims=()):
    _check_roll(self.shape, shifts, dims)
    if not self.size:
        return self
    if not dims:
        return jnp.roll(self.reshape(-1), shifts[0]).reshape(self.shape)
    return jnp.roll(self, shifts, [d % self.ndim for d in dims])


@lowering(aten.repeat)
def _repeat(self, repeats):
    x = self.reshape((1,) * (len(repeats) - self.ndim) + self.shape)
    return jnp.tile(x, repeats)


@lowering(aten.constant_pad_nd)
def _constant_pad_nd(self, pad, value=0):
    cfg = [(0, 0, 0)] * self.ndim
    for i in range(len(pad) // 2):
        d = self.ndim - 1 - i
        cfg[d] = (pad[2 * i], pad[2 * i + 1], 0)
    return lax.pad(self, jnp.asarray(value, self.dtype), cfg)


def _strided_write(self, src, dim: int, start, step: int):
    """``self`` with ``src`` written at ``start`` of ``dim`` every ``step``, as a view's write
    (scatter_view): XLA:CPU's dynamic-update-slice of such a region could run in place while
    its fusion still read ``self`` (a compiled x[::2][1:2].copy_(flipped), openxla/xla#49176)."""
    from .views import scatter_view

    strides = [math.prod(self.shape[d + 1:]) for d in range(self.ndim)]
    layout = (tuple(src.shape), tuple(s * step if d == dim else s for d, s in enumerate(strides)))
    return scatter_view.jitted(self, src, start * strides[dim], layout)


@lowering(aten.select_scatter)
def _select_scatter(self, src, dim, index):
    dim = dim % self.ndim
    if platform() == "cpu" and self.size:
        index = jnp.where(index < 0, index + self.shape[dim], index)
        return _strided_write(self, jnp.expand_dims(src.astype(self.dtype), dim), dim, index, 1)
    return self.at[(slice(None),) * dim + (index,)].set(src.astype(self.dtype))


@lowering(aten.slice_scatter)
def _slice_scatter(self, src, dim=0, start=None, end=None, step=1):
    dim = dim % self.ndim
    src = src.astype(self.dtype)
    traced = isinstance(start, jax.Array)  # (torch.compile: ``cache[:, pos:pos + 1] = x``)
    if traced:
        start = jnp.where(start < 0, start + self.shape[dim], start)
    if platform() == "cpu" and src.size:
        if not traced:
            start = slice(start, None, step).indices(self.shape[dim])[0]  # (end may be traced)
        return _strided_write(self, src, dim, start, step)
    if traced:
        if step == 1:
            return lax.dynamic_update_slice_in_dim(self, src, start, dim)
        rows = start + step * jnp.arange(src.shape[dim])
        return self.at[(slice(None),) * dim + (rows,)].set(src)
    return self.at[(slice(None),) * dim + (slice(start, end, step),)].set(src)


@lowering(aten.select_backward)
def _select_backward(grad_output, input_sizes, dim, index):
    zeros = jnp.zeros(tuple(input_sizes), grad_output.dtype)
    return _select_scatter(zeros, grad_output, dim, index)


@lowering(aten.slice_backward)
def _slice_backward(grad_output, input_sizes, dim, start, end, step):
    zeros = jnp.zeros(tuple(input_sizes), grad_output.dtype)
    return _slice_scatter(zeros, grad_output, dim, start, end, step)


@lowering(aten.diagonal_scatter)
def _diagonal_scatter(self, src, offset=0, dim1=0, dim2=1):
    d1, d2 = dim1 % self.ndim, dim2 % self.ndim
    n = src.shape[-1]
    rows = jnp.arange(n) + max(-offset, 0)
    cols = jnp.arange(n) + max(offset, 0)
    moved = jnp.moveaxis(self, (d1, d2), (-2, -1))
    moved = moved.at[..., rows, cols].set(src.astype(self.dtype))
    return jnp.moveaxis(moved, (-2, -1), (d1, d2))


@lowering(aten.as_strided_scatter)
def _as_strided_scatter(self, src, size, stride, storage_offset=None):
    from .views import scatter_view

    # CPU's setStorage check: the strided window must lie within the input's storage.
    offset = storage_offset or 0
    itemsize = np.dtype(self.dtype).itemsize
    span = sum((n - 1) * s for n, s in zip(size, stride, strict=True))
    needed = 0 if 0 in size else offset + 1 + span
    if needed > self.size:
        raise RuntimeError(
            f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {offset}, "
            f"and itemsize {itemsize} requiring a storage size of {needed * itemsize} are out "
            f"of bounds for storage of size {self.size * itemsize}")

    return scatter_view.jitted(self, src.astype(self.dtype), offset, (tuple(size), tuple(stride)))


@lowering(aten.masked_scatter)
def _masked_scatter(self, mask, source):
    if mask.dtype != jnp.bool_:
        raise RuntimeError("masked_scatter_ only supports boolean masks, but got mask with "
                           f"dtype {scalar_type_name(mask.dtype)}")
    shape = jnp.broadcast_shapes(self.shape, mask.shape)  # self broadcasts too, as in PyTorch
    if source.size == 0:  # nothing to take (a gradient of an empty selection)
        return jnp.broadcast_to(self, shape)
    mask = jnp.broadcast_to(mask, shape).reshape(-1)
    pos = jnp.cumsum(mask) - 1
    taken = source.reshape(-1)[jnp.clip(pos, 0, max(source.size - 1, 0))]
    flat = jnp.broadcast_to(self, shape).reshape(-1)
    return jnp.where(mask, taken.astype(self.dtype), flat).reshape(shape)


# Data-dependent output shapes: these synchronise with the host, as they do in PyTorch.


@lowering(aten.nonzero, eager=True)
def _nonzero(self):
    host = np.asarray(self)
    if host.ndim == 0:  # a 0-d tensor has one element and no dimensions to index
        return jnp.zeros((int(host != 0), 0), jnp.int64)
    return jnp.asarray(np.stack(np.nonzero(host), axis=1).astype(np.int64).reshape(-1, host.ndim))


@lowering(aten.masked_select, eager=True)
def _masked_select(self, mask):
    a, m = jnp.broadcast_arrays(self, mask)
    return a[np.asarray(m)]


def _host_sortable(x):
    """x on the host, in a dtype numpy sorts: it sorts ml_dtypes' bfloat16 and float8 by a
    comparison NaN breaks (unique left duplicates, unsorted). They widen to float32 exactly."""
    host = np.asarray(x)
    return host.astype(np.float32) if host.dtype.kind == "V" else host


@lowering(aten._unique2, eager=True)
def _unique2(self, sorted=True, return_inverse=False, return_counts=False):  # noqa: A002
    # Each NaN is its own value, as on CPU (numpy would merge them).
    vals, inv, counts = np.unique(_host_sortable(self), return_inverse=True,
                                  return_counts=True, equal_nan=False)
    inverse = inv.reshape(self.shape) if return_inverse else np.zeros((0,), np.int64)
    counts = counts if return_counts else np.zeros((0,), np.int64)
    return (jnp.asarray(vals, self.dtype), jnp.asarray(inverse.astype(np.int64)),
            jnp.asarray(counts.astype(np.int64)))


@lowering(aten._unique, eager=True)
def _unique(self, sorted=True, return_inverse=False):  # noqa: A002
    return _unique2(self, sorted, return_inverse)[:2]


@lowering(aten.unique_dim, eager=True)
def _unique_dim(self, dim, sorted=True, return_inverse=False, return_counts=False):  # noqa: A002
    dim = unique_dim_check(self.shape, dim)
    host = _host_sortable(self)
    if host.dtype.kind == "f" and np.isnan(host).any():
        vals, inv, counts = _unique_rows_with_nans(host, dim)
    else:
        vals, inv, counts = np.unique(host, axis=dim, return_inverse=True, return_counts=True)
    return (jnp.asarray(vals, self.dtype), jnp.asarray(inv.reshape(-1).astype(np.int64)),
            jnp.asarray(counts.astype(np.int64)))


def _unique_rows_with_nans(host: np.ndarray, dim: int):
    """CPU's unique(dim=): std::sort of the slices by a lexicographic ``<`` (NaN is neither
    less nor greater, so the order is libstdc++'s algorithm's), then runs of equal slices
    merged (a slice with a NaN equals none)."""
    rows = np.moveaxis(host, dim, 0).reshape(host.shape[dim], -1)

    def less(a: int, b: int) -> bool:
        lt, gt = rows[a] < rows[b], rows[a] > rows[b]
        decided = np.flatnonzero(lt | gt)
        return bool(decided.size) and bool(lt[decided[0]])

    order = np.asarray(std_sort(list(range(rows.shape[0])), less), dtype=np.int64)
    ordered = rows[order]
    new_run = np.ones(len(order), bool)
    new_run[1:] = ~np.all(ordered[1:] == ordered[:-1], axis=1)
    group = np.cumsum(new_run) - 1
    inverse = np.empty_like(order)
    inverse[order] = group
    return np.take(host, order[new_run], axis=dim), inverse, np.bincount(group)


@lowering(aten.repeat_interleave.Tensor, eager=True)
def _repeat_interleave(repeats, *, output_size=None):
    reps = np.asarray(repeats)
    if reps.ndim != 1:
        raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
    if (reps < 0).any():
        raise RuntimeError("repeats can not be negative")
    # the positions take the repeats' dtype (int32 or int64; CPU refuses the others)
    return jnp.asarray(np.repeat(np.arange(reps.shape[0]), reps).astype(reps.dtype))


@lowering(aten.bincount, eager=True)
def _bincount(self, weights=None, minlength=0):
    host = np.asarray(self)
    w = None if weights is None else np.asarray(weights)
    # CPU's checks, before numpy's (which raise ValueError)
    if host.dtype.kind not in "iu":
        raise NotImplementedError(
            f'"bincount_cpu" not implemented for \'{scalar_type_name(host.dtype)}\'')
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if host.ndim != 1 or (host.size and host.min() < 0):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if w is not None and (w.ndim != 1 or w.shape[0] != host.shape[0]):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    out = np.bincount(host, w, minlength)
    if w is None:
        return jnp.asarray(out.astype(np.int64))
    return jnp.asarray(out.astype(np.float32 if w.dtype == np.float32 else np.float64))


@lowering(aten.searchsorted.Tensor, aten.searchsorted.Scalar)
def _searchsorted(sorted_sequence, self, *, out_int32=False, right=False, side=None,
                  sorter=None):
    side = side or ("right" if right else "left")
    if sorter is not None:
        sorted_sequence = jnp.take_along_axis(sorted_sequence, sorter, axis=-1)
    a, v = promote(sorted_sequence, self)
    if a.ndim == 1:
        out = _cpu_binary_search(a, v, side == "right")
    else:
        n = math.prod(a.shape[:-1])  # explicit: reshape(-1, 0) cannot infer it
        out = jax.vmap(lambda s, x: _cpu_binary_search(s, x, side == "right"))(
            a.reshape(n, a.shape[-1]), v.reshape(n, v.shape[-1])).reshape(v.shape)
    return out.astype(jnp.int32 if out_int32 else jnp.int64)


def _cpu_binary_search(a, v, right: bool):
    """CPU's binary search over 1-d ``a`` for each of ``v``: it steps right while
    ``not a[mid] > v`` (right) or ``not a[mid] >= v`` (left), so a NaN, sought or met,
    compares as CPU's does (a sought NaN lands at the end)."""
    n = a.shape[0]
    lo = jnp.zeros(v.shape, jnp.int64)
    hi = jnp.full(v.shape, n, jnp.int64)
    for _ in range(n.bit_length()):
        mid = (lo + hi) // 2
        at = a[jnp.clip(mid, 0, n - 1)]
        step = ~(at > v) if right else ~(at >= v)
        active = lo < hi
        lo = jnp.where(active & step, mid + 1, lo)
        hi = jnp.where(active & ~step, mid, hi)
    return lo
