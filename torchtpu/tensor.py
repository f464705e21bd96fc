"""The device tensor: a torch wrapper subclass on device 'tpu' whose payload is a jax.Array.

Views alias their base the way PyTorch's do. Every tensor points at a ``Storage`` holding the
base's value; a view also records its PyTorch geometry (size, stride, storage offset) and a
cached value tagged with the storage version it was computed at. A write through any tensor
replaces the storage value (scattering through the view's geometry) and bumps the version, so
every other view recomputes on its next read. Tensors that cover their storage exactly
("direct") read the storage value with no check at all: the common, fast case.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import math
import threading
import weakref

import jax
import torch

from . import jit_tracing
from .ops.dtypes import JAX_TO_TORCH
from .ops.views import (
    dense_order,
    gather_as,
    gather_view,
    math_bits,
    memory_order,
    overlaps,
    scatter_as,
    scatter_view,
)
from .runtime import memory
from .runtime.execute import Pending, concrete
from .runtime.transfer import to_host

# PyTorch's autograd engine asserts on a device without an index: always 'tpu:0'.
DEVICE = torch.device("privateuseone", 0)

_make = torch.Tensor._make_wrapper_subclass
# The newest results: waiting for one waits for everything queued before it. A fused
# program's are held weakly, so an input it updates can still be donated to the next.
_newest: list = []


def note_last(value: jax.Array) -> None:
    """``value`` is the newest result dispatched."""
    _newest[:] = [value]


def note_last_program(results: list) -> None:
    """``results`` are the newest program's (they become ready together)."""
    _newest[:] = [weakref.ref(r) for r in results]


def last_value() -> jax.Array | None:
    """The newest result still held, if any."""
    for v in _newest:
        v = v() if type(v) is weakref.ref else v
        if v is not None:
            return v
    return None


# Storages given a value fused eager recorded: leaving fused eager settles them
# (``settle_pending``) without a walk over every object in the process.
_pending_storages: weakref.WeakSet = weakref.WeakSet()


class Storage:
    """The value shared by a base tensor and all its views."""

    __slots__ = ("_value", "_layout", "version", "nbytes", "__weakref__")

    def __init__(self, value: jax.Array, dims: tuple[int, ...] | None = None):
        # With ``dims``, the storage holds ``value``'s elements in the memory order of that
        # dense layout (channels_last...), rearranged only when something reads the bytes:
        # most such tensors (activations a compiled forward saves) are only read whole.
        self._value, self._layout = (None, (value, dims)) if dims is not None else (value, None)
        if type(value) is Pending:
            _pending_storages.add(self)
        self.version = 0
        self.nbytes = value.size * value.dtype.itemsize
        memory.add(self.nbytes)

    @property
    def value(self) -> jax.Array:
        if self._layout is not None:
            self._value = memory_order(*self._layout)
            self._layout = None
            if type(self._value) is Pending:
                _pending_storages.add(self)
        return self._value

    @value.setter
    def value(self, value: jax.Array) -> None:
        self._value, self._layout = value, None
        if type(value) is Pending:
            _pending_storages.add(self)

    @property
    def shape(self) -> tuple[int, ...]:
        return (self._layout[0].size,) if self._layout is not None else self._value.shape

    @property
    def dtype(self):
        return self._layout[0].dtype if self._layout is not None else self._value.dtype

    def settle(self) -> None:
        """Hold computed arrays, not fused eager's pending values (leaving fused eager); a
        value whose op failed stays pending, and raises that op's error when read."""
        if type(self._value) is Pending and self._value.array is not None:
            self._value = self._value.array
        if (self._layout is not None and type(self._layout[0]) is Pending
                and self._layout[0].array is not None):
            self._layout = (self._layout[0].array, self._layout[1])

    def __del__(self):
        # Interpreter shutdown clears modules: `memory`, or its `sub`, may be None by now.
        sub = getattr(memory, "sub", None)
        if sub is not None:
            sub(self.nbytes)


def contiguous_strides(shape) -> tuple[int, ...]:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(strides))


