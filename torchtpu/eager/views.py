"""View ops: the result aliases its base's storage with PyTorch's own geometry.

PyTorch's meta kernels give each view's size, stride and storage offset (and PyTorch's own
error for an invalid view) at about a microsecond; the value comes from the view's lowering
rule applied to the base's value, or, for views without one, a strided gather.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import torch

from ..ops.registry import LOWERINGS
from ..ops.views import gather_as, gather_view, grow_storage, math_bits, window
from ..tensor import Storage, TpuTensor, contiguous_strides, is_dense, make_view, wrap
from . import meta_errors, strict
from .values import call_unwrapped, unwrap


def _meta_base(t: TpuTensor) -> torch.Tensor:
    storage = t._storage
    numel = math.prod(storage.shape) * storage.dtype.itemsize // t.element_size()  # t's dtype
    meta = torch.empty(numel, dtype=t.dtype, device="meta")
    meta = meta.as_strided(t.shape, t.stride(), t.storage_offset())
    if t._bits is not None:
        torch._C._set_conj(meta, t._bits[0])
        torch._C._set_neg(meta, t._bits[1])
    return meta


def meta_like(x):
    """A meta tensor with ``x``'s dtype and geometry (anything else as it is)."""
    if isinstance(x, TpuTensor):
        return _meta_base(x)
    if isinstance(x, torch.Tensor):
        return x.to("meta")
    return x


def handler(func):
    rule = LOWERINGS.get(func)
    run = strict.compile_rule(rule) if rule is not None else None

    def view(args, kwargs):
        base = args[0]
        key = _key(func, base, args, kwargs)
        found = _VIEWS.get(key) if key is not None else None
        if found is None:
            found = _view_of(func, base, args, kwargs)
            if key is not None:
                if len(_VIEWS) >= _MAX_VIEWS:
                    _VIEWS.clear()
                _VIEWS[key] = found
        same, aliases, outs = found
        storage = base._storage
        if same:
            # alias, detach, a view to its own shape: the base's value as it is, which costs
            # no program (a jitted identity copies its input).
            value = unwrap(base)
        elif func is aten.slice.Tensor:
            value = _slice_value(base, args, kwargs, outs[0])
        elif run is not None:
            value = call_unwrapped(run, args, kwargs)
        elif type(outs) is tuple:
            value = _gathered(storage, *outs, base._bitcast)
        else:
            value = [_gathered(storage, *o, base._bitcast) for o in outs]
        if not aliases:
            return wrap(value)  # what an aliasing-if-possible op returned as a copy
        if torch.is_inference_mode_enabled() != base.is_inference():
            # A view is an inference tensor exactly when its base is, whatever the mode:
            # autograd gives it its base's version counter, which only an inference tensor
            # may lack.
            with torch.inference_mode(base.is_inference()):
                return _aliasing(storage, value, outs)
        return _aliasing(storage, value, outs)

    return view


def _slice_value(base: TpuTensor, args, kwargs, geometry: tuple):
    """slice's value, its start traced (read off the view's offset): one program for every
    x[i:i + n]."""
    dim = (args[1] if len(args) > 1 else kwargs.get("dim", 0)) % base.dim()
    step = args[4] if len(args) > 4 else kwargs.get("step", 1)
    size, _, offset = geometry
    stride = base.stride(dim)
    start = (offset - base.storage_offset()) // stride if stride and size[dim] else 0
    return window(unwrap(base), start, dim, size[dim], step)


def _view_of(func, base: TpuTensor, args, kwargs) -> tuple:
    """What the view is, from PyTorch's meta kernel (its error, for an invalid view):
    whether it is its base as it is, whether it aliases at all, and each output's geometry
    and math bits."""
    meta_base = meta_like(base)
    try:
        meta = func(meta_base, *[meta_like(a) for a in args[1:]], **kwargs)
    except RuntimeError as e:
        raise meta_errors.cpu_wording(func, e, args) or e from None
    if func is aten.as_strided.default:
        # The functional meta kernel does not check the storage's bounds; its in-place
        # twin raises CPU's error.
        aten.as_strided_.default(_meta_base(base), *args[1:], **kwargs)
    if not isinstance(meta, torch.Tensor):
        return False, True, [(_geometry(m), _bits(m)) for m in meta]
    same = (meta.dtype == meta_base.dtype and _geometry(meta) == _geometry(meta_base)
            and meta.is_conj() == meta_base.is_conj() and meta.is_neg() == meta_base.is_neg())
    return same, torch._C._is_alias_of(meta, meta_base), (_geometry(meta), _bits(meta))


# What each view op made of a base of a given geometry with given arguments (_view_of), so
# that repeating a view (every step of a training loop) skips the meta kernel.
_VIEWS: dict = {}
_MAX_VIEWS = 8192
_PLAIN = (int, bool, float, type(None), torch.dtype, torch.memory_format, str)


def _key(func, base: TpuTensor, args, kwargs) -> tuple | None:
    """``_VIEWS``'s key for this call; None if an argument is not a plain value."""
    rest = []
    for a in args[1:]:
        if type(a) is list or type(a) is tuple:
            if not all(type(v) is int for v in a):
                return None
            a = tuple(a)
        elif not isinstance(a, _PLAIN):
            return None
        rest.append(a)
    if kwargs:
        for k, v in kwargs.items():
            if not isinstance(v, _PLAIN):
                return None
            rest.append((k, v))
    storage = base._storage
    return (func, base.dtype, base.shape, base.stride(), base.storage_offset(), base._bits,
            storage.shape, storage.dtype, tuple(rest))


