"""View ops, and the strided gather/scatter that keeps views aliased to their base.

A view's geometry is PyTorch's (size, stride, storage offset) into its base's storage, which
we hold as the base's contiguous value. Reading a stale view gathers through that geometry;
writing through a view scatters back into the base.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..runtime.execute import Executable, executable
from ..runtime.platform import platform
from .registry import lowering

aten = __import__("torch").ops.aten


def _flat_index(size, stride, offset):
    idx = jnp.full(size, 0, dtype=jnp.int64) + offset
    for d, (n, s) in enumerate(zip(size, stride, strict=False)):
        if n > 1 and s:
            idx = idx + lax.broadcasted_iota(jnp.int64, size, d) * s
    return idx


def dense_order(size, stride):
    """If the geometry tiles one run of memory exactly (contiguous, transposed, channels_last:
    any permuted dense layout), its dimensions of size > 1 from outermost to innermost; else
    None. Such a view is read and written with a slice and a transpose, not a gather."""
    dims = sorted((d for d in range(len(size)) if size[d] != 1), key=lambda d: -stride[d])
    expected = 1
    for d in reversed(dims):
        if stride[d] != expected:
            return None
        expected *= size[d]
    return dims


@executable(static_argnums=(2,))
def gather_view(base: jax.Array, offset, layout) -> jax.Array:
    """The elements of ``base``'s storage that a view with this layout (size, stride) at this
    offset sees. The offset is traced: a loop over ``x[i]`` compiles one program."""
    size, stride = layout
    flat = base.reshape(-1)
    order = dense_order(size, stride)
    if order is None:
        return flat[_flat_index(size, stride, offset)]
    run = lax.dynamic_slice(flat, (offset,), (math.prod(size),))
    in_memory = run.reshape([size[d] for d in order])
    return jnp.transpose(in_memory, np.argsort(order)).reshape(size)


@executable(static_argnums=(3,))
def scatter_view(base: jax.Array, value: jax.Array, offset, layout) -> jax.Array:
    """``base`` with the elements a view of this layout at this offset sees replaced by
    ``value``."""
    size, stride = layout
    flat = base.reshape(-1)
    order = dense_order(size, stride)
    if order is None:
        index, value = _flat_index(size, stride, offset).reshape(-1), value.reshape(-1)
        if overlaps(tuple(size), tuple(stride)):
            flat = _write_changed(flat, index, value)
        else:
            flat = flat.at[index].set(value)
    else:
        logical = sorted(order)
        v = value.reshape([size[d] for d in logical])
        run = jnp.transpose(v, [logical.index(d) for d in order]).reshape(-1)
        if platform() == "cpu":
            # XLA:CPU can emit a dynamic-update-slice of a reshaped base in place while the
            # same fusion still reads the base (x[1] = x[1].flip(0), then more ops: fused
            # eager's program wrote a mix of old and new elements; openxla/xla#49176). Its
            # scatter reads the update first.
            flat = flat.at[offset + jnp.arange(run.size)].set(
                run, indices_are_sorted=True, unique_indices=True)
        else:
            flat = lax.dynamic_update_slice(flat, run, (offset,))
    return flat.reshape(base.shape)


@functools.lru_cache(maxsize=1024)
def overlaps(size: tuple, stride: tuple) -> bool:
    """Whether two indices of this geometry reach the same element (expand, unfold)."""
    dims = sorted((d for d in range(len(size)) if size[d] > 1), key=lambda d: stride[d])
    reach = 0  # the farthest element the smaller-strided dimensions reach
    for d in dims:
        if stride[d] <= reach:
            break
        reach += (size[d] - 1) * stride[d]
    else:
        return False
    n = math.prod(size)  # strides that interleave without sharing: count the elements
    if n > 1 << 22:
        return True
    index = sum(np.arange(size[d]).reshape([-1 if e == d else 1 for e in range(len(size))])
                * stride[d] for d in dims)
    return np.unique(np.broadcast_to(index, size)).size < n


def _write_changed(flat: jax.Array, index: jax.Array, value: jax.Array) -> jax.Array:
    # CPU's kernels write only the elements an op writes: index_fill_ of an expanded view
    # fills its base where the rest of the view, unchanged, would write the old values back.
    # Of several changed elements sharing one place, the last in the view's order lands.
    changed = ~_same_bits(value, flat[index])
    position = jnp.arange(index.size, dtype=index.dtype)
    last = jnp.full(flat.shape, -1, index.dtype).at[index].max(jnp.where(changed, position, -1))
    keep = changed & (last[index] == position)
    return flat.at[jnp.where(keep, index, flat.size)].set(value, mode="drop")


def _same_bits(a: jax.Array, b: jax.Array) -> jax.Array:
    """Elementwise: the same value, bit for bit (NaN is NaN, -0.0 is not 0.0)."""
    if jnp.iscomplexobj(a):
        return _same_bits(a.real, b.real) & _same_bits(a.imag, b.imag)
    if jnp.issubdtype(a.dtype, jnp.floating):
        unsigned = jnp.dtype(f"uint{8 * a.dtype.itemsize}")
        return lax.bitcast_convert_type(a, unsigned) == lax.bitcast_convert_type(b, unsigned)
    return a == b


def reinterpret(flat: jax.Array, dtype) -> jax.Array:
    """A 1-D array's bytes (little-endian, as PyTorch's CPU storage) read as a 1-D array of
    ``dtype``.

    Only same-width bitcasts: XLA's simplifier merges a chain of width-changing bitcasts into
    one invalid instruction (f32 -> u8[n,4] -> f32 -> f16 fails the HLO verifier), so widths
    change through unsigned integers and shifts.
    """
    src, dst = flat.dtype, jnp.dtype(dtype)
    if src == dst:
        return flat
    if src.kind == "c":  # a complex number's bytes are its real part's, then its imaginary's
        return reinterpret(jnp.stack([flat.real, flat.imag], axis=-1).reshape(-1), dst)
    if dst.kind == "c":
        parts = reinterpret(flat, jnp.finfo(dst).dtype).reshape(-1, 2)
        return lax.complex(parts[:, 0], parts[:, 1])
    if src == jnp.bool_:
        return reinterpret(flat.astype(jnp.uint8), dst)
    if dst == jnp.bool_:
        return reinterpret(flat, jnp.uint8) != 0
    if src.itemsize == dst.itemsize:
        return lax.bitcast_convert_type(flat, dst)
    wide, narrow = (src, dst) if src.itemsize > dst.itemsize else (dst, src)
    k = wide.itemsize // narrow.itemsize
    uwide, unarrow = jnp.dtype(f"uint{8 * wide.itemsize}"), jnp.dtype(f"uint{8 * narrow.itemsize}")
    shifts = jnp.arange(k, dtype=uwide) * (8 * narrow.itemsize)  # least significant first
    if src is wide:
        bits = lax.bitcast_convert_type(flat, uwide)
        return reinterpret((bits[:, None] >> shifts).astype(unarrow).reshape(-1), dst)
    pieces = lax.bitcast_convert_type(flat, unarrow).reshape(-1, k).astype(uwide)
    return lax.bitcast_convert_type(jnp.sum(pieces << shifts, axis=1, dtype=uwide), dst)


@executable(static_argnums=(1, 3))
def gather_as(base: jax.Array, dtype, offset, layout) -> jax.Array:
    """What a view of ``dtype`` with this layout and offset sees of ``base``'s storage read as
    that dtype (x.view(torch.int32), view_as_real, view_as_complex): its geometry counts
    elements of ``dtype``, which may be wider or narrower than the storage's."""
    return gather_view.jitted(reinterpret(base.reshape(-1), dtype), offset, layout)