class TpuTensor(torch.Tensor):
    """A tensor on the 'tpu' device. Users never construct it directly."""

    # No __slots__: torch.utils.swap_tensors (model.to keeping Parameters) needs __dict__.

    # A view reading its storage's bytes as another dtype (x.view(torch.int32), view_as_real):
    # that dtype, else None.
    _bitcast = None
    # A view with PyTorch's conj or neg bit (z.conj(), z.conj().imag): its memory is its
    # base's, its value that memory conjugated / negated. (conj, neg), else None.
    _bits = None

    def __new__(cls, data: torch.Tensor | None = None, requires_grad: bool = True):
        """``type(p)(data, requires_grad=...)``: how generic code (accelerate's offload and
        device setting) makes a new parameter like ``p``, whose class a tpu Parameter is
        (nn.Parameter of a tensor subclass only marks it). Ours are made by
        ``_make_wrapper_subclass``, never here."""
        return torch.nn.Parameter(data, requires_grad)

    # The inherited __torch_function__ re-wraps every result in Python: ~40 us per op.
    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        fake = torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE)
        if fake is not None:
            return _as_fake(fake, func, args, kwargs or {})
        if len(types) > 1:
            if _FakeTensor in types and _NJT not in types:
                # Beside a fake tensor, with no fake mode active (flex_attention's backward
                # traces its score_mod on fakes beside a real constant): its mode runs the
                # op, ours faked as it fakes a real CPU tensor there. (FakeTensor itself
                # declines any tensor subclass it does not know.)
                fake = next(a.fake_mode for a in torch.utils._pytree.tree_leaves((args, kwargs))
                            if isinstance(a, _FakeTensor))
                return _as_fake(fake, func, args, kwargs or {})
            if not all(issubclass(t, TpuTensor) for t in types):
                # Another subclass over tpu values (a nested tensor built from them,
                # functional collectives' pending result under tensor parallelism): its own
                # dispatch runs the op, as over cuda tensors, calling ours on the values.
                return NotImplemented
        try:
            tracing = torch._C._get_tracing_state()  # torch.jit.trace
            if tracing is not None:
                return jit_tracing.run_traced(_executor, func, args, kwargs or {}, tracing)
            return _executor(func, args, kwargs)
        except Exception as e:
            # TorchScript's interpreter drops the message (backward_errors); the text only,
            # so no traceback keeps the failed op's tensors alive.
            op_errors.last = str(e)
            raise

    def __repr__(self, *, tensor_contents=None) -> str:
        from ._print import tensor_repr

        # nn.Parameter(t) of a tensor subclass is that subclass, marked _is_param. (A
        # Parameter subclass's own __repr__ says it.)
        marked = type(self) is TpuTensor and getattr(self, "_is_param", False)
        return ("Parameter containing:\n" if marked else "") + tensor_repr(self)

    # A tpu tensor's bytes are not in host memory. Its pointers are stand-ins: the identity
    # of the storage its views share, plus its offset, so code that compares pointers
    # (safetensors, save_pretrained's tied weights) sees aliasing as on cuda.
    def data_ptr(self) -> int:
        if "_storage" not in self.__dict__:
            return super().data_ptr()
        return id(self._storage) + self.storage_offset() * self.element_size()

    def untyped_storage(self) -> torch.UntypedStorage:
        storage = super().untyped_storage()
        if "_storage" in self.__dict__:
            storage._tpu_storage = self._storage  # read by set_(storage) and storage.py
        return storage

    def __deepcopy__(self, memo):
        if not self.is_leaf or id(self) in memo:
            return super().__deepcopy__(memo)
        with torch.no_grad():
            new = _storage_copy(self, memo)
        new.requires_grad_(self.requires_grad)
        if getattr(self, "_is_param", False):
            # Parameter.__deepcopy__: a new Parameter of the values, without grad or attributes
            new = torch.nn.Parameter(new, self.requires_grad)
        else:
            if self.grad is not None:
                new.grad = copy.deepcopy(self.grad, memo)
            new.__dict__.update(copy.deepcopy(user_state(self), memo))
            new.__class__ = type(self)  # a user's subclass (tpu_class) stays one
            if isinstance(new, _SubclassOnTpu):
                _hide_payload(new)
        memo[id(self)] = new
        return new

    def numpy(self, *, force: bool = False):
        if force:
            return self.detach().cpu().numpy()
        raise TypeError(
            f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() to "
            "copy the tensor to host memory first."
        )

    def __dlpack__(self, *args, **kwargs):
        raise BufferError(_NO_DLPACK)

    def __dlpack_device__(self):
        raise BufferError(_NO_DLPACK)

    def __coerce_same_metadata_as_tangent__(self, expected_metadata=None, expected_type=None):
        # AOTAutograd asks when a backward's incoming gradient is a tpu tensor: it is as is.
        return self

    def tolist(self):
        # (no detach: with dispatch off, as inductor reads small constants, it would return
        # a bare tensor without our payload)
        return self.cpu().tolist()

    def __format__(self, format_spec: str) -> str:
        # PyTorch formats a 0-d tensor as its number only for exact torch.Tensor
        # (f"{loss:.4f}" would raise for a subclass).
        if self.dim() == 0:
            return self.item().__format__(format_spec)
        return super().__format__(format_spec)

    def __array__(self, dtype=None, copy=None):
        return self.numpy() if dtype is None else self.numpy().astype(dtype)

    def __reduce_ex__(self, protocol):
        state = user_state(self)
        if getattr(self, "_is_param", False):  # a Parameter comes back a Parameter
            args = (self.detach(), self.requires_grad, collections.OrderedDict())
            if state:
                return (torch._utils._rebuild_parameter_with_state, (*args, state))
            return (torch._utils._rebuild_parameter, args)
        torch.utils.hooks.warn_if_has_hooks(self)  # as CPU's does (a Parameter's does not)
        # PyTorch's own form for a storage-less device (torchtpu/serialization.py): its CPU
        # copy and its device, which torch.load(weights_only=True) accepts.
        rebuild, args = (torch._utils._rebuild_device_tensor_from_cpu_tensor,
                         (_host_copy(self), self.dtype, str(self.device), self.requires_grad))
        # A user's subclass by name; a plain tensor as torch.Tensor, which loads without
        # torchtpu (map_location='cpu'), as a cuda file does without cuda.
        cls = getattr(type(self), "_user_class", torch.Tensor)
        if not state and cls is torch.Tensor:
            return rebuild, args
        # With Python attributes: PyTorch's form for those (``Tensor.__reduce_ex__``).
        return (torch._tensor._rebuild_from_type_v2, (rebuild, cls, args, state))

    def as_subclass(self, cls: type) -> torch.Tensor:
        """An alias of this tensor (autograd history kept) whose class is ``cls``, as on CPU.
        PyTorch will not re-class a tensor whose Python object is a TpuTensor already: the
        alias is of a class deriving from both (``tpu_class``)."""
        return _reclassed(torch.ops.aten.alias.default, self, cls)

    def __copy__(self):
        """An alias of the same values, as ``copy.copy`` of a CPU tensor (through its
        storage) is; its attributes are the same objects."""
        new = _detached_like(self, self)
        new.__dict__.update(user_state(self))
        return new


