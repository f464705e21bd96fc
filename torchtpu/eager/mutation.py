"""In-place and ``out=`` variants, derived from the functional op via the schema.

Only functional rules are written. ``add_.Tensor`` runs ``add.Tensor`` and writes the result
into ``self``; ``add.out`` runs ``add.Tensor`` and writes into ``out``; ``_foreach_add_.List``
runs ``_foreach_add.List`` and writes each result into its ``self[i]``.
"""

from __future__ import annotations

import re
import warnings
from functools import partial

import torch
from torch.utils._pytree import tree_leaves

from ..ops.dtypes import cast, scalar_type_name, to_jax_dtype, to_torch_dtype
from ..ops.registry import LOWERINGS, is_functional
from ..runtime.execute import Pending, flush_pending
from ..runtime.transfer import to_device
from ..tensor import DEVICE, TpuTensor, is_dense, read, write
from . import deferred_checks, meta_errors, strict, views
from .linalg_layout import out_layout, restrides_empty
from .number_checks import casting_number_first, checking_number
from .out_dtypes import refuse_out_dtype, refuse_out_dtype_first
from .values import MIXED_DEVICES, call_unwrapped, wrap_out

aten = torch.ops.aten


def mutated_args(func) -> list[torch._C.Argument]:
    return [a for a in func._schema.arguments if a.alias_info is not None and a.alias_info.is_write]


# In-place ops whose functional form is not named by dropping the underscore.
_INPLACE_FUNCTIONAL = {
    aten.normal_.default: aten.normal_functional.default,
    aten.bernoulli_.float: aten.bernoulli.p,
    # writes its input and its noise: the functional form returns both
    aten.rrelu_with_noise_.default: aten.rrelu_with_noise_functional.default,
}


def _inplace_functional(func):
    """add_.Tensor -> add.Tensor; __iand__.Tensor -> __and__.Tensor."""
    if func in _INPLACE_FUNCTIONAL:
        return _INPLACE_FUNCTIONAL[func]
    name = func._schema.name.split("::")[1]
    if name.startswith("__i") and name.endswith("__"):
        base = "__" + name[3:]
    elif name.endswith("_"):
        base = name[:-1]
    else:
        return None
    packet = getattr(aten, base, None)
    if packet is None:
        return None
    # By signature, not overload name: pow_.Tensor is pow.Tensor_Tensor, floor_divide_.Tensor
    # is floor_divide.default (pow.Scalar is a number raised to a tensor).
    want = [(a.name, str(a.type)) for a in func._schema.arguments]
    for name in packet.overloads():
        cand = getattr(packet, name)
        if is_functional(cand) and [(a.name, str(a.type)) for a in cand._schema.arguments] == want:
            return cand
    return getattr(packet, func._overloadname, None)


_FACTORY = {"dtype", "layout", "device", "pin_memory"}


def _out_args(func) -> list[torch._C.Argument]:
    """An out= form's outs: its keyword-only written arguments (the positional ones written,
    batch norm's running stats, its functional form writes too)."""
    return [a for a in mutated_args(func) if a.kwarg_only]


def _out_functional(func):
    """add.out -> the overload of add taking the same non-out arguments."""
    out_names = {a.name for a in _out_args(func)}
    kept = [a for a in func._schema.arguments if a.name not in out_names]
    want, types = [a.name for a in kept], [str(a.type) for a in kept]
    packet = getattr(aten, func._schema.name.split("::")[1])
    found = []
    for name in packet.overloads():
        cand = getattr(packet, name)
        if cand is not func and not _out_args(cand):
            names = [a.name for a in cand._schema.arguments]
            # Factories (arange, linspace, eye...) add dtype/device options to the out form.
            if names == want or names[: len(want)] == want and set(names[len(want):]) <= _FACTORY:
                found.append(cand)
    # Overloads differing only in argument types (pow.Tensor_Scalar_out is pow.Tensor_Scalar,
    # not pow.Tensor_Tensor): the one with the same types, else one with a rule.
    found.sort(key=lambda op: (
        [str(a.type) for a in op._schema.arguments][: len(types)] != types, op not in LOWERINGS))
    return found[0] if found else None