@executable(static_argnums=(3,))
def scatter_as(base: jax.Array, value: jax.Array, offset, layout) -> jax.Array:
    """``base`` with what a view of ``value``'s dtype sees (``gather_as``) replaced."""
    # A bool view writes bytes: read as bool, the storage's other bytes would become 0 or 1.
    unit = jnp.uint8 if value.dtype == jnp.bool_ else value.dtype
    flat = reinterpret(base.reshape(-1), unit)
    flat = scatter_view.jitted(flat, reinterpret(value.reshape(-1), unit), offset, layout)
    return reinterpret(flat, base.dtype).reshape(base.shape)


@executable(static_argnums=(1, 2))
def math_bits(value: jax.Array, conj: bool, neg: bool) -> jax.Array:
    """A conj/neg view's value from its memory, or its memory from its value (each bit undoes
    itself)."""
    value = jnp.conj(value) if conj else value
    return -value if neg else value


@executable(static_argnums=(1,))
def memory_order(value: jax.Array, dims: tuple[int, ...]) -> jax.Array:
    """``value``'s elements, flat, in the memory order of a dense layout whose dimensions
    from outermost to innermost are ``dims`` (channels_last: N, H, W, C)."""
    return jnp.transpose(value, dims).reshape(-1)


@executable(static_argnums=(1, 2))
def grow_storage(base: jax.Array, numel: int, filled: bool) -> jax.Array:
    """``base``'s elements, flat, followed by new ones up to ``numel`` (resize_ growing a
    storage): zeros, or (``filled``) what CPU fills new memory with under
    torch.use_deterministic_algorithms: NaN, an integer's largest value, True."""
    flat = base.reshape(-1)
    if not filled:
        value = 0
    elif jnp.issubdtype(flat.dtype, jnp.inexact):
        value = jnp.nan
    else:
        value = True if flat.dtype == jnp.bool_ else jnp.iinfo(flat.dtype).max
    return jnp.concatenate([flat, jnp.full(numel - flat.size, value, flat.dtype)])