class _SubclassOnTpu(TpuTensor):
    """The base of a tpu tensor of a user's subclass (``tpu_class``)."""

    _user_class: type = torch.Tensor

    def __new__(cls, *args, **kwargs):
        # ``type(t)(data)`` of a user's class with no constructor of its own: torch.Tensor's
        # (TpuTensor's makes a Parameter)
        return tensor_new(cls, *args, **kwargs)

    def __setattr__(self, name: str, value) -> None:
        # (not a ``__dict__`` property: a base of the user's class may define its own, found
        # first, as MetaTensor's MetaObj does, and Dynamo reads one only as CPython's)
        if name == "__dict__":
            _replace_attributes(self, value)
        else:
            super().__setattr__(name, value)

    @classmethod
    def _on_tpu_torch_function(cls, func, types, args=(), kwargs=None):
        # PyTorch's default __torch_function__ (which a user's own reaches through super()),
        # but a result off the device (``.cpu()``) is of the user's class itself.
        with torch._C.DisableTorchFunctionSubclass():
            ret = func(*args, **(kwargs or {}))
        if func in torch.overrides.get_default_nowrap_functions():
            return ret
        return _of_class(ret, cls)


def _of_class(ret, cls: type):
    if isinstance(ret, (tuple, list)):
        return type(ret)(_of_class(r, cls) for r in ret)
    if isinstance(ret, TpuTensor):
        return ret if isinstance(ret, cls) else ret.as_subclass(cls)
    if isinstance(ret, torch.Tensor) and not isinstance(ret, cls._user_class):
        return ret.as_subclass(cls._user_class)
    return ret