# CPU's bernoulli.out draws into its out, whatever its dtype (out.bernoulli_(p)).
_DRAWS_INTO_OUT = frozenset({aten.bernoulli.out})


_ABS_IN_PLACE = (aten.abs_.default, aten._foreach_abs_.default)
# Kernels that check the cast into an integral output with words of their own.
_CAST_NAMED = {aten.ldexp_.default: "ldexp", aten.ldexp.out: "ldexp"}


def _check_cast(result_dtype, target: torch.Tensor, op) -> None:
    src = to_torch_dtype(result_dtype)
    if op in _ABS_IN_PLACE and target.is_complex():  # its magnitude would lose the phase
        raise RuntimeError("In-place abs is not supported for complex tensors.")
    if (src != target.dtype and not torch.can_cast(src, target.dtype)
            and op not in _DRAWS_INTO_OUT):
        integral = not (target.is_floating_point() or target.is_complex())
        what = integral and _CAST_NAMED.get(op) or f"result type {scalar_type_name(src)}"
        raise RuntimeError(
            f"{what} can't be cast to the desired output type {scalar_type_name(target.dtype)}")


# TensorIterator kernels PyTorch does not tag pointwise.
_UNTAGGED_POINTWISE = frozenset({"floor_divide_"})
# A kernel's dtype dispatch refusing (AT_DISPATCH's words), which comes after the iterator's
# checks; an op's own checks ("floor is not supported for complex inputs") come before them.
_DISPATCH_REFUSAL = re.compile(r'"\w+" not implemented for \'\w+\'')


# Comparisons compute in their operands' dtype but give bools: nothing to cast before.
_COMPARISONS = frozenset({"lt", "le", "gt", "ge", "eq", "ne", "less", "less_equal", "greater",
                          "greater_equal", "not_equal"})


def _iterated_dtype(func, args):
    """The dtype a pointwise kernel of (self, other) or of self computes in and returns."""
    self, other = args[0], args[1] if len(args) > 1 else None
    if (not isinstance(self, torch.Tensor)
            or func._schema.name.removeprefix("aten::").rstrip("_") in _COMPARISONS):
        return None
    if isinstance(other, (torch.Tensor, bool, int, float, complex)):
        return torch.result_type(self, other)
    return self.dtype


def _refuse_cast_first(func, args) -> None:
    """A pointwise in-place op whose kernel refuses its dtype: CPU's TensorIterator checks the
    cast of its result into self first (``int_t.fmod_(1j)`` cannot be cast before fmod
    refuses a complex). Checked once the op has failed, to cost nothing when it works."""
    other = args[1] if len(args) > 1 else None
    if isinstance(other, torch.Tensor):  # and the shapes before either
        shape = torch.broadcast_shapes(args[0].shape, other.shape)
        if shape != args[0].shape:
            raise RuntimeError(f"output with shape {list(args[0].shape)} doesn't match the "
                               f"broadcast shape {list(shape)}")
    dtype = _iterated_dtype(func, args)
    if dtype is not None and isinstance(other, (torch.Tensor, bool, int, float, complex)):
        _check_cast(dtype, args[0], func)


def _refuse_out_first(func, args, out: torch.Tensor) -> None:
    """The same for an out= form: its out's dtype is checked before the kernel's."""
    dtype = _iterated_dtype(func, args)
    if dtype is not None:
        refuse_out_dtype(func, True, args[0].dtype, out, dtype)
        _check_cast(dtype, out, func)


# Out= kernels that are not tagged pointwise but lay out an out they resize as their result
# (structured kernels' resize_out takes the result's strides or memory format): a channels_last
# input gives a channels_last out, a sorted transposed input a transposed out. (Their 1-d
# forms, and avg_pool3d's, adaptive pooling's 3-d ones, resize contiguous as their results are.)
_LAYS_OUT_AS_RESULT = {f"aten::{name}" for name in (
    "cat", "sort", "argsort", "polar", "complex", "glu", "mse_loss",
    "upsample_nearest2d", "_upsample_nearest_exact2d", "upsample_bilinear2d",
    "upsample_bicubic2d", "upsample_nearest3d", "_upsample_nearest_exact3d",
    "upsample_trilinear3d", "avg_pool2d", "adaptive_avg_pool2d", "adaptive_max_pool2d",
    "max_pool2d_with_indices", "max_pool3d_with_indices", "reflection_pad2d",
    "reflection_pad3d", "replication_pad2d", "replication_pad3d")}