def _dim(d: int, ndim: int) -> int:
    return d + max(ndim, 1) if d < 0 else d


@lowering(aten.view.default, aten._unsafe_view, aten._reshape_alias, aten.view_copy.default)
def _view(self, size, stride=None):
    size = list(size)
    if -1 in size:
        i = size.index(-1)
        known = math.prod(n for n in size if n != -1)
        size[i] = self.size // known if known else 0
    return self.reshape(size)


@lowering(aten.alias, aten.detach, aten.lift_fresh_copy)
def _alias(self):
    return self


@lowering(aten.t)
def _t(self):
    return self.T if self.ndim == 2 else self


@lowering(aten.transpose.int)
def _transpose(self, dim0, dim1):
    if self.ndim == 0:
        return self
    return jnp.swapaxes(self, _dim(dim0, self.ndim), _dim(dim1, self.ndim))


@lowering(aten.permute)
def _permute(self, dims):
    return jnp.transpose(self, [_dim(d, self.ndim) for d in dims])


@lowering(aten.expand)
def _expand(self, size, *, implicit=False):
    lead = len(size) - self.ndim
    shape = [self.shape[i - lead] if n == -1 else n for i, n in enumerate(size)]
    return jnp.broadcast_to(self, shape)


@lowering(aten.select.int, dynamic=("index",), skip_meta=True)  # (its view checked it)
def _select(self, dim, index):
    dim = _dim(dim, self.ndim)
    if isinstance(index, jax.Array):  # a traced int (torch.compile: a position in a loop)
        index = jnp.where(index < 0, index + self.shape[dim], index)
        return lax.dynamic_index_in_dim(self, index, dim, keepdims=False)
    index = index + self.shape[dim] if index < 0 else index
    return lax.index_in_dim(self, index, dim, keepdims=False)


@lowering(aten.slice.Tensor)
def _slice(self, dim=0, start=None, end=None, step=1):
    if self.ndim == 0:
        return self
    dim = _dim(dim, self.ndim)
    n = self.shape[dim]
    start, end, _ = slice(start, end, step).indices(n)
    end = max(start, end)
    return lax.slice_in_dim(self, start, end, step, dim)