def _aliasing(storage: Storage, value, outs):
    if type(outs) is tuple:
        return make_view(storage, value, *outs[0], outs[1])
    return [make_view(storage, v, *geometry, bits)
            for v, (geometry, bits) in zip(value, outs, strict=True)]


def _bits(m: torch.Tensor) -> tuple[bool, bool] | None:
    conj, neg = m.is_conj(), m.is_neg()
    return (conj, neg) if conj or neg else None


def _gathered(storage: Storage, geometry: tuple, bits, bitcast):
    """The value of a view with this geometry and math bits, from its storage; ``bitcast``:
    the view's dtype where it reads the storage's bytes as another (as_strided of x.real of
    a complex x counts floats)."""
    size, stride, offset = geometry
    value = (gather_view(storage.value, offset, (size, stride)) if bitcast is None
             else gather_as(storage.value, bitcast, offset, (size, stride)))
    return value if bits is None else math_bits(value, *bits)


def _geometry(m: torch.Tensor) -> tuple:
    return tuple(m.shape), tuple(m.stride()), m.storage_offset()


aten = torch.ops.aten
# Views whose schema says they are not (the output's base is a temporary nobody else sees):
# PyTorch's kernel still aliases, and kron's out= writes through one.
UNSAFE_VIEWS = {aten._unsafe_view.default}
# In-place view ops change the tensor's geometry, never its data.
INPLACE = {
    aten.as_strided_.default, aten.t_.default, aten.transpose_.default,
    aten.unsqueeze_.default, aten.squeeze_.default, aten.squeeze_.dim, aten.squeeze_.dims,
}


def inplace_handler(func):
    def restride(args, kwargs):
        self = args[0]
        meta = _meta_base(self)
        func(meta, *[meta_like(a) for a in args[1:]], **kwargs)
        set_geometry(self, *_geometry(meta))
        return self

    return restride


def layout_for(t: torch.Tensor, memory_format=None) -> tuple[int, ...]:
    """The strides PyTorch gives a copy of ``t`` in ``memory_format`` (default: preserve, which
    keeps a dense layout such as channels_last and makes anything else contiguous)."""
    if memory_format in (None, torch.preserve_format) and (
            t.numel() == 0 or is_dense(t.shape, t.stride())):
        # as c10's empty_like: the strides as they are, a size-1 dimension's too, and any
        # empty tensor's, which c10 counts as dense (the meta kernels' empty_like recomputes
        # those)
        return tuple(t.stride())
    meta = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
    return torch.empty_like(meta, memory_format=memory_format or torch.preserve_format).stride()


def fresh_strided(dtype, size, stride) -> TpuTensor:
    """empty_strided's tensor for a layout with gaps or overlaps: a fresh storage as large as
    the layout reaches (zeros here), seen through that layout, as PyTorch allocates it."""
    size, stride = tuple(size), tuple(stride)
    needed = (1 + sum((n - 1) * s for n, s in zip(size, stride, strict=True))
              if math.prod(size) else 0)
    t = wrap(jnp.zeros((needed,), dtype))
    set_geometry(t, size, stride, 0)
    return t


def set_geometry(t: TpuTensor, size, stride, offset: int) -> None:
    """Give ``t`` a new geometry over its own storage (its elements stay where they are)."""
    size, stride = tuple(size), tuple(stride)
    with torch._C._DisableTorchDispatch():
        # the wrapper's own sizes and strides: PyTorch's generic kernel, bounds-checked
        torch.ops.aten.as_strided_.default(t, size, stride, offset)
    t._direct = (t._bitcast is None and t._bits is None and offset == 0
                 and size == t._storage.shape
                 and stride == contiguous_strides(size))
    t._geometry = (size, stride, offset)
    t._cache, t._cache_version = None, -1


def resize(t: TpuTensor, size, stride=None) -> None:
    """PyTorch's ``resize_``: ``t`` takes ``size`` (contiguous unless ``stride``) from its
    storage offset, over the same elements; a storage too small grows (new elements are zero
    here, uninitialised in PyTorch, and filled as PyTorch fills them under
    torch.use_deterministic_algorithms) and, as a new storage, no longer aliases old views."""
    size = tuple(size)
    stride = contiguous_strides(size) if stride is None else tuple(stride)
    offset = t.storage_offset()
    needed = offset + 1 + sum((n - 1) * s for n, s in zip(size, stride, strict=True)) \
        if math.prod(size) else offset
    if needed * t.element_size() <= t.untyped_storage().nbytes():
        set_geometry(t, size, stride, offset)
        return
    if needed > t._storage.value.size:
        filled = (torch.are_deterministic_algorithms_enabled()
                  and torch.utils.deterministic.fill_uninitialized_memory)
        t._storage = Storage(grow_storage(t._storage.value, needed, filled))
    # The wrapper's own storage must grow: a placeholder storage of the new size, installed by
    # set_'s CPU kernel (generic TensorImpl bookkeeping; PrivateUse1 has no set_ kernel).
    room = _make(TpuTensor, (needed,), dtype=t.dtype, device=t.device).untyped_storage()
    with torch._C._DisableTorchDispatch():
        aten.set_.source_Storage_storage_offset.redispatch(
            _CPU, t, room, offset, size, stride)
    set_geometry(t, size, stride, offset)


_make = torch.Tensor._make_wrapper_subclass
_CPU = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