# Out= kernels that resize their out with resize_, not resize_output (no deprecation
# warning), for the arguments given: mode's for a 0-d input only.
_RESIZES_QUIETLY = {
    **dict.fromkeys(("aten::addbmm", "aten::narrow_copy", "aten::multinomial", "aten::bernoulli",
                     "aten::log_sigmoid_forward"), lambda args: True),
    "aten::mode": lambda args: args[0].dim() == 0,
}


def _store(target: TpuTensor, value, op, resize: bool = False, strides=None,
           quiet: bool = False) -> None:
    """Write ``value`` into ``target`` with PyTorch's in-place shape and cast rules; an out=
    target (``resize``) of another shape is resized first, as PyTorch's resize_output does
    (to ``strides``, else contiguous; ``quiet``: without its deprecation warning)."""
    if isinstance(value, TpuTensor):
        value = read(value)
    elif isinstance(value, torch.Tensor):
        value = to_device(value)
    if resize and value.shape != tuple(target.shape):
        if target.numel() and not quiet:
            warnings.warn(  # CPU's words (resize_output's), which callers match
                f"An output with one or more elements was resized since it had shape "
                f"{list(target.shape)}, which does not match the required output shape "
                f"{list(value.shape)}. This behavior is deprecated, and in a future PyTorch "
                "release outputs will not be resized unless they have zero elements. You can "
                "explicitly reuse an out tensor t by resizing it, inplace, to zero elements "
                "with t.resize_(0).", UserWarning, stacklevel=2)
        views.resize(target, value.shape, strides)
    if value.shape != tuple(target.shape):
        raise RuntimeError(
            f"output with shape {list(target.shape)} doesn't match the broadcast shape "
            f"{list(value.shape)}"
        )
    want = to_jax_dtype(target.dtype)
    if value.dtype != want:
        _check_cast(value.dtype, target, op)
        value = cast(value, want)
    write(target, value)


# Out= composites with a branch for tensor subclasses (isTensorSubclassLike: ours) that
# assigns a functional result to the out's C++ reference, which never reaches the caller's
# tensor: their out is filled from the functional composite's result instead.
_REBINDING_OUTS = frozenset(getattr(aten.linalg_matrix_rank, overload) for overload in (
    "out", "out_tol_tensor", "atol_rtol_tensor_out", "atol_rtol_float_out"))
# matmul's out= composite writes a batched product through out.reshape(...) and copies it
# back unless that reshape aliases the out, which no view of ours does to ATen (our views
# share no C++ storage): the copy of a folded (batch x matrix) product onto the out failed.
# A batched matmul's out is filled from the functional result; 1-d and 2-d operands take the
# composite's kernels (its 1-d @ 2-d form resizes the out to 1 x n, warning, and squeezes it),
# called from Python: OpOverload.decompose would drop the kernels' C++ warnings.
COMPOSITE_OUTS = _REBINDING_OUTS | {aten.matmul.out}


def _batched_matmul_only(func, handler):
    products = {(1, 1): torch.dot, (2, 1): torch.mv, (2, 2): torch.mm}

    def routed(args, kwargs):
        a, b = args
        dims = a.dim(), b.dim()
        out = kwargs["out"]
        if dims[0] >= 3 and dims[1] == 1 and a.dtype == b.dtype != out.dtype:
            # CPU folds it into one matrix-vector product: addmv's out= kernel refuses it
            names = [scalar_type_name(t.dtype) for t in (out, a, b)]
            raise RuntimeError("addmv input tensors must have the same dtype, but got "
                               f"{names[0]}, {names[1]}, and {names[2]}")
        if max(dims) >= 3 or min(dims) == 0:  # (0-d: the functional composite's error)
            return handler(args, kwargs)
        if dims == (1, 2):
            return torch.mm(a.unsqueeze(0), b, out=out).squeeze_(0)
        return products[dims](a, b, out=out)

    return routed