# (PyTorch disables a class's default __torch_function__ when it has a __torch_dispatch__,
# as the class is made: set afterwards)
_SubclassOnTpu.__torch_function__ = _SubclassOnTpu.__dict__["_on_tpu_torch_function"]


_TPU_CLASSES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _Attributes(dict):
    """The ``__dict__`` of a tpu tensor of a user's class. Its payload entries are in it,
    where attribute lookup (and ``in``, which our own checks use) reads them, but out of its
    keys, items and iteration: code that copies a tensor's attributes wholesale onto another
    (MONAI's MetaTensor copies an op's input's onto its result, each op) copies the user's
    only, as on cuda, where ``__dict__`` holds nothing else. Copying the payload would give
    the result its input's values."""

    __slots__ = ()

    def copy(self) -> dict:
        return {k: v for k, v in dict.items(self) if k not in _PAYLOAD}

    def keys(self):
        return self.copy().keys()

    def items(self):
        return self.copy().items()

    def values(self):
        return self.copy().values()

    def __iter__(self):
        return iter(self.copy())


_INSTANCE_DICT = torch.Tensor.__dict__["__dict__"]


def _hide_payload(t: torch.Tensor, attrs: dict | None = None) -> None:
    """Give ``t`` (of a user's class) an ``_Attributes`` ``__dict__``."""
    attrs = _Attributes(dict.items(_INSTANCE_DICT.__get__(t) if attrs is None else attrs))
    _INSTANCE_DICT.__set__(t, attrs)


def _replace_attributes(t: torch.Tensor, attrs: dict) -> None:
    """``t.__dict__ = attrs``, which a class may do wholesale (MetaTensor of a batch: ``ret.
    __dict__ = {...its input's attributes}``): the payload entries ``attrs`` lacks stay. (Kept
    on the object itself: torch.utils.swap_tensors, which load_state_dict and module.to call
    under swap_module_params_on_conversion, refuses a tensor a side table refers to weakly.)"""
    current = _INSTANCE_DICT.__get__(t)
    kept = ({} if dict.__contains__(attrs, "_storage") else  # (swap_tensors': a payload)
            {k: dict.__getitem__(current, k) for k in _PAYLOAD if dict.__contains__(current, k)})
    _hide_payload(t, {**kept, **dict(dict.items(attrs))})


def tpu_class(cls: type) -> type:
    """The class a tpu tensor of Python class ``cls`` has: ``cls`` and TpuTensor (whose
    payload and ``__torch_dispatch__`` run its ops), named as ``cls``."""
    if issubclass(TpuTensor, cls):
        return TpuTensor
    if issubclass(cls, TpuTensor):
        return cls
    combined = _TPU_CLASSES.get(cls)
    if combined is None:
        namespace = {"__module__": cls.__module__, "__qualname__": cls.__qualname__,
                     "_user_class": cls}
        combined = type(cls)(cls.__name__, (cls, _SubclassOnTpu), namespace)
        if combined.__dict__.get("__torch_function__") is TpuTensor.__torch_function__:
            del combined.__torch_function__  # disabled as it was made: ours again
        _TPU_CLASSES[cls] = combined
    return combined


_make_subclass = torch._C.TensorBase._make_subclass
_base_new = torch._C.TensorBase.__new__


