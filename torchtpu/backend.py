"""Registering the 'tpu' device with PyTorch (the PrivateUse1 Python-backend hooks)."""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import inspect
import os
import warnings

import torch
from torch.fx.experimental import proxy_tensor
from torch.nn.parameter import UninitializedTensorMixin
from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

from . import (
    accelerator,
    autocast,
    autograd_formulas,
    backward_errors,
    batching_rules,
    distributed,
    generator,
    nested_attention,
    serialization,
    sparse,
    sparse_compressed,
    sparse_ops,
    storage,
    streams,
)
from .backward_errors import take_pending_exception
from .eager import modes
from .eager.dispatch import dispatch, refuse_in_forked_child
from .eager.mutation import COMPOSITE_OUTS
from .ops import random
from .runtime.platform import check_device_index
from .runtime.transfer import to_device
from .tensor import (
    DATA,
    TpuTensor,
    flag_requires_grad,
    make_subclass,
    read,
    set_data,
    set_executor,
    tensor_new,
    to_dlpack,
    tpu_class,
    user_state,
    with_layout,
    wrap,
)

aten = torch.ops.aten
_lib: torch.library.Library | None = None
_autocast_lib: torch.library.Library | None = None


class _Hooks(torch._C._acc.PrivateUse1Hooks):
    def is_available(self) -> bool:
        return True

    def has_primary_context(self, dev_id) -> bool:
        return True

    def is_built(self) -> bool:
        return True


class _Guard(torch._C._acc.DeviceGuard):
    def type_(self):
        # Called while the autograd engine unwinds from an op error (see backward_errors).
        take_pending_exception()
        return torch._C._autograd.DeviceType.PrivateUse1


def _parameter_new(cls, data=None, requires_grad=True):
    """A Parameter subclass (``class Scaled(nn.Parameter)``) of tpu data is of that class,
    as on CPU. (nn.Parameter itself marks a tpu tensor instead: it stays a TpuTensor.)"""
    if (cls is not torch.nn.Parameter and isinstance(data, TpuTensor)
            and not issubclass(cls, UninitializedTensorMixin)):
        return make_subclass(cls, data, requires_grad)
    if isinstance(data, TpuTensor) and torch._C._functorch.maybe_current_level() is not None:
        # Inside torch.func transforms, as CPU's _make_subclass: PyTorch's path for a subclass
        # calls requires_grad_, which they refuse, and grad's level wraps what detach returns.
        detached = data.detach()
        if type(detached) is not TpuTensor:
            return _make_subclass(cls, detached, requires_grad)
        with flag_requires_grad():
            return _new_parameter(cls, data, requires_grad)
    return _new_parameter(cls, data, requires_grad)


_new_parameter = torch.nn.Parameter.__new__
_make_subclass = torch._C.TensorBase._make_subclass


def _pin_memory(self, device=None):
    return self.clone()


def _arange(start, end=None, step=1, dtype=None, layout=None, device=None, pin_memory=None):
    if end is None:
        start, end = 0, start
    if dtype is None:
        # PyTorch's inference, made explicit: as static arguments 3 and 3.0 are equal, so a
        # cached arange(3) would answer arange(3.0).
        floating = any(isinstance(v, float) or isinstance(v, torch.Tensor)
                       and v.is_floating_point() for v in (start, end, step))
        dtype = torch.get_default_dtype() if floating else torch.int64
    return dispatch(aten.arange.start_step, (start, end, step), {"dtype": dtype})


def _arange_end(end, dtype=None, layout=None, device=None, pin_memory=None):
    return _arange(0, end, 1, dtype)


def _arange_start(start, end, dtype=None, layout=None, device=None, pin_memory=None):
    return _arange(start, end, 1, dtype)


def _concrete(size):
    """CPU's refusal of a symbolic size (a jagged tensor's ragged dimension: autograd's zero
    gradient for a dense input broadcast against one), which our shape steps cannot add."""
    for n in size:
        if type(n) is not int and isinstance(n, torch.SymInt) and n.node.maybe_as_int() is None:
            raise RuntimeError("SymIntArrayRef expected to contain only concrete integers")