def _linear_of_a_vector_as_cpu(func, handler):
    """CPU's linear_out takes matmul_out for a 1-d input (addmm_out's 2-d form needs a
    matrix): its out resizes through matmul's unsqueeze, warning, and is laid out anew."""
    def routed(args, kwargs):
        x, weight, bias = (*args, kwargs.get("bias"))[:3]
        if x.dim() != 1:
            return handler(args, kwargs)
        out = torch.matmul(x, weight.t(), out=kwargs["out"])
        return out if bias is None else out.add_(bias)

    return routed


def _normal_over_its_out(func, handler):
    """CPU's normal(Tensor mean, float std, out=) draws over the broadcast of the mean's and
    the out's shapes: a larger out keeps its shape, one that does not broadcast is refused."""
    def routed(args, kwargs):
        mean, out = args[0], kwargs["out"]
        shape = torch._C._infer_size(mean.shape, out.shape)  # (and its words for a mismatch)
        if shape != mean.shape:
            args = (mean.expand(shape), *args[1:])
        return handler(args, kwargs)

    return routed


# Out= forms whose CPU kernel takes a path of its own for some inputs: (func, handler) -> a
# handler taking that path there and the derived handler elsewhere.
_ROUTED_OUTS = {aten.matmul.out: _batched_matmul_only, aten.linear.out: _linear_of_a_vector_as_cpu,
                aten.normal.Tensor_float_out: _normal_over_its_out}


def derived_handler(func, functional_handler):
    """A handler for an in-place or out= aten op, or None if ``func`` is neither."""
    mutated = mutated_args(func)
    if not mutated or func.namespace != "aten":  # another library's: its own kernels
        return None
    is_out = any(a.kwarg_only for a in mutated) and not _inplace_name(func)
    functional = _out_functional(func) if is_out else _inplace_functional(func)
    if functional is None:
        return None
    if is_out:
        mutated = _out_args(func)
        if len(mutated_args(functional)) != len(mutated_args(func)) - len(mutated):
            return None  # a written input the functional form would not write
    rule = LOWERINGS.get(functional)
    if rule is not None and not rule.eager and not (mutated_args(functional) or rule.mutates):
        exe = strict.compile_rule(rule)
        compute = lambda args, kwargs: call_unwrapped(exe, args, kwargs)  # noqa: E731
    else:
        inner = functional_handler(functional)
        if inner is None and func in COMPOSITE_OUTS:
            inner = lambda args, kwargs: functional(*args, **kwargs)  # noqa: E731
        if inner is None:
            return None
        compute = inner
    compute = casting_number_first(func, checking_number(functional, compute))
    pointwise = torch.Tag.pointwise in functional.tags
    if is_out:
        # A factory's out= form (linspace.out, arange.out) computes in the out's dtype, as do
        # sums (_in_out_dtype); another op's own dtype argument (softmax's, a norm's) stays
        # the caller's.
        factory = any(a.name == "device" for a in functional._schema.arguments)
        in_out_dtype = (lambda out: True) if factory else partial(_in_out_dtype, func)
        # TensorIterator restrides an out it resizes as it lays out the functional result
        # (other kernels' differ: fft2's out stays contiguous where its result is not)
        lays_out = pointwise or func._schema.name in _LAYS_OUT_AS_RESULT
        laid_out = functional_handler(functional) if lays_out else None
        handler = _out_handler(func, compute, laid_out, [a.name for a in mutated],
                               in_out_dtype, pointwise, factory)
        route = _ROUTED_OUTS.get(func)
        return handler if route is None else route(func, handler)
    return _inplace_handler(func, _reordered(func, functional, compute),
                            _checks_overlap(func, functional), pointwise)


def _reordered(func, functional, compute):
    """``compute`` called with the functional's argument order where the in-place op names
    the same arguments in another (polygamma_(self, n) is polygamma(n, self))."""
    mine = [a.name for a in func._schema.arguments]
    theirs = [a.name for a in functional._schema.arguments]
    if mine == theirs or sorted(mine) != sorted(theirs):
        return compute

    def run(args, kwargs):
        named = dict(zip(mine, args, strict=False)) | kwargs
        return compute(tuple(named[n] for n in theirs if n in named), {})

    return run