def tensor_new(*args, **kwargs):
    """``torch.Tensor.__new__``: ``Sub(t)`` of a tpu ``t`` (PyTorch's legacy constructor, an
    alias of ``t`` given ``cls``), which PyTorch will not re-class as its Python object is a
    TpuTensor already, is ``as_subclass``'s alias. (A signature of only ``*args, **kwargs``:
    Dynamo's polyfill for ``torch.Tensor.__new__`` checks it against its own.)"""
    cls, *rest = args
    if len(rest) == 1 and not kwargs and isinstance(rest[0], TpuTensor):
        return rest[0].as_subclass(cls)
    return _base_new(*args, **kwargs)


def make_subclass(cls, data, requires_grad: bool = False, **kwargs) -> torch.Tensor:
    """``torch.Tensor._make_subclass`` (a Parameter or plain subclass of ``data``'s values,
    without its history) for tpu data too. (Dynamo's polyfill for it checks the names.)"""
    if not isinstance(data, TpuTensor) or kwargs:
        return _make_subclass(cls, data, requires_grad, **kwargs)
    new = _reclassed(torch.ops.aten.detach.default, data, cls)
    # (a flag C++ sets: no __torch_function__ of cls sees it, nor torch.func refuses it)
    with flag_requires_grad(), torch._C.DisableTorchFunctionSubclass():
        return new.requires_grad_(requires_grad)


@contextlib.contextmanager
def flag_requires_grad():
    """Lets ``requires_grad_`` run inside torch.func transforms, which refuse it: CPU's
    ``_make_subclass`` (a Parameter made inside ``vmap`` or ``grad``) sets the flag itself."""
    allowed = torch._C._functorch.get_inplace_requires_grad_allowed()
    torch._C._functorch.set_inplace_requires_grad_allowed(True)
    try:
        yield
    finally:
        torch._C._functorch.set_inplace_requires_grad_allowed(allowed)


def _reclassed(op, t: TpuTensor, cls: type) -> torch.Tensor:
    """``op(t)`` (a new tensor viewing ``t``) as a ``cls``: its object is given the class
    (the same layout), so its autograd history and aliasing stay. (A user's
    ``__torch_function__`` on ``t`` does not see the op, as on CPU.)"""
    with torch._C.DisableTorchFunctionSubclass():
        new = op(t)
    new.__class__ = tpu_class(cls)
    if isinstance(new, _SubclassOnTpu):
        _hide_payload(new)
    return new


def user_state(t: TpuTensor) -> dict:
    """The Python attributes someone set on ``t`` (not the ones holding its values)."""
    return {k: v for k, v in t.__dict__.items() if k not in _PAYLOAD and k != "_is_param"}


def _storage_copy(t: TpuTensor, memo: dict) -> TpuTensor:
    """``t`` on a copy of its storage, as PyTorch's deepcopy makes it through the storage
    (which a wrapper tensor does not have): tensors sharing a storage in one deepcopy share
    the copy (``[x, x[2:]]``), and a view keeps its offset and strides."""
    if t._bits is not None:
        return t.clone()  # a copy of the values, a fresh tensor (CPU's resolves them too)
    key = ("torchtpu.Storage", id(t._storage))  # (t keeps the storage alive, so its id)
    if key not in memo:
        if t._bitcast is None:
            shape = t._storage.shape
            whole = torch.as_strided(t, shape, contiguous_strides(shape), 0)
        else:  # the storage in its own dtype
            whole = torch.empty(0, dtype=JAX_TO_TORCH[t._storage.dtype], device=t.device)
            whole.set_(t.untyped_storage())
        memo[key] = whole.clone()
    whole = memo[key]
    size, stride, offset = t.size(), t.stride(), t.storage_offset()
    if t._bitcast is not None:  # a view of the copy's bytes as t's dtype, as t is of its own
        return _as_dtype(whole.reshape(-1), t.dtype).as_strided(size, stride, offset)
    return make_view(whole._storage, read(whole.as_strided(size, stride, offset)), size,
                     stride, offset)


_saving = threading.local()
op_errors = threading.local()  # .last: the message of the error an op raised last, here


@contextlib.contextmanager
def host_copies_shared():
    """While a save runs: tensors sharing a storage pickle as views of one host copy of it,
    so the file holds it once and loading gives them back sharing, as CPU's and cuda's do."""
    outer = getattr(_saving, "copies", None)
    _saving.copies = {} if outer is None else outer
    try:
        yield
    finally:
        _saving.copies = outer