def _empty_memory_format(size, dtype=None, layout=None, device=None, pin_memory=None,
                         memory_format=None):
    _concrete(size)
    t = dispatch(aten.empty.memory_format, (size,), {"dtype": dtype})
    if memory_format in (None, torch.contiguous_format, torch.preserve_format):
        return t
    stride = torch.empty(size, device="meta", memory_format=memory_format).stride()
    return with_layout(read(t), stride)


def _empty_strided(size, stride, dtype=None, layout=None, device=None, pin_memory=None):
    _concrete(size)
    return dispatch(aten.empty_strided.default, (size, stride), {"dtype": dtype})


def _make_dep_token(dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    # (torch.export's functional asserts thread one through: an empty 0-d tensor, as CPU's)
    return dispatch(aten.empty.memory_format, ((),), {"dtype": dtype})


def _efficientzerotensor(size, dtype=None, layout=None, device=None, pin_memory=None):
    # Autograd's zero gradients (sgn, and others at points they do not cover)
    return torch.zeros(size, dtype=dtype, device=device)


def _copy_from(self, dst, non_blocking=False):
    # Reached with the Python key excluded (torch.tensor(..., device='tpu') does that).
    return dispatch(aten.copy_.default, (dst, self), {})


def _eye(n, m=None, dtype=None, layout=None, device=None, pin_memory=None):
    return dispatch(aten.eye.m, (n, n if m is None else m), {"dtype": dtype})


def _via_cpu(op):
    """A PrivateUse1 kernel for a small factory: build it on the CPU, then move it over."""

    def kernel(*args, **kwargs):
        kwargs["device"] = "cpu"
        if kwargs.get("pin_memory"):  # (CPU's own refusals print the options as given)
            del kwargs["pin_memory"]
        return wrap(to_device(op(*args, **kwargs)))

    return kernel


def _on_an_existing_device(factory):
    """A factory kernel that refuses tpu:N past the devices this process drives."""

    def kernel(*args, **kwargs):
        check_device_index(kwargs.get("device"))
        return factory(*args, **kwargs)

    return kernel


def _to_executor(op):
    return lambda *args, **kwargs: dispatch(op, args, kwargs)


# Ops that must reach us as PrivateUse1 kernels. silu_backward and mish_backward: CPU computes
# them with kernels of its own, but they also have a CompositeImplicitAutograd kernel, which
# PyTorch runs for a device without one (7-11 ops, rounding after each in bfloat16).
# _local_scalar_dense: torch.tensor([t, t]) reads 0-d tensors with Python dispatch off.
# set_.source_Storage: torch.tensor(storage) sets an empty tensor to the storage with Python
# dispatch off. COMPOSITE_OUTS (linalg_matrix_rank's and matmul's out= forms): composites that
# miss the out for a tensor subclass (eager/mutation.py).
_KERNELS = ("silu_backward", "mish_backward", "_local_scalar_dense", "set_.source_Storage",
            *(f"{op._schema.name.removeprefix('aten::')}.{op._overloadname}"
              for op in COMPOSITE_OUTS))

# Small index and window factories: cheaper built once on the host than compiled. And
# scalar_tensor, whose composite kernel for other devices is empty().fill_(): fill_ checks
# the number against the dtype, where CPU's own kernel rounds a float16/bfloat16 scalar
# unchecked (-1e5 is -inf; x_half[mask] = -1e5 builds its value so on the tensor's device).
_HOST_FACTORIES = ("tril_indices", "triu_indices", "hann_window", "hamming_window",
                   "blackman_window", "bartlett_window", "kaiser_window", "scalar_tensor")


_module_apply = torch.nn.Module._apply
_apply_depth = 0


def _apply_keeping_ties(self, fn, recurse=True):
    """``Module._apply`` that survives parameters a live autograd graph still holds.

    Swapping tensors in place (what keeps Parameter objects and ties across ``.to('tpu')``)
    refuses a parameter that a CPU graph has saved. Then the outermost call converts the rest
    as PyTorch does without swapping (new Parameters) and re-ties what was one object.
    """
    global _apply_depth
    if _apply_depth:
        return _module_apply(self, fn, recurse)
    lazy = _aim_uninitialized(self, fn)
    try:
        return _apply_initialized(self, fn, recurse)
    finally:
        for store, name, t in lazy:
            store[name] = t


def _aim_uninitialized(module: torch.nn.Module, fn) -> list:
    """A lazy module's parameters have no data to move: each uninitialized one moved to tpu
    remembers it and is materialized there (swapping it would make it an initialized,
    empty one); one converted otherwise takes ``fn`` of its empty data, as PyTorch's
    ``param.data = fn(param)`` (a tpu target it remembers keeps its device: ``.to('tpu')
    .double()``). They are out of the module while the rest is converted."""
    lazy = []
    try:
        _take_uninitialized(module, fn, lazy)
    except BaseException:
        for store, name, t in lazy:  # a refusal leaves the module as it was
            store[name] = t
        raise
    return lazy


def _take_uninitialized(module: torch.nn.Module, fn, lazy: list) -> None:
    for m in module.modules():
        for store in (m._parameters, m._buffers):
            for name, t in list(store.items()):
                if not isinstance(t, UninitializedTensorMixin):
                    continue
                target = t.__dict__.get("_torchtpu_target")
                # fn of the placeholder itself, as PyTorch's: its refusals (share_memory_,
                # to_empty's empty_like) are the user's answer wherever it is aimed.
                converted = fn(t)
                # fn on a stand-in: an uninitialized buffer cannot become a TpuTensor itself.
                moved = fn(torch.empty(0, dtype=target[1] if target else t.dtype,
                                       device=target[0] if target else None))
                with torch.no_grad():
                    if moved.device.type == "tpu":
                        t._torchtpu_target = (moved.device, moved.dtype)
                        # (the placeholder stays on the CPU, in the dtype it will have)
                        t.data = torch.empty(0, dtype=moved.dtype)
                    else:
                        t.__dict__.pop("_torchtpu_target", None)
                        t.data = converted
                lazy.append((store, name, t))
                del store[name]


_materialize = UninitializedTensorMixin.materialize


def _materialize_on_tpu(self, shape, device=None, dtype=None):
    target = self.__dict__.pop("_torchtpu_target", None)
    if device is not None and torch.device(device).type == "tpu":
        target = (torch.device(device), target[1] if target else self.dtype)
    if target is None or device is not None and torch.device(device).type != "tpu":
        return _materialize(self, shape, device, dtype)
    value = torch.empty(shape, device=target[0], dtype=dtype or target[1])
    if isinstance(self, torch.nn.Parameter):
        value = torch.nn.Parameter(value, requires_grad=self.requires_grad)
    torch.utils.swap_tensors(self, value)


def _aimed_at_tpu(new):
    """``UninitializedParameter(device="tpu")`` (a lazy module made with ``device=`` or under
    ``with torch.device("tpu")``): a placeholder on the CPU aimed at tpu, where ``materialize``
    puts its value. PyTorch makes the placeholder a subclass instance of the empty tensor it
    is given, which a tpu tensor, already a TpuTensor, cannot become."""

    signature = inspect.signature(new)

    def aimed(cls, *args, **kwargs):
        # device may come by position, as in PyTorch's own __deepcopy__ of a placeholder
        bound = signature.bind(cls, *args, **kwargs)
        device = bound.arguments.get("device")
        target = torch.device(device) if device is not None else torch.get_default_device()
        if target.type != "tpu":
            return new(*bound.args, **bound.kwargs)
        bound.arguments["device"] = "cpu"
        placeholder = new(*bound.args, **bound.kwargs)
        placeholder._torchtpu_target = (target, placeholder.dtype)
        return placeholder

    return aimed


_deepcopy_placeholder = torch.nn.UninitializedParameter.__deepcopy__


def _deepcopy_keeping_target(self, memo):
    """A copy of a parameter placeholder aimed at tpu is aimed there too (PyTorch's copy is
    made on the device its empty value is on: the CPU)."""
    result = _deepcopy_placeholder(self, memo)
    if "_torchtpu_target" in self.__dict__:
        result._torchtpu_target = self._torchtpu_target
    return result


@contextlib.contextmanager
def _converting(swap: bool):
    """The outermost ``_apply``: nested calls run PyTorch's own. Tensors are swapped in
    place (what keeps Parameter objects across ``.to('tpu')``) only here: for the whole
    process the same switch would make ``load_state_dict`` swap too, which refuses a
    parameter a live view holds, where PyTorch copies into it (on CPU as on cuda)."""
    global _apply_depth
    previous = torch.__future__.get_swap_module_params_on_conversion()
    torch.__future__.set_swap_module_params_on_conversion(swap)
    _apply_depth += 1
    try:
        yield
    finally:
        _apply_depth -= 1
        torch.__future__.set_swap_module_params_on_conversion(previous)


def _apply_to_script_module(self, fn):
    """A TorchScript module's tensors live in C++ attributes that neither swap nor take
    ``.data`` of another tensor type (cuda's shallow copy): each is replaced, as a Parameter
    where it was one (a loaded module hands out plain tensors)."""
    for module in self.modules():
        for name, p in list(module._parameters.items()):
            if p is not None:
                module._parameters[name] = torch.nn.Parameter(fn(p.detach()), p.requires_grad)
        for name, b in list(module._buffers.items()):
            if b is not None:
                module._buffers[name] = fn(b)
        if hasattr(module, "_flat_weights_names"):  # a scripted RNN reads its weights' list
            module._flat_weights = [getattr(module, n) for n in module._flat_weights_names]
    return self


def _give_back(p: torch.Tensor, cls: type, state: dict) -> None:
    """A swapped parameter's own class (a Parameter subclass) and attributes."""
    if type(p) in (torch.nn.Parameter, TpuTensor) and cls not in (torch.nn.Parameter, TpuTensor):
        user = getattr(cls, "_user_class", cls)
        p.__class__ = tpu_class(user) if type(p) is TpuTensor else user
    for key, value in state.items():
        p.__dict__.setdefault(key, value)


def _apply_initialized(self, fn, recurse):
    if isinstance(self, torch.jit.ScriptModule):
        return _apply_to_script_module(self, fn)
    owners: dict[int, list] = {}
    # PyTorch swaps a new plain Parameter into each: the class and the Python attributes
    # (``p.no_decay = True``) are given back after, as cuda's .data swap keeps them.
    kept = []
    for module in self.modules():
        for name, p in module._parameters.items():
            if p is not None:
                owners.setdefault(id(p), []).append((module, name))
                state = user_state(p)
                if state or type(p) not in (torch.nn.Parameter, TpuTensor):
                    kept.append((p, type(p), state))
    try:
        with _converting(swap=True):
            out = _module_apply(self, fn, recurse)
        for p, cls, state in kept:
            _give_back(p, cls, state)
        return out
    except RuntimeError as e:
        if "Couldn't swap" not in str(e):
            raise
    with _converting(swap=False):
        _module_apply(self, fn, recurse)
    for places in owners.values():
        first = places[0][0]._parameters[places[0][1]]
        for module, name in places[1:]:
            module._parameters[name] = first
    return self


def _register_control_flow() -> None:
    """``torch.cond``, ``while_loop``, ``scan`` and ``map`` of tpu tensors run as on cpu and
    cuda (their dense kernels: Python loops of tpu ops), a checkpointed region's random
    ops save and replay the stream, and ops with effects run: a higher-order op asks a
    tensor subclass for a rule."""
    try:
        from torch._higher_order_ops.cond import cond_op, cond_op_dense
        from torch._higher_order_ops.map import map_dense, map_impl
        from torch._higher_order_ops.scan import scan_op, scan_op_dense
        from torch._higher_order_ops.while_loop import while_loop_dense, while_loop_op
    except ImportError:  # a PyTorch that names them otherwise: they stay refused
        return
    for op, dense in ((cond_op, cond_op_dense), (while_loop_op, while_loop_dense),
                      (scan_op, scan_op_dense), (map_impl, map_dense)):
        if TpuTensor not in op.python_key_table:
            op.py_impl(TpuTensor)(dense)
    # A checkpointed region's random ops, when AOTAutograd's graph runs op by op.
    save, replay = (torch.ops.higher_order.run_and_save_rng_state,
                    torch.ops.higher_order.run_with_rng_state)
    if TpuTensor not in save.python_key_table:
        save.py_impl(TpuTensor)(lambda op, *args, **kwargs: (random.saved_state(),
                                                             op(*args, **kwargs)))
    if TpuTensor not in replay.python_key_table:
        replay.py_impl(TpuTensor)(_replayed)
    # An op with a side effect in a graph run op by op (linalg's error checks, under
    # torch.compile: their graph cannot be one program).
    try:
        from torch._higher_order_ops.effects import with_effects, with_effects_dense
    except ImportError:
        return
    if TpuTensor not in with_effects.python_key_table:
        with_effects.py_impl(TpuTensor)(with_effects_dense)
    _allow_flex_attention()


def _allow_flex_attention() -> None:
    """``flex_attention`` of tpu tensors runs PyTorch's dense implementation (scores
    materialised, as CPU's eager path), forward and backward; PyTorch refuses any device
    not on its list before the higher-order op would ask the subclass."""
    try:  # (the package's name flex_attention is the op; the module holds its kernels)
        hops = importlib.import_module("torch._higher_order_ops.flex_attention")
        api = importlib.import_module("torch.nn.attention.flex_attention")
    except ImportError:
        return
    for op, dense in ((hops.flex_attention, hops.sdpa_dense),
                      (hops.flex_attention_backward, hops.sdpa_dense_backward)):
        if TpuTensor not in op.python_key_table:
            op.py_impl(TpuTensor)(dense)
    validate = getattr(api, "_validate_device", None)
    if validate is None or getattr(validate, "allows_tpu", False):
        return

    def validate_device(query, key, value):
        if query.device.type != "tpu":
            validate(query, key, value)

    validate_device.allows_tpu = True
    api._validate_device = validate_device


def _replayed(state, op, *args, **kwargs):
    with random.replaying(state):
        return op(*args, **kwargs)


def _enable_multi_tensor_paths() -> None:
    """Optimizers and clip_grad_norm_ take their _foreach_ paths only for tensor types on
    these lists (DTensor adds itself the same way); else each parameter is its own ops."""
    from torch.optim import optimizer
    from torch.utils import _foreach_utils

    for types in (optimizer._foreach_supported_types, _foreach_utils._foreach_supported_types):
        if TpuTensor not in types:
            types.append(TpuTensor)


class _TracedAsPlain(tuple):
    """make_fx's tensor types it traces as plain tensors, and a real tpu tensor among them.

    make_fx (torch.func.linearize, functionalize) runs a tensor of a type it does not know
    as a subclass first, with its tracing mode still active, so a tpu constant's ops escaped
    the trace. A tpu tensor is a plain tensor of its device, as a cuda one is. Under
    torch.compile's fake mode a real tpu constant keeps its own path (tensor.py _as_fake).
    """

    def __contains__(self, t) -> bool:
        if t is TpuTensor:
            return torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE) is None
        return tuple.__contains__(self, t)