def _inplace_name(func) -> bool:
    name = func._schema.name.split("::")[1]
    return name.endswith("_") or name.startswith("__i")


# In-place ops CPU lets write through a self-overlapping (expanded) tensor (threshold_: an
# idempotent write, its kernel says).
_OVERLAP_ALLOWED = {"fill_", "zero_", "_foreach_zero_", "masked_fill_", "index_fill_", "index_put_",
                    "_index_put_impl_", "tril_", "triu_", "fill_diagonal_", "threshold_"}


def _checks_overlap(func, functional) -> bool:
    name = func._schema.name.split("::")[1]
    returns = functional._schema.returns
    is_view = bool(returns) and returns[0].alias_info is not None
    return name not in _OVERLAP_ALLOWED and not is_view


def refuse_self_overlap(t) -> None:
    """CPU's error for writing through a tensor that repeats an element (an expanded one:
    PyTorch's has_internal_overlap is certain only where a stride 0 repeats; an empty one
    writes nothing)."""
    if isinstance(t, TpuTensor) and not t._direct and t.numel() and any(
            st == 0 and n > 1 for n, st in zip(t.shape, t.stride(), strict=True)):
        raise RuntimeError(
            "unsupported operation: more than one element of the written-to tensor refers "
            "to a single memory location. Please clone() the tensor before performing the "
            "operation.")


def refuse_partial_overlap(written: TpuTensor, inputs) -> None:
    """CPU's error (TensorIterator's) for an input sharing some, not all, of the memory an
    op writes: ``x[1:].copy_(x[:-1])`` would read elements it has already overwritten."""
    for x in inputs:
        if (isinstance(x, TpuTensor) and x is not written and x._storage is written._storage
                and _overlap(written, x) and _extent(x) != _extent(written)):
            raise RuntimeError(_OVERLAP)


def _extent(t: TpuTensor) -> tuple:
    """Where ``t``'s bytes start, how many, in which strides."""
    return t.storage_offset() * t.element_size(), t.numel() * t.element_size(), t.stride()


def _refuse_foreach_overlaps(args, self_overlap: bool) -> None:
    """A multi-tensor op's checks, as CPU's per-tensor loop makes them: each written tensor
    against itself (an expanded gradient) and against its own operands. (An optimizer step
    writes every parameter several times: a tensor that covers its storage, or an operand
    of another storage, is passed over without looking further.)"""
    written = args[0]
    lists = [a for a in args[1:] if isinstance(a, (list, tuple)) and len(a) == len(written)]
    singles = [a for a in args[1:] if type(a) is TpuTensor]
    for i, t in enumerate(written):
        if type(t) is not TpuTensor:
            continue
        if self_overlap and not t._direct:
            refuse_self_overlap(t)
        for x in [a[i] for a in lists] + singles:
            if type(x) is TpuTensor and x._storage is t._storage:
                refuse_partial_overlap(t, (x,))


# Ops whose kernels read a 0-d value of another device on the host (ATen's fill_ and
# index_fill_, and the functional forms that call them): the value's position and the
# overload taking it as a number.
_VALUE_READ = {aten.fill_.Tensor: (1, aten.fill_.Scalar),
               aten.index_fill_.int_Tensor: (3, aten.index_fill_.int_Scalar),
               aten.fill.Tensor: (1, aten.fill.Scalar),
               aten.index_fill.int_Tensor: (3, aten.index_fill.int_Scalar)}


def read_as_number(func, args, kwargs) -> tuple[bool, object]:
    """(True, the result) if ``func``'s kernel on a tensor of another device reads a 0-d tpu
    value as a number (``cpu_t.fill_(tpu_scalar)``, as on cuda) and it was run so."""
    at, by_number = _VALUE_READ.get(func, (None, None))
    if at is not None and isinstance(args[at], TpuTensor) and args[at].dim() == 0:
        return True, by_number(*args[:at], args[at].item(), *args[at + 1:], **kwargs)
    return False, None