def _host_copy(t: TpuTensor) -> torch.Tensor:
    copies = getattr(_saving, "copies", None)
    if copies is None:
        return t.detach().cpu()
    s = t._storage
    if id(s) not in copies:  # (the storage kept with its copy: its id stays its own)
        copies[id(s)] = _as_dtype(to_host(concrete(s.value)).reshape(-1), t.dtype), s
    host = copies[id(s)][0]  # in the dtype the storage was first saved as
    if host.dtype != t.dtype:
        if s.nbytes:  # torch.save's own refusal (its loader cannot share across dtypes)
            raise RuntimeError("Cannot save multiple tensors or storages that view the same "
                               "data as different types")
        return t.detach().cpu()  # (an empty storage, saved as two dtypes)
    host = host.as_strided(t.shape, t.stride(), t.storage_offset())
    if t._bits is not None:  # a conj or neg view of the memory, saved as CPU saves one
        host = with_math_bits(host, *t._bits)
    return host


def with_math_bits(t: torch.Tensor, conj: bool, neg: bool) -> torch.Tensor:
    """A view of ``t``'s memory with its conj and neg bits flipped where asked."""
    t = t.conj() if conj else t
    return torch._neg_view(t) if neg else t


def _as_dtype(flat: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A storage's bytes read as ``dtype`` (the one its tensors are saved as, x.view(torch.int32)
    and x[1:].view(torch.int32) sharing one copy); a tail shorter than one element is left."""
    if flat.dtype == dtype:
        return flat
    raw = flat.view(torch.uint8)
    size = torch.empty(0, dtype=dtype).element_size()
    return raw[:raw.numel() // size * size].view(dtype)


# PyTorch's own export would hand out a null data pointer for this backend.
_NO_DLPACK = ("Cannot pack tensors on tpu: its data is an XLA buffer, not memory DLPack can "
              "share; use .cpu() first")
_to_dlpack = torch.utils.dlpack.to_dlpack


def to_dlpack(tensor):
    """torch.utils.dlpack.to_dlpack, refusing a tpu tensor as it refuses a meta one."""
    if isinstance(tensor, TpuTensor):
        raise BufferError(_NO_DLPACK)
    return _to_dlpack(tensor)


DATA = torch._C.TensorBase.data  # PyTorch's own ``.data`` (backend.py puts another on Tensor)


def set_data(t: torch.Tensor, value: torch.Tensor) -> None:
    """``t.data = value``. Between a CPU and a tpu tensor PyTorch's C++ refuses ("incompatible
    tensor type": it admits only its own dense backends); then ``t`` is swapped in place for
    ``value``'s data, keeping its identity, ``requires_grad``, being a Parameter and its own
    attributes (not its grad: that stays on the old device on cuda, unusable)."""
    try:
        DATA.__set__(t, value)
    except RuntimeError as e:
        if "incompatible tensor type" not in str(e) or t.device.type == value.device.type:
            raise
        _swap_data(t, value)
        return
    if "_storage" in getattr(value, "__dict__", ()):
        # The setter swapped the C++ tensor's metadata (shape, strides, dtype, storage); the
        # payload that holds the values lives on the Python object and moves with it. (After
        # swap_tensors the two may share one __dict__.)
        moved = {k: v for k, v in dict.items(value.__dict__) if k in _PAYLOAD}
        for key in _PAYLOAD:
            t.__dict__.pop(key, None)
        t.__dict__.update(moved)


def _swap_data(t: torch.Tensor, value: torch.Tensor) -> None:
    new = _detached_like(t, value)
    kept = user_state(t)
    torch.utils.swap_tensors(t, new)
    t.__dict__.update(kept)


def _detached_like(t: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """``value``'s data as a new leaf like ``t``: a Parameter if ``t`` is one, requiring
    grad if ``t`` does."""
    new = value.detach()
    if isinstance(t, torch.nn.Parameter):  # (a tpu one is a marked TpuTensor: true too)
        return torch.nn.Parameter(new, requires_grad=t.requires_grad)
    return new.requires_grad_(t.requires_grad)


# The Python-side attributes that hold a tensor's values (wrap, make_view).
_PAYLOAD = ("_storage", "_direct", "_bitcast", "_bits", "_geometry", "_cache",
            "_cache_version")


def _as_fake(mode, func, args, kwargs):
    """An op FakeTensorMode passed on to us because a real tpu tensor is among its arguments:
    a constant made while tracing (``torch.tensor([], device=x.device)`` in Dynamo builds a
    real one, then lifts it). FakeTensorMode leaves unknown tensor subclasses to themselves;
    a tpu tensor is a plain tensor of this device, so it is faked and the op run as fake."""
    if func in mode.lift_fns:
        # Lift its CPU copy, then move that: every mode sees plain tensors, so a tracer
        # (AOTAutograd's make_fx) records a real constant, a lift and a copy to this device,
        # as for a constant made on the CPU. Handing back a fake ourselves would leave the
        # tracer a fake constant it does not know ("Unexpected fake buffer").
        with torch.utils._python_dispatch._disable_current_modes():
            host = args[0].cpu()
        return func(host, *args[1:], **kwargs).to(args[0].device)
    args, kwargs = torch.utils._pytree.tree_map_only(TpuTensor, mode.from_tensor, (args, kwargs))
    with mode:
        return func(*args, **kwargs)


# Messages that print a tensor's class name (torch.distributions' argument checks, "Tensor of
# shape (2,)") name it as on CPU and cuda; its repr and qualified name stay TpuTensor.
TpuTensor.__name__ = "Tensor"
# Libraries that pick an array backend by the top package of an array's class (opt_einsum's
# and autoray's infer_backend: neuraloperator's factorized convolutions, tensorly) must find
# torch's, as for a CPU or cuda tensor, not a 'torchtpu' backend they lack (opt_einsum then
# falls back to numpy, which refuses a device tensor).
TpuTensor.__module__ = "torch"
# ... and pickle finds the class where module and qualified name say: torch.tpu (the device
# module) holds it.
TpuTensor.__qualname__ = "tpu.TpuTensor"


def wrap(value: jax.Array) -> TpuTensor:
    """A fresh tensor that owns ``value``."""
    if type(value) is not Pending:  # held, a recorded value would become a program output
        note_last(value)
    t = _make(TpuTensor, value.shape, dtype=JAX_TO_TORCH[value.dtype], device=DEVICE)
    t._storage = Storage(value)
    t._direct = True
    return t


def make_view(storage: Storage, value, size, stride, offset: int, bits=None) -> TpuTensor:
    """A tensor aliasing ``storage`` with PyTorch geometry (size, stride, offset); a
    ``value`` of another dtype than the storage's reads the storage's bytes as that dtype,
    and its geometry counts elements of that dtype. ``bits``: (conj, neg), PyTorch's math
    bits, which ``value`` already reflects."""
    size, stride = tuple(size), tuple(stride)
    # The wrapper's own storage as large as the storage it aliases: PyTorch's checks
    # (as_strided_) and untyped_storage().nbytes() see the base's, as on CPU.
    t = _make(TpuTensor, size, stride, offset, dtype=JAX_TO_TORCH[value.dtype], device=DEVICE,
              storage_size=storage.nbytes)
    t._storage = storage
    if value.dtype != storage.dtype:
        t._bitcast = value.dtype
    if bits is not None:
        t._bits = bits
        torch._C._set_conj(t, bits[0])
        torch._C._set_neg(t, bits[1])
    t._direct = (
        t._bitcast is None and bits is None and offset == 0 and size == storage.shape
        and stride == contiguous_strides(size)
    )
    t._geometry = (size, stride, offset)
    if not t._direct:
        # A direct view (detach, a state_dict's entries) reads its storage's value: no cache,
        # so no weak reference, which torch.utils.swap_tensors refuses (load_state_dict).
        _cache(t, value, storage.version)
    return t


def with_layout(value, stride) -> TpuTensor:
    """A fresh tensor holding ``value`` with a dense layout ``stride``: its storage holds the
    elements in that memory order, as PyTorch's would."""
    size, stride = tuple(value.shape), tuple(stride)
    if stride == contiguous_strides(size):
        return wrap(value)
    if not math.prod(size):  # c10 counts any empty layout as dense: a copy keeps it
        return make_view(Storage(jax.numpy.zeros((0,), value.dtype)), value, size, stride, 0)
    if not is_dense(size, stride):
        return wrap(value)
    dims = tuple(sorted(range(len(size)), key=lambda d: (-stride[d], -size[d])))
    return make_view(Storage(value, dims), value, size, stride, 0)