def _window(x: jax.Array, start, dim: int, size: int, step: int) -> jax.Array:
    span = (size - 1) * step + 1 if size else 0
    run = lax.dynamic_slice_in_dim(x, start, span, dim)
    return lax.slice_in_dim(run, 0, span, step, dim) if step > 1 else run


# slice's value with its start traced, its size and step known (from the meta kernel):
# a loop over x[i:i + n] compiles once.
window = Executable(_window, static_argnums=(2, 3, 4), is_view=True)


@lowering(aten.unsqueeze)
def _unsqueeze(self, dim):
    return jnp.expand_dims(self, _dim(dim, self.ndim + 1))


@lowering(aten.squeeze)
def _squeeze(self, dim=None):
    if self.ndim == 0:
        return self
    if dim is None:
        dims = tuple(i for i, n in enumerate(self.shape) if n == 1)
    else:
        dims = dim if isinstance(dim, tuple) else (dim,)
        dims = tuple(d for d in (_dim(d, self.ndim) for d in dims) if self.shape[d] == 1)
    return jnp.squeeze(self, dims)


@lowering(aten.split.Tensor)
def _split(self, split_size, dim=0):
    dim = _dim(dim, self.ndim)
    n = self.shape[dim]
    sizes = [min(split_size, n - i) for i in range(0, n, split_size)] if split_size else [0]
    return _split_with_sizes(self, sizes or [0], dim)


@lowering(aten.split_with_sizes)
def _split_with_sizes(self, split_sizes, dim=0):
    dim = _dim(dim, self.ndim)
    out, start = [], 0
    for s in split_sizes:
        out.append(lax.slice_in_dim(self, start, start + s, 1, dim))
        start += s
    return out


@lowering(aten.unbind.int)
def _unbind(self, dim=0):
    dim = _dim(dim, self.ndim)
    return [lax.index_in_dim(self, i, dim, keepdims=False) for i in range(self.shape[dim])]


@lowering(aten.diagonal)
def _diagonal(self, offset=0, dim1=0, dim2=1):
    return jnp.diagonal(self, offset, _dim(dim1, self.ndim), _dim(dim2, self.ndim))


@lowering(aten.unfold)
def _unfold(self, dimension, size, step):
    if self.ndim == 0:  # a window of `size` (0 or 1) over the one element
        return self.reshape(1)[:size]
    d = _dim(dimension, self.ndim)
    count = (self.shape[d] - size) // step + 1
    idx = jnp.arange(count)[:, None] * step + jnp.arange(size)[None, :]
    taken = jnp.take(self, idx.reshape(-1), axis=d)
    shape = self.shape[:d] + (count, size) + self.shape[d + 1:]
    return jnp.moveaxis(taken.reshape(shape), d + 1, -1)


@lowering(aten.view_as_real)
def _view_as_real(self):
    return jnp.stack([jnp.real(self), jnp.imag(self)], axis=-1)


@lowering(aten.view_as_complex)
def _view_as_complex(self):
    if self.dtype == jnp.float16:
        # PyTorch pairs halves into complex32, a type XLA lacks: the error every other way
        # to a complex32 tensor gives, not lax.complex's TypeError about float16
        raise RuntimeError("torchtpu: dtype torch.complex32 is not supported on tpu")
    return lax.complex(self[..., 0], self[..., 1])


@lowering(aten.view.dtype, skip_meta=True)
def _view_dtype(self, dtype):
    from .dtypes import to_jax_dtype

    want = to_jax_dtype(dtype)
    if self.ndim == 0:
        return reinterpret(self.reshape(1), want).reshape(())
    # the last dimension scales when the sizes differ; spelled out, as -1 is ambiguous when
    # another dimension is 0
    last = self.shape[-1] * self.dtype.itemsize // jnp.dtype(want).itemsize
    flat = reinterpret(self.reshape(self.size), want)
    return flat.reshape(*self.shape[:-1], last)