def _written_elsewhere(func, args, kwargs, target: torch.Tensor):
    """An in-place op whose written tensor is not on tpu: cuda's device error, unless its
    kernel reads a 0-d tpu value as a number."""
    read, out = read_as_number(func, args, kwargs)
    if read:
        return out
    raise RuntimeError(f"{MIXED_DEVICES}, tpu:0 and {target.device}!")


def _inplace_handler(func, compute, checks_overlap: bool = False, pointwise: bool = False):
    written = [i for i, a in enumerate(func._schema.arguments)
               if a.alias_info is not None and a.alias_info.is_write]
    name = func._schema.name.split("::")[1]

    def handler(args, kwargs):
        for t in args[0] if isinstance(args[0], (list, tuple)) else (args[0],):
            if not isinstance(t, TpuTensor):  # a CPU scalar may be read, never written
                return _written_elsewhere(func, args, kwargs, t)
        if isinstance(args[0], (list, tuple)):  # _foreach_*_: each tensor as its own op's
            _refuse_foreach_overlaps(args, checks_overlap)
        else:
            if checks_overlap:
                refuse_self_overlap(args[0])
            if name in _NO_INPUT_OVERLAP and isinstance(args[0], TpuTensor):
                _refuse_input_overlap(name, args, kwargs)
            if pointwise and isinstance(args[0], TpuTensor):
                refuse_partial_overlap(args[0], (*args[1:], *kwargs.values()))
        if meta_errors.has_cpu_check(func):  # (the functional form's checks differ)
            meta_errors.check_as_cpu(func, args, kwargs)
        try:
            out = compute(args, kwargs)
        except NotImplementedError as e:
            if (pointwise or name in _UNTAGGED_POINTWISE) and _DISPATCH_REFUSAL.match(str(e)):
                _refuse_cast_first(func, args)
            raise
        if len(written) > 1:  # _fused_adam_, _amp_update_scale_: the functional returns
            for i, values in zip(written, out, strict=True):  # each written argument in order
                if isinstance(args[i], (list, tuple)):
                    for t, v in zip(args[i], values, strict=True):
                        _store(t, v, func)
                else:
                    _store(args[i], values, func)
            return args[0] if func._schema.returns else None
        self = args[0]
        if isinstance(self, (list, tuple)):  # _foreach_*_
            for t, v in zip(self, out, strict=True):
                _store(t, v, func)
            # A foreach op has no ADInplaceOrView kernel: CPU's runs each tensor's in-place
            # op, which counts the write (autograd then sees a saved tensor changed, and a
            # written view's history is rebuilt), and cuda's counts it itself.
            torch._C._increment_version([t for t in self if not t.is_inference()])
            return None
        _store(self, out, func)
        return self

    return handler


# In-place indexed writes whose CPU kernels refuse a source or an index sharing any memory
# with self (ATen's assert_no_overlap), as the out= forms below do.
_NO_INPUT_OVERLAP = {"index_put_", "_index_put_impl_", "index_copy_", "index_add_",
                     "index_reduce_", "scatter_", "scatter_add_", "scatter_reduce_", "put_"}


def _refuse_input_overlap(name: str, args, kwargs) -> None:
    self, rest = args[0], [*args[1:], *kwargs.values()]
    if name in ("index_put_", "_index_put_impl_") and _masked_fill_path(args, kwargs):
        return  # CPU's index_put_ is then masked_fill_, which checks nothing of this
    for x in rest:
        for t in x if isinstance(x, (list, tuple)) else (x,):
            if isinstance(t, TpuTensor) and _overlap(self, t):
                raise RuntimeError(_OVERLAP)


def _masked_fill_path(args, kwargs) -> bool:
    """ATen's canDispatchToMaskedFill: one bool/uint8 mask, a one-element value, no
    accumulate."""
    indices, value = args[1], args[2]
    accumulate = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
    masks = [i for i in indices if i is not None]
    return (not accumulate and value.numel() == 1 and len(masks) == 1
            and masks[0].dtype in (torch.bool, torch.uint8))