def is_dense(size, stride) -> bool:
    """Non-overlapping and dense: the dimensions tile memory exactly once."""
    return dense_order(tuple(size), tuple(stride)) is not None


def read(t: TpuTensor) -> jax.Array:
    """The tensor's current value."""
    if t._direct:
        return t._storage.value
    s = t._storage
    if t._cache_version != s.version:
        size, stride, offset = t._geometry
        value = (gather_view(s.value, offset, (size, stride)) if t._bitcast is None
                 else gather_as(s.value, t._bitcast, offset, (size, stride)))
        _cache(t, value if t._bits is None else math_bits(value, *t._bits), s.version)
    return t._cache


def write(t: TpuTensor, value: jax.Array) -> None:
    """Replace the tensor's value; every alias of its storage sees the change."""
    s = t._storage
    if t._direct:
        s.value = value
    else:
        memory = value if t._bits is None else math_bits(value, *t._bits)
        size, stride, offset = t._geometry
        s.value = (scatter_view(s.value, memory, offset, (size, stride)) if t._bitcast is None
                   else scatter_as(s.value, memory, offset, (size, stride)))
    s.version += 1
    if not t._direct and not overlaps(*t._geometry[:2]):  # (tuples: lru_cache keys)
        _cache(t, value, s.version)
    elif not t._direct:
        # Elements written twice keep one of the writes: read back what the storage holds.
        t._cache, t._cache_version = None, -1