_FORKED = ("torchtpu: the 'tpu' device cannot be used in a forked subprocess (a DataLoader "
           "worker, multiprocessing's default start method): XLA's runtime does not survive "
           "os.fork(). Make tpu tensors in the main process (move each batch there), or use "
           "the 'spawn' start method.")


def _refuse_in_child(*_args, **_kwargs):
    raise RuntimeError(_FORKED)


def _guard_forks() -> None:
    """As cuda refuses a forked subprocess ("Cannot re-initialize CUDA in forked
    subprocess"): a child that touches tpu raises instead of hanging in XLA's runtime. That
    makes JAX's warning at every fork (DataLoader(num_workers=...) forks each epoch) moot."""
    from .runtime import execute, transfer

    def in_child():
        set_executor(_refuse_in_child)
        refuse_in_forked_child(_refuse_in_child)
        transfer.device_put = _refuse_in_child
        execute.refuse_in_forked_child(_refuse_in_child)
        _keep_the_parents_clients()

    os.register_at_fork(after_in_child=in_child)
    warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called\. os\.fork\(\) is "
                            r"incompatible with multithreaded code, and JAX",
                            category=RuntimeWarning)


def _keep_the_parents_clients() -> None:
    """A forked child has the parent's XLA clients but not their threads: destroying one at
    exit (jax's exit handler, or the interpreter's teardown) waits on those threads forever
    or crashes. The child never uses them; they are left alive and never destroyed."""
    from jax._src import xla_bridge

    for client in list(getattr(xla_bridge, "_backends", {}).values()):
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(client))
    if hasattr(xla_bridge, "_default_backend"):
        xla_bridge._default_backend = None  # jax's exit handler then clears nothing