# Out= forms whose CPU kernels refuse an out= sharing any memory with an input (ATen's
# assert_no_overlap; elementwise ops allow an out= that is exactly an input).
_NO_OVERLAP = {aten.gather.out, aten.take.out, aten.cat.out, aten.index_select.out}
_OVERLAP = ("unsupported operation: some elements of the input tensor and the written-to "
            "tensor refer to a single memory location. Please clone() the tensor before "
            "performing the operation.")


def _overlap(a: TpuTensor, b: TpuTensor) -> bool:
    """Whether two tensors' memory overlaps, where ATen can tell (both dense)."""
    if a._storage is not b._storage or not a.numel() or not b.numel():
        return False
    if not (is_dense(a.shape, a.stride()) and is_dense(b.shape, b.stride())):
        return False
    start_a, start_b = a.storage_offset() * a.element_size(), b.storage_offset() * b.element_size()
    return (start_a < start_b + b.numel() * b.element_size()
            and start_b < start_a + a.numel() * a.element_size())


def _dtype_of(value) -> torch.dtype:
    return value.dtype if isinstance(value, torch.Tensor) else to_torch_dtype(value.dtype)


_SUMS = frozenset({"aten::sum", "aten::nansum", "aten::prod", "aten::cumsum", "aten::cumprod"})


def _in_out_dtype(func, out: torch.Tensor) -> bool:
    """CPU's sums (infer_dtype_from_optional) compute in their out's dtype, the input cast."""
    if func._schema.name == "aten::mean":  # mean.dtype_out checks its out against its input
        return func._overloadname == "out" and (out.is_floating_point() or out.is_complex())
    return func._schema.name in _SUMS


def _out_device_error(func, self, out) -> str:
    if func._schema.name == "aten::nonzero":  # its accelerator kernels' own check
        return (f"expected self and out to be on the same device, but got out on {out.device} "
                f"and self on {self.device}")
    return f"Expected out tensor to have device {DEVICE}, but got {out.device} instead"


# The range factories' CPU kernels resize an out= only when its element count differs: one of
# another shape and the same count keeps its shape, filled in its element order.
_KEEP_COUNT = frozenset({"aten::arange", "aten::linspace", "aten::logspace", "aten::range"})


def _fit_factory_out(func, out: TpuTensor, value):
    """``value`` as a factory's CPU kernel leaves it in ``out``, which it resizes with
    ``resize_`` (not resize_output: no deprecation warning; arange warns in its own words)."""
    if isinstance(value, TpuTensor):
        value = read(value)
    elif isinstance(value, torch.Tensor):
        value = to_device(value)
    name = func._schema.name
    if name in _KEEP_COUNT and value.size == out.numel():
        if isinstance(value, Pending):  # (fused eager: rare enough to run what it needs)
            value = value.force()
        return value.reshape(tuple(out.shape))
    if value.shape != tuple(out.shape):
        if name == "aten::arange" and out.numel():
            warnings.warn(
                f"The number of elements in the out tensor of shape {list(out.shape)} is "
                f"{out.numel()} which does not match the computed number of elements "
                f"{value.size}. Note that this may occur as a result of rounding error. The "
                f"out tensor will be resized to a tensor of shape ({value.size},).",
                UserWarning, stacklevel=3)
        views.resize(out, value.shape)
    return value