# Views whose cached value fused eager has yet to compute. Weakly: holding a view would hold
# its base (autograd links them) for torch.utils.swap_tensors to refuse (load_state_dict).
_pending_views: list[weakref.ref] = []


def _cache(t: TpuTensor, value, version: int) -> None:
    if type(value) is Pending:
        if value.array is None:
            _pending_views.append(weakref.ref(t))
        else:  # computed: a cache never holds a pending value past the next program
            value = value.array
    t._cache, t._cache_version = value, version


def settle_pending() -> None:
    """Storages hold what fused eager computed, not its pending values (leaving fused eager:
    every view's pending cache was dropped before its program ran)."""
    for s in list(_pending_storages):
        s.settle()
    _pending_storages.clear()


def forget_pending_views() -> None:
    """Views drop their cached values fused eager has yet to compute, so the program need
    not return them: a view recomputes its value from its base when next read (autograd
    keeps a linear layer's ``weight.t()``, a transpose the backward's dot takes for free)."""
    for ref in _pending_views:
        t = ref()
        # (swap_tensors may have given t another tensor's attributes, without a cache)
        cache = getattr(t, "_cache", None)
        if type(cache) is Pending and cache.array is None:
            t._cache, t._cache_version = None, -1
    _pending_views.clear()


def set_executor(fn) -> None:
    """Install the function every op on a tpu tensor is handed to (eager/dispatch.py)."""
    global _executor
    _executor = fn


def _no_executor(func, args, kwargs):
    raise RuntimeError("torchtpu: no executor installed (import torchtpu)")


_executor = _no_executor

try:  # (PyTorch imports it with torch.nested)
    from torch.nested._internal.nested_tensor import NestedTensor as _NJT
except ImportError:
    _NJT = None
_FakeTensor = torch._subclasses.fake_tensor.FakeTensor


def storage_byte_offset(storage) -> int:
    """Where a slice of a tpu storage (``storage[4:8]``) starts in the storage it was cut
    from: 0 for a whole one (``t.untyped_storage()``)."""
    return getattr(storage, "_tpu_offset", 0)


def whole_storage(storage):
    """The whole tpu storage a slice of one was cut from (the storage itself if whole)."""
    return getattr(storage, "_tpu_whole", storage)