def register() -> None:
    """Rename PrivateUse1 to 'tpu' and install torch.tpu; idempotent."""
    global _lib, _autocast_lib
    if _lib is not None:
        return
    from . import device_module

    _setup_privateuseone_for_python_backend(
        "tpu", backend_module=device_module, hook=_Hooks(), device_guard=_Guard()
    )
    device_module.install_submodules()
    # model.to('tpu') must keep each Parameter object, as on cuda: _apply swaps tensors in
    # place (_converting).
    torch.nn.Module._apply = _apply_keeping_ties
    torch.nn.Parameter.__new__ = _parameter_new
    # ``t.data = v`` across CPU and tpu (a parameter, a buffer, a tpu tensor), as PyTorch's C++
    # allows for cuda: set_data swaps in place where PyTorch's setter refuses.
    torch.Tensor.data = property(DATA.__get__, set_data, doc=DATA.__doc__)
    UninitializedTensorMixin.materialize = _materialize_on_tpu
    for cls in (torch.nn.UninitializedParameter, torch.nn.UninitializedBuffer):
        cls.__new__ = _aimed_at_tpu(cls.__new__)
    torch.nn.UninitializedParameter.__deepcopy__ = _deepcopy_keeping_target
    _lib = torch.library.Library("aten", "IMPL")
    # The factories PyTorch's others (zeros, randn, tensor, ...) start from.
    factories = {
        "empty.memory_format": _empty_memory_format,
        "empty_strided": _empty_strided,
        # Their CompositeExplicit kernels resize an empty out tensor, which a wrapper cannot do.
        "arange": _arange_end,
        "arange.start": _arange_start,
        "arange.start_step": _arange,
        "eye": _eye,
        "eye.m": _eye,
        "_efficientzerotensor": _efficientzerotensor,
        "_make_dep_token": _make_dep_token,
    }
    for name, kernel in factories.items():
        _lib.impl(name, _on_an_existing_device(kernel), "PrivateUse1")
    _lib.impl("_copy_from", _copy_from, "PrivateUse1")
    # An empty sparse COO tensor asked for on tpu (torch.sparse_coo_tensor(size=...)): no tpu
    # tensor among its arguments, so it reaches the sparse tpu key (sparse.py).
    _lib.impl("_sparse_coo_tensor_with_dims", _on_an_existing_device(sparse.construct_empty),
              "SparsePrivateUse1")
    _lib.impl("empty.memory_format", _on_an_existing_device(sparse_ops.empty),
              "SparsePrivateUse1")
    sparse_compressed.register()
    if not torch.cuda.is_available():
        # With 'tpu' the process's accelerator, CPU pinning asks it for a pinned allocator,
        # which a Python backend cannot give: DataLoader(pin_memory=True) would fail. XLA
        # copies from any host memory, so a pinned copy is a plain one. (With CUDA present,
        # PyTorch's own kernel stays: it pins for an explicit device='cuda'.)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "overriding a previously registered kernel"
            _lib.impl("_pin_memory", _pin_memory, "CPU")
    for name in _HOST_FACTORIES:
        packet = getattr(aten, name)
        for overload in packet.overloads():
            if overload != "out":
                qualified = name if overload == "default" else f"{name}.{overload}"
                kernel = _via_cpu(getattr(packet, overload))
                _lib.impl(qualified, _on_an_existing_device(kernel), "PrivateUse1")
    for name in _KERNELS:
        packet, _, overload = name.partition(".")
        _lib.impl(name, _to_executor(getattr(getattr(aten, packet), overload or "default")),
                  "PrivateUse1")
    _autocast_lib = autocast.register(_lib)
    autograd_formulas.register(_lib)
    _register_control_flow()
    batching_rules.register()
    _enable_multi_tensor_paths()
    if torch.distributed.is_available():
        distributed.register()
    _guard_forks()
    torch.Tensor._make_subclass = staticmethod(make_subclass)
    torch.Tensor.__new__ = tensor_new
    serialization.install()
    storage.install()
    generator.install()
    streams.install()
    torch.utils.dlpack.to_dlpack = to_dlpack
    proxy_tensor.HANDLED_TYPES = _TracedAsPlain(proxy_tensor.HANDLED_TYPES)
    backward_errors.install()
    accelerator.install()
    nested_attention.install()
    modes.init_from_env()


__all__ = ["register", "wrap"]