def _out_handler(func, compute, laid_out, out_names, in_out_dtype, pointwise: bool,
                 factory: bool):
    """``compute``: the functional op's values; ``laid_out``: its dispatched handler, whose
    results have CPU's layout, for outs to be resized (``torch.empty(0)``) where CPU lays them
    out so. A LAPACK kernel's outs resize column-major (linalg_layout.py)."""
    no_overlap = func in _NO_OVERLAP
    returns_nothing = not func._schema.returns  # out: Tensor[] (split_with_sizes_copy)
    column_major = out_layout(func, out_names)  # LAPACK kernels' outs
    restride_empty = restrides_empty(func)
    quietly = _RESIZES_QUIETLY.get(func._schema.name)
    untagged_pointwise = func._schema.name.removeprefix("aten::") + "_" in _UNTAGGED_POINTWISE

    def handler(args, kwargs):
        kwargs = dict(kwargs)
        outs = []
        for name in out_names:
            out = kwargs.pop(name)
            outs += out if isinstance(out, (list, tuple)) else [out]
        self = next((x for x in tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)), None)
        self_dtype = None if self is None else self.dtype
        refuse_out_dtype_first(func, self_dtype, outs[0])
        for out in outs:
            if not isinstance(out, TpuTensor):
                raise RuntimeError(_out_device_error(func, self, out))
        if no_overlap and any(_overlap(out, x) for out in outs for x in tree_leaves((args, kwargs))
                              if isinstance(x, TpuTensor)):
            raise RuntimeError(_OVERLAP)
        for out in outs if pointwise else ():
            refuse_partial_overlap(out, (*args, *kwargs.values()))
        if len(outs) == 1 and in_out_dtype(outs[0]):
            kwargs.setdefault("dtype", outs[0].dtype)
        leaves = tree_leaves((args, kwargs))
        resizing = laid_out is not None and any(t.numel() == 0 for t in outs)
        checks_before = deferred_checks.count()
        try:
            result = (laid_out if resizing else compute)(args, kwargs)
        except NotImplementedError as e:
            if (len(outs) == 1 and (pointwise or untagged_pointwise)
                    and _DISPATCH_REFUSAL.match(str(e))):
                _refuse_out_first(func, args, outs[0])
            raise
        if not isinstance(result, (list, tuple)):
            result = [result]
        if laid_out is not None and not resizing and any(
                tuple(t.shape) != tuple(v.shape) for t, v in zip(outs, result, strict=True)):
            # a non-empty out of another shape is resized too (deprecated), and restrided
            resizing = True
            result = laid_out(args, kwargs)
            result = result if isinstance(result, (list, tuple)) else [result]
        for i, (t, v) in enumerate(zip(outs, result, strict=True)):
            try:
                refuse_out_dtype(func, pointwise, self_dtype, t, _dtype_of(v), position=i)
            except (RuntimeError, NotImplementedError):
                # CPU checks the op's values (normal's std >= 0) before its out's dtype: a
                # check fused eager recorded for it is run first, and raises if it fails.
                if deferred_checks.count() > checks_before:
                    flush_pending()
                raise
        inputs = {id(x._storage) for x in leaves if isinstance(x, TpuTensor)}
        quiet = quietly is not None and quietly(args)
        if resizing:
            strides = [v.stride() for v in result]
        elif column_major is not None:
            strides = column_major(args, kwargs, [tuple(v.shape) for v in result])
        else:
            strides = [None] * len(outs)
        for t, v, stride in zip(outs, result, strides, strict=True):
            if torch._debug_has_internal_overlap(t) == 1:  # MemOverlap::Yes (an expand)
                raise RuntimeError(
                    "unsupported operation: more than one element of the written-to tensor "
                    "refers to a single memory location. Please clone() the tensor before "
                    "performing the operation.")
            if id(t._storage) in inputs and tuple(v.shape) != tuple(t.shape):
                # resizing an output that is also an input would destroy the input
                raise RuntimeError(_OVERLAP)
            if restride_empty and stride is not None and not t.numel() \
                    and tuple(v.shape) == tuple(t.shape):
                views.resize(t, t.shape, stride)
            _store(t, _fit_factory_out(func, t, v) if factory else v, func, resize=True,
                   strides=stride, quiet=quiet)
        if returns_nothing:
            return None
        return outs[0] if len(outs) == 1 else tuple(outs)

    return handler


def rule_with_mutations(func, compute, names: tuple[str, ...] = ()):
    """A rule for an op that mutates inputs (batch norm's running stats) returns its outputs
    followed by the new values of those inputs; write them back and return the outputs."""
    schema = func._schema
    n_out = len(schema.returns)
    positions = [(i, a) for i, a in enumerate(schema.arguments)
                 if a.name in names or a.alias_info is not None and a.alias_info.is_write]

    def handler(args, kwargs):
        out = compute(args, kwargs)
        targets = []
        for i, a in positions:
            t = kwargs.get(a.name) if a.kwarg_only else (args[i] if i < len(args) else None)
            if t is not None:
                targets.append(t)
        for t, v in zip(targets, out[n_out:], strict=False):
            _store(t, v, func)
        return wrap_out(tuple(out[:n_out]))

    return handler
