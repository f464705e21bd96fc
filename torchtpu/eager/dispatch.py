"""Routing every ATen op that reaches ``TpuTensor.__torch_dispatch__``.

Each op is resolved once to a handler, in this order: a few special ops (copies, scalars),
views (aliasing the base), a lowering rule, an in-place or ``out=`` form derived from its
functional op, a ``torch._decomp`` decomposition, a CompositeImplicit decomposition, and
finally the CPU fallback or a clear error.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import jax
import torch
from torch._prims_common import suggest_memory_format
from torch.utils._pytree import tree_map

from ..ops.decomps import DECOMPOSITIONS
from ..ops.registry import LOWERINGS
from ..runtime import code_limit, memory
from ..runtime.execute import Pending, unrecorded
from ..runtime.platform import check_device_index
from ..tensor import DEVICE, TpuTensor, is_dense, read, set_executor, with_layout
from ..tensor import wrap as wrap_tensor
from . import (
    bounds,
    conv_checks,
    fallback,
    fft_layout,
    iterator_layout,
    linalg_layout,
    meta_errors,
    mutation,
    number_checks,
    special,
    strict,
    views,
)
from .values import MIXED_DEVICES, unwrap, wrap_out

Handler = Callable[[tuple, dict], object]

_STRICT: dict = {}
_DEBUG: dict = {}
_FUSED: dict = {}
_TABLES = {"strict": _STRICT, "debug": _DEBUG, "fused": _FUSED}
_table = _STRICT


def dispatch(func, args, kwargs):
    if code_limit.due:
        code_limit.release_programs()
    handler = _table.get(func)
    if handler is None:
        handler = _table[func] = resolve(func)
    try:
        return handler(args, kwargs or {})
    except jax.errors.JaxRuntimeError as e:
        memory.raise_as_torch(e)
    except RuntimeError as e:
        if func in _COMPOSITE_ON_CUDA and str(e).startswith(MIXED_DEVICES):
            meta_errors.check_as_cpu(func, args, kwargs)
        if str(e).startswith(MIXED_DEVICES) and str(e).endswith("!"):
            if not isinstance(args[0], TpuTensor):  # cpu_t.index_fill(..., tpu_scalar)
                read, out = mutation.read_as_number(func, args, kwargs or {})
                if read:
                    return out
            raise RuntimeError(f"{e} {_checking(func, args, kwargs)}") from None
        raise


# Composite kernels on cuda: their own checks run before the device checks of the ops they
# call (F.embedding(cpu_weight, cuda_float_indices) names the indices' dtype).
_COMPOSITE_ON_CUDA = {torch.ops.aten.embedding.default}


def _checking(func, args, kwargs) -> str:
    """What cuda's device check adds: the argument and the op (its kernel, there)."""
    host = _HOST_INDICES.get(func)  # indices may be on the CPU: not the culprit
    arguments = [(a.name, kwargs.get(a.name) if a.kwarg_only else args[i])
                 for i, a in enumerate(func._schema.arguments)
                 if (a.kwarg_only or i < len(args)) and i != host]
    for name, value in arguments:
        tensors = value if isinstance(value, (list, tuple)) else [value]
        if any(isinstance(t, torch.Tensor) and not isinstance(t, TpuTensor) and t.dim()
               for t in tensors):
            return f"(when checking argument for argument {name} in method {func})"
    return f"(when checking argument in method {func})"


set_executor(dispatch)


class _Refusing(dict):
    def __init__(self, handler):
        super().__init__()
        self.handler = handler

    def get(self, func, default=None):
        return lambda args, kwargs: self.handler()


def refuse_in_forked_child(raise_error) -> None:
    """After os.fork(), in the child: every op calls ``raise_error`` (XLA's runtime and its
    threads stay behind in the parent)."""
    global _table
    _table = _Refusing(raise_error)
    _TABLES.update(strict=_table, debug=_table, fused=_table)


def use_table(mode: str) -> None:
    global _table
    _table = _TABLES[mode]


def resolve(func) -> Handler:
    """The handler for ``func`` in the current mode."""
    if _table is _DEBUG:
        from .debug import attributed

        return attributed(func, _strict_handler(func))
    if _table is _FUSED:
        return _with_host_indices(func, _build(func, fused=True))
    return _strict_handler(func)


def _strict_handler(func) -> Handler:
    handler = _STRICT.get(func)
    if handler is None:
        handler = _STRICT[func] = _with_host_indices(func, bounds.checked(func, _build(func)))
    return handler


def _build(func, fused: bool = False) -> Handler:
    handler = _build_here(func, fused)
    handler = _drawing_on_the_host_with_a_generator(func, handler)
    if func in _CHECKS_ERRORS:
        handler = _checking_errors(handler, _CHECKS_ERRORS[func])
    if func in _UNINITIALIZED:
        handler = _filled_if_deterministic(handler)
    if func in _COPIED_IF_STRIDED:
        handler = _warning_of_copies(handler, _COPIED_IF_STRIDED[func])
    return _on_requested_device(func, handler) if func in _TEMPLATE_FACTORIES else handler


def _drawing_on_the_host_with_a_generator(func, inner: Handler) -> Handler:
    """A random op handed a generator (a tpu one, generator.py, or a CPU one) draws on the
    host from it and moves the result: CPU's values for the same seed, and the generator's
    state moves on as on CPU. (Without one, ops draw on the device from tpu's stream.)"""
    at = next((i for i, a in enumerate(func._schema.arguments) if a.name == "generator"), None)
    if at is None:
        return inner

    def handler(args, kwargs):
        g = args[at] if at < len(args) else kwargs.get("generator")
        if g is None:
            return inner(args, kwargs)
        if "device" in kwargs:  # a factory (randperm): made on the host, then moved
            kwargs = {**kwargs, "device": torch.device("cpu")}
        return fallback.run_on_cpu(func, args, kwargs, reason="host_draw")

    return handler


# The *_ex linear-algebra ops: with check_errors=True, CPU raises on their info as the
# non-_ex op does (their rules are traced: the check reads the info afterwards).
_CHECKS_ERRORS = {
    torch.ops.aten.linalg_cholesky_ex.default: "linalg.cholesky_ex",
    torch.ops.aten.linalg_inv_ex.default: "linalg.inv_ex",
    torch.ops.aten.linalg_lu_factor_ex.default: "torch.linalg.lu_factor_ex",
    torch.ops.aten._linalg_solve_ex.default: "torch.linalg.solve_ex",
    torch.ops.aten.linalg_ldl_factor_ex.default: "torch.linalg.ldl_factor_ex",
}


def _checking_errors(inner: Handler, api_name: str) -> Handler:
    def handler(args, kwargs):
        if not kwargs.get("check_errors"):
            return inner(args, kwargs)
        out = inner(args, {**kwargs, "check_errors": False})
        torch._linalg_check_errors(out[-1], api_name, is_matrix=args[0].dim() == 2)
        return out

    return handler


_UNINITIALIZED = {torch.ops.aten.empty.memory_format, torch.ops.aten.empty_strided.default,
                  torch.ops.aten.empty_like.default, torch.ops.aten.new_empty.default,
                  torch.ops.aten.new_empty_strided.default}


def _filled_if_deterministic(inner: Handler) -> Handler:
    """Under ``torch.use_deterministic_algorithms(True)`` CPU and cuda fill new uninitialized
    memory (``torch.utils.deterministic.fill_uninitialized_memory``) with NaN, an integer's
    largest value or True, so that reading it shows."""

    def handler(args, kwargs):
        out = inner(args, kwargs)
        if (torch.are_deterministic_algorithms_enabled()
                and torch.utils.deterministic.fill_uninitialized_memory):
            if out.is_floating_point() or out.is_complex():
                value = float("nan")
            else:
                value = True if out.dtype == torch.bool else torch.iinfo(out.dtype).max
            # Not out.fill_: a PrivateUse1 factory kernel (torch.tensor(..., device="tpu"))
            # runs with the Python key excluded, where fill_ has no tpu kernel.
            dispatch(torch.ops.aten.fill_.Scalar, (out, value), {})
        return out

    return handler


def functional_handler(func) -> Handler | None:
    """A handler computing ``func`` if it has a rule or a decomposition, else None."""
    if func in LOWERINGS or func in DECOMPOSITIONS:
        return _table[func] if func in _table else resolve(func)
    return None


def _build_here(func, fused: bool) -> Handler:
    h = special.HANDLERS.get(func)
    if h is not None:
        return h
    rule = LOWERINGS.get(func)
    composite = torch._C._dispatch_has_kernel_for_dispatch_key(
        func.name(), "CompositeImplicitAutograd")
    # Maybe-aliasing composites (to.dtype, reshape) decompose into real views or copies.
    if (func.is_view or func in views.UNSAFE_VIEWS) and (rule is not None or not composite):
        return views.handler(func)
    if func in views.INPLACE:
        return views.inplace_handler(func)
    if rule is not None:
        if mutation.mutated_args(func) or rule.mutates:
            inner = _rule_handler(rule, fused, wrap=False)
            return _following_memory_format(
                func, mutation.rule_with_mutations(func, inner, rule.mutates))
        if func.overloadpacket in _LIKE:
            return number_checks.checking_number(func, _keeping_layout(_rule_handler(rule, fused)))
        if func in _STRIDE_ARG:
            return _strided(_rule_handler(rule, fused), _STRIDE_ARG[func])
        if func in _LU_OF_TRANSPOSE:
            return _factoring_a_itself(_rule_handler(rule, fused))
        if func in _HOST_ARGS:
            return _taking_host_arguments(_rule_handler(rule, fused), _HOST_ARGS[func])
        if func is aten.as_strided_scatter.default:
            return _scattering_in_memory_order(_rule_handler(rule, fused))
        if func is aten.nonzero.default:
            return _in_columns(_rule_handler(rule, fused))
        if func in fft_layout.FFT_OPS:
            return fft_layout.laid_out_as_cpu(func, _rule_handler(rule, fused))
        return number_checks.checking_number(
            func, _following_memory_format(func, _rule_handler(rule, fused)))
    derived = mutation.derived_handler(func, functional_handler)
    if derived is not None:
        return derived
    decomp = DECOMPOSITIONS.get(func)
    if decomp is not None:
        return _following_memory_format(func, _decomposed(func, decomp))
    if composite:
        return lambda args, kwargs: func.decompose(*args, **kwargs)
    if torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), "CompositeExplicitAutograd"):
        # A device-generic kernel (a torch.library op's Python body, as cuda runs it): its
        # ops come back here.
        return special.explicit_kernel(func)
    if func.namespace != "aten" and torch._C._dispatch_has_kernel_for_dispatch_key(
            func.name(), "PrivateUse1"):
        # A library's kernel for this device (FSDP2's copy-in ops, registered for cuda and
        # PrivateUse1 alike): its ops come back here.
        return lambda args, kwargs: func.redispatch(_PRIVATEUSE1, *args, **kwargs)
    return fallback.handler(func)


_PRIVATEUSE1 = torch._C.DispatchKeySet(torch._C.DispatchKey.PrivateUse1)


aten = torch.ops.aten

# Decompositions that skip checks their meta kernels (or CPU's, meta_errors.py) make:
# pixel_shuffle's view would fail on a channel count it cannot split, binary cross-entropy
# would take integer targets. (Padding's checks are all CPU's own, in nn_checks.py.)
_CHECKED_BY_META = {aten.pixel_shuffle.default, aten.pixel_unshuffle.default,
                    aten.binary_cross_entropy.default,
                    aten.binary_cross_entropy_with_logits.default}


def _decomposed(func, decomp) -> Handler:
    if func in _CHECKED_BY_META:
        return _checked_by_meta(func, decomp)
    if meta_errors.has_cpu_check(func):
        return _checked_as_cpu(func, decomp)
    return lambda args, kwargs: decomp(*args, **kwargs)


def _checked_by_meta(func, decomp) -> Handler:
    def handler(args, kwargs):
        meta_errors.check_as_cpu(func, args, kwargs)
        try:
            func(*[views.meta_like(a) for a in args], **kwargs)
        except RuntimeError as e:
            raise meta_errors.cpu_wording(func, e, args) or e from None
        return decomp(*args, **kwargs)

    return handler


def _checked_as_cpu(func, decomp) -> Handler:
    # CPU's checks only (of dtypes and numbers): running the meta kernel costs each call.
    def handler(args, kwargs):
        meta_errors.check_as_cpu(func, args, kwargs)
        return decomp(*args, **kwargs)

    return handler


# Advanced indexing takes index tensors on the host, as on cuda (x[cpu_indices] = v): the
# position of the indices argument. Other indexing ops (gather, index_select) refuse them.
_HOST_INDICES = {aten.index.Tensor: 1, aten.index_put.default: 1, aten.index_put_.default: 1,
                 aten._index_put_impl_.default: 1, aten._unsafe_index.Tensor: 1,
                 aten._unsafe_index_put.default: 1}


def _with_host_indices(func, inner: Handler) -> Handler:
    at = _HOST_INDICES.get(func)
    if at is None:
        return inner

    def handler(args, kwargs):
        indices = args[at]
        if type(args[0]) is torch.Tensor and args[0].device.type == "cpu":
            # cpu_tensor[tpu_indices] = v moves the indices to the tensor's device as cuda's
            # are; reading cpu_tensor[tpu_indices] is refused, as ATen's index refuses cuda's.
            if func is aten.index.Tensor:
                raise RuntimeError("indices should be either on cpu or on the same device as "
                                   "the indexed tensor (cpu)")
            on_host = [i.cpu() if isinstance(i, TpuTensor) else i for i in indices]
            rest = (*args[at + 1:], *kwargs.values())
            if not any(isinstance(a, TpuTensor) for a in rest):
                return func(*args[:at], on_host, *args[at + 1:], **kwargs)
        if any(type(i) is torch.Tensor and i.device.type == "cpu" for i in indices):
            moved = [i.to(DEVICE) if type(i) is torch.Tensor and i.device.type == "cpu" else i
                     for i in indices]
            args = (*args[:at], moved, *args[at + 1:])
        return inner(args, kwargs)

    return handler


_LIKE = {aten.empty_like, aten.zeros_like, aten.ones_like, aten.full_like, aten.rand_like,
         aten.randn_like, aten.randint_like}
# Factories whose tensor argument is only a template (shape, dtype, layout): one asked for
# another device (t.new_zeros(2, device="meta"), empty_like(t, device="cpu")) is made there.
_TEMPLATE_FACTORIES = {op for packet in (*_LIKE, aten.new_empty, aten.new_empty_strided,
                                         aten.new_zeros, aten.new_ones, aten.new_full)
                       for op in (getattr(packet, n) for n in packet.overloads())}


def _on_requested_device(func, inner: Handler) -> Handler:
    def handler(args, kwargs):
        device = kwargs.get("device")
        if device is None or torch.device(device).type == DEVICE.type:
            check_device_index(device)
            return inner(args, kwargs)
        return func(views.meta_like(args[0]), *args[1:], **kwargs)

    return handler
_KEEPS = (None, torch.preserve_format, torch.contiguous_format)


def _keeping_layout(inner: Handler) -> Handler:
    """*_like factories lay their result out as PyTorch does (preserve: a channels_last input
    gives a channels_last result)."""

    def handler(args, kwargs):
        out = inner(args, kwargs)
        x, fmt = args[0], kwargs.get("memory_format")
        if type(x) is TpuTensor and x._direct and fmt in _KEEPS:
            return out
        stride = views.layout_for(x, fmt)
        return out if out.stride() == stride else with_layout(read(out), stride)

    return handler


# Factories taking strides (AccumulateGrad gives a grad its parameter's layout through
# new_empty_strided): a dense layout keeps the elements in its memory order; one with gaps or
# overlaps is a view of a storage as large as it reaches, as PyTorch's.
_STRIDE_ARG = {aten.empty_strided.default: 1, aten.new_empty_strided.default: 2}


def _strided(inner: Handler, at: int) -> Handler:
    def handler(args, kwargs):
        out = inner(args, kwargs)
        stride = tuple(args[at])
        if out.stride() == stride:
            return out
        if is_dense(out.shape, stride) or len(stride) != out.dim():
            return with_layout(read(out), stride)
        return views.fresh_strided(read(out).dtype, out.shape, stride)

    return handler


def _channels_last(x) -> bool:
    """A tensor PyTorch's kernels lay out as channels_last: dense so, or a slice of one
    (``x[:, ::2]``: c10's suggest_memory_format reads the strides' order)."""
    # A channels_last tensor is never direct: a direct one is contiguous.
    if type(x) is not TpuTensor or x._direct or x.dim() not in _CHANNELS_LAST:
        return False
    if x.is_contiguous():
        # Also channels_last-contiguous when size-1 dimensions make it both: c10's
        # suggest_memory_format tells them apart by those dimensions' strides.
        return (x.is_contiguous(memory_format=_CHANNELS_LAST[x.dim()])
                and _strides_like_channels_last(x.shape, x.stride()))
    return (x.is_contiguous(memory_format=_CHANNELS_LAST[x.dim()])
            or _strides_like_channels_last(x.shape, x.stride()))


def _strides_like_channels_last(shape, strides) -> bool:
    """c10's is_channels_last_strides_2d/3d: channels innermost, then the spatial dims from
    the last, then the batch (ambiguous strides count as contiguous)."""
    if strides[1] == 0:
        return False
    low = 0
    for d in (1, 3, 2, 0) if len(shape) == 4 else (1, 4, 3, 2, 0):
        if shape[d] == 0 or strides[d] < low or (d == 0 and low == strides[1]):
            return False
        low = strides[d] * (shape[d] if shape[d] > 1 else 1)
    return True


def _out_of_order(x) -> bool:
    """Some dimension strides further than one before it (broadcasts aside): a transpose,
    channels_last, or a slice of one, whose order TensorIterator's outputs take. Past its
    contiguity check (which skips them), a size-1 dimension's stride counts too, as the
    iterator sorts by it: an N1HW slice of a channels_last tensor gives channels_last
    results."""
    if type(x) is not TpuTensor or x._direct or x.is_contiguous():
        return False
    before = None
    for s in x.stride():
        if s:
            if before is not None and s > before:
                return True
            before = s
    return False


def _permuted(x) -> bool:
    """A dense tensor in another order than contiguous (a transpose, channels_last)."""
    return (type(x) is TpuTensor and not x._direct and not x.is_contiguous()
            and is_dense(x.shape, x.stride()))


def _following_memory_format(func, inner: Handler) -> Handler:
    """A rule's results laid out as PyTorch lays them out when an input is channels_last
    (elementwise, convolution, normalisation and pooling kernels keep it), an elementwise
    op's input is in any other order (a transpose: TensorIterator follows it), attention's
    query is permuted, or always for a factorization (LAPACK's column-major results):
    PyTorch's meta kernel on inputs of the same strides says how. Other inputs take the
    plain path: their results are contiguous."""
    if func in _CONTIGUOUS_RESULT:  # (a decomposition's follows its pointwise ops': undone)
        return inner if func in LOWERINGS else lambda a, k: _contiguous(inner(a, k))
    follows = (_out_of_order if torch.Tag.pointwise in func.tags or func in _FOLLOWING_ORDER
               else _channels_last)
    always = func in _LAPACK_ORDER
    laid_out = _LAID_OUT_BY.get(func, func)
    # (as its out= form resizes its outs, where linalg_layout.py knows it)
    lapack = linalg_layout.result_layout(func) if always else None
    # A pointwise result's layout as CPU's iterator computes it (a meta kernel, a Python
    # reference here, costs ~10x as much and misses size-1 dimensions).
    iterated = (iterator_layout.by_operands(func) if (torch.Tag.pointwise in func.tags
                                                       or func in _ITERATED)
                and func not in _LAID_OUT_BY else None)
    unit_strides = iterator_layout.by_unit_strides(iterated) if iterated else None

    def handler(args, kwargs):
        out = inner(args, kwargs)
        if lapack is not None:
            return _laid_out_as(out, lapack(args, kwargs, out))
        unbatched = func in _AS_A_BATCH_OF_ONE and _unbatched_channels_last_3d(args[0])
        if not (always or unbatched or _follows(func, follows, args)
                or not all(args[i].is_contiguous() for i in _QUERY_LAYOUT.get(func, ()))):
            meta = unit_strides and unit_strides(args)
            return out if meta is None else _laid_out_as(out, meta)
        meta = iterated and iterated(args)
        if meta is not None:
            return _laid_out_as(out, meta)
        try:
            meta = laid_out(*tree_map(views.meta_like, args),
                            **tree_map(views.meta_like, kwargs))
        except (NotImplementedError, RuntimeError):  # no meta kernel: keep what we have
            return out
        if func is aten.convolution.default:
            if 0 in args[0].shape[:2]:
                return out  # CPU's _convolution answers an empty batch with a plain view
            # The meta kernel does not pick CPU's backend: CPU's (mkldnn's, and its 2-d slow
            # path's) result is channels_last when the input or the weight is (its only
            # arguments that can be; by suggest_memory_format, which a channels_last-contiguous
            # tensor with odd size-1 strides is not); the 3-d slow kernels' is contiguous.
            keeps = (any(_strides_like_channels_last(t.shape, t.stride()) for t in args[:2])
                     and conv_checks.keeps_channels_last(*args[:2], *args[3:4], *args[5:]))
            meta = meta.to(memory_format=_CHANNELS_LAST[meta.dim()] if keeps
                           else torch.contiguous_format)
        if unbatched:
            meta = tuple(m.unsqueeze(0).contiguous(memory_format=torch.channels_last_3d)
                         .squeeze(0) for m in meta)
        return _laid_out_as(out, meta)

    return handler


def _contiguous(out):
    if isinstance(out, tuple):
        return tuple(_contiguous(o) for o in out)
    return out if out.is_contiguous() else wrap_tensor(read(out))


def _follows(func, follows, args) -> bool:
    if func is aten.index.Tensor:  # its input's order, or its indices'
        return follows(args[0]) or any(i is not None and not i.is_contiguous() for i in args[1])
    return any(follows(x) for x in _flat(args))


# CPU's 3-d max pooling runs an unbatched input that is channels_last_3d as a batch of one
# (c10's is_contiguous, not suggest_memory_format, which calls it contiguous) and returns that
# batch's results, channels_last_3d; the meta kernel's are contiguous.
_AS_A_BATCH_OF_ONE = {aten.max_pool3d_with_indices.default}


def _unbatched_channels_last_3d(x) -> bool:
    if type(x) is not TpuTensor or x._direct or x.dim() != 4 or x.is_contiguous():
        return False
    expected = 1
    for d in (0, 3, 2, 1):  # channels innermost, then width, height, depth
        if x.shape[d] != 1:
            if x.stride(d) != expected:
                return False
            expected *= x.shape[d]
    return True


_CHANNELS_LAST = {4: torch.channels_last, 5: torch.channels_last_3d}


def _flat(args):
    """An op's arguments, a list's items in its place (cat's tensors): ATen's schemas nest no
    deeper. (pytree's walk costs ~10x this on every op.)"""
    for a in args:
        if type(a) is list or type(a) is tuple:
            yield from a
        else:
            yield a


# A copy of their first input with a part written: laid out as it (CPU clones it).
_COPIES_OF_INPUT = {aten.slice_scatter.default, aten.select_scatter.default,
                    aten.diagonal_scatter.default, aten.copy.default}
# Not tagged pointwise, but TensorIterator kernels on CPU.
_ITERATED = {aten.hardswish.default, aten.complex.default, aten.polar.default,
             aten.floor_divide.default, aten.rsub.Tensor, aten.hardtanh_backward.default,
             aten.leaky_relu_backward.default, aten.hardsigmoid_backward.default,
             aten.hardswish_backward.default, aten.mish_backward.default,
             aten.softshrink_backward.default, aten.hardshrink_backward.default}
# Not tagged pointwise, but CPU's kernels (an empty_like of the input, or TensorIterator)
# lay their results out in their input's order, as the meta kernels do.
_FOLLOWING_ORDER = {*_COPIES_OF_INPUT, *_ITERATED, aten.addr.default, aten.sort.default,
                    aten.sort.stable, aten.flip.default, aten.index.Tensor,
                    aten.index_put.default, aten.put.default, aten.native_dropout.default,
                    aten.fill.Tensor, *iterator_layout.INTO_EMPTY_LIKE}


def _in_the_inputs_format(func, at: int):
    """CPU's reflection and replication padding (and their backwards, into a zeros_like of
    the input) lay their result out in the input's suggest_memory_format: channels_last
    stays so. The meta kernels' results are contiguous."""
    def laid_out(*args):
        return func(*args).contiguous(memory_format=suggest_memory_format(args[at]))

    return laid_out


_PADDING = [getattr(aten, f"{kind}_pad{nd}d{bw}").default for kind in ("reflection", "replication")
            for nd in (2, 3) for bw in ("", "_backward")]
# Their meta kernels ignore the indices' order (index) or do not say CPU's (ldexp, padding).
_LAID_OUT_BY = {aten.index.Tensor: iterator_layout.index, aten.ldexp.Tensor: iterator_layout.ldexp,
                **{f: _in_the_inputs_format(f, int("backward" in f.__name__)) for f in _PADDING},
                **{f: iterator_layout.into_empty_like(f, at)
                   for f, at in iterator_layout.INTO_EMPTY_LIKE.items()}}
# CPU's pow(Scalar, Tensor) allocates its result contiguous before it runs the iterator;
# rrelu's and log_sigmoid's kernels, log_softmax's backward and the pointwise losses'
# backwards (into a zeros_like) allocate theirs contiguous.
_CONTIGUOUS_RESULT = {aten.pow.Scalar, aten.rrelu_with_noise.default,
                      aten.rrelu_with_noise_functional.default,
                      aten._log_softmax_backward_data.default, aten.mse_loss_backward.default,
                      aten.smooth_l1_loss_backward.default, aten.huber_loss_backward.default,
                      aten.log_sigmoid_forward.default}


# Factorizations and solves: CPU's results are in LAPACK's column-major order whatever the
# input's (the meta kernels say which results and how).
_LAPACK_ORDER = {aten.linalg_inv_ex.default, aten.linalg_cholesky_ex.default,
                 aten.linalg_lu_factor_ex.default, aten.linalg_lu.default,
                 aten.linalg_lu_solve.default, aten._linalg_solve_ex.default,
                 aten.linalg_solve_triangular.default, aten.triangular_solve.default,
                 aten.cholesky_solve.default, aten.cholesky_inverse.default,
                 aten.linalg_qr.default, aten._linalg_svd.default, aten._linalg_eigh.default,
                 aten.linalg_eig.default, aten.geqrf.default,
                 aten.linalg_householder_product.default, aten.ormqr.default,
                 aten.linalg_lstsq.default, aten.linalg_ldl_factor_ex.default,
                 aten.linalg_ldl_solve.default}


def _scattering_in_memory_order(inner: Handler) -> Handler:
    """``as_strided_scatter``: its window is in the memory of a copy of the input, which CPU
    lays out as the input. A permuted input is scattered in its memory order, then put back
    in its own."""

    def handler(args, kwargs):
        x = args[0]
        if not _permuted(x):
            return inner(args, kwargs)
        order = sorted(range(x.dim()), key=lambda d: (-x.stride()[d], d))
        out = inner((aten.permute.default(x, order), *args[1:]), kwargs)
        back = sorted(range(x.dim()), key=order.__getitem__)
        return aten.clone.default(aten.permute.default(out, back))  # x's strides

    return handler


# Their outputs are laid out as these inputs (the query; the query, key and value for the
# gradients), as CPU's flash kernels lay them out (the fake kernels say how; ops/attention.py).
_QUERY_LAYOUT = {torch.ops.torchtpu.attention.default: (0,),
                 torch.ops.torchtpu.attention_backward.default: (1, 2, 3)}


def _laid_out_as(out, meta):
    if isinstance(out, TpuTensor) and isinstance(meta, torch.Tensor):
        stride = meta.stride()
        if out.stride() == stride or not is_dense(out.shape, stride):
            return out
        return with_layout(read(out), stride)
    if isinstance(out, (list, tuple)) and isinstance(meta, (list, tuple)):
        # (a tuple, as ATen returns, also for a decomposition's namedtuple)
        laid = (_laid_out_as(o, m) for o, m in zip(out, meta, strict=True))
        return list(laid) if type(out) is list else tuple(laid)
    return out


def _in_columns(inner: Handler) -> Handler:
    """``nonzero``'s (N, ndim) indices laid out as CPU's, a column at a time (strides (1, N)):
    ``nonzero(as_tuple=True)``, ``where(cond)`` and ``argwhere`` then have CPU's strides."""

    def handler(args, kwargs):
        out = inner(args, kwargs)
        return with_layout(read(out), (1, out.shape[0]))

    return handler


# Their rules factor a real A's transpose, as CPU does for a contiguous A (ops.linalg_factor.
# lu_for_det); the backward reads A's contiguity to know which it got.
_LU_OF_TRANSPOSE = {aten._linalg_det.default, aten._linalg_slogdet.default}


# Arguments cuda's kernels also take from the host (sequence lengths): a CPU tensor there is
# read as a host array instead of refused as a tensor on another device.
# CPU's searchsorted copies a non-contiguous argument, and says so once per process
# (TORCH_WARN_ONCE; each time under torch.set_warn_always): (position or keyword, name).
_COPIED_IF_STRIDED = {
    aten.searchsorted.Tensor: ((1, "input value"), (0, "boundary"), ("sorter", "sorter")),
    aten.searchsorted.Scalar: ((0, "boundary"), ("sorter", "sorter")),
    aten.bucketize.Tensor: ((0, "input value"), (1, "boundary")),
    aten.bucketize.Scalar: ((1, "boundary"),),
}
_WARNED_OF_COPY: set[str] = set()


def _warning_of_copies(inner: Handler, arguments) -> Handler:
    def handler(args, kwargs):
        for at, name in arguments:
            x = kwargs.get(at) if isinstance(at, str) else args[at]
            if not isinstance(x, torch.Tensor) or x.is_contiguous():
                continue
            if torch.is_warn_always_enabled() or name not in _WARNED_OF_COPY:
                if not torch.is_warn_always_enabled():
                    _WARNED_OF_COPY.add(name)
                warnings.warn(
                    f"torch.searchsorted(): {name} tensor is non-contiguous, this will lower the "
                    f"performance due to extra data copy when converting non-contiguous tensor "
                    f"to contiguous, please use contiguous {name} tensor if possible. This "
                    f"message will only appear once per program.", UserWarning, stacklevel=2)
        return inner(args, kwargs)

    return handler


_HOST_ARGS = {aten._ctc_loss.Tensor: (2, 3), aten._ctc_loss_backward.Tensor: (3, 4)}


def _taking_host_arguments(inner: Handler, positions: tuple[int, ...]) -> Handler:
    def handler(args, kwargs):
        args = [a.numpy() if i in positions and isinstance(a, torch.Tensor)
                and a.device.type == "cpu" else a for i, a in enumerate(args)]
        return inner(args, kwargs)

    return handler


def _factoring_a_itself(inner: Handler) -> Handler:
    def handler(args, kwargs):
        (A,) = args
        if A.is_complex() or A.is_contiguous():
            return inner(args, kwargs)
        return inner((A.mT,), kwargs)  # a non-contiguous A: CPU factors A itself

    return handler


def _rule_handler(rule, fused: bool = False, wrap: bool = True) -> Handler:
    exe = strict.compile_rule(rule)
    # Strict calls the jitted function itself; fused calls the executable, which records.
    # Eager rules run in Python either way (their own executables record).
    run = exe if fused and not rule.eager else exe.jitted
    if rule.eager:
        if fused and not rule.records:
            run = _forcing(exe.jitted)
        post = (lambda out: wrap_out(_as_arrays(out))) if wrap else (lambda out: out)
    elif not wrap:
        post = lambda out: out  # noqa: E731
    elif _returns_one_tensor(rule.op):
        post = wrap_tensor
    elif len(rule.op._schema.returns) > 1:
        post = _wrap_n(rule.op)
    else:
        post = wrap_out

    # The hot path of every op: keep it to one list build, one call, one wrap.
    def handler(args, kwargs):
        a = [x._storage.value if type(x) is TpuTensor and x._direct else unwrap(x) for x in args]
        if kwargs:
            return post(run(*a, **{k: unwrap(v) for k, v in kwargs.items()}))
        return post(run(*a))

    return handler


def _wrap_n(op):
    n = len(op._schema.returns)

    def post(out):
        # PyTorch's C++ side trusts the count: a wrong one would crash the process.
        if len(out) != n:
            raise AssertionError(f"torchtpu: lowering of {op} returned {len(out)} outputs, "
                                 f"its schema has {n}")
        return wrap_out(out)

    return post


def _forcing(fn):
    """Run ``fn`` on concrete values: pending inputs are computed first (a sync point), and
    the executables it calls run, not record (it works on their results in Python)."""

    def run(*args, **kwargs):
        args, kwargs = tree_map(_force, (args, kwargs))
        with unrecorded():
            return fn(*args, **kwargs)

    return run


def _force(x):
    return x.force() if type(x) is Pending else x


def _returns_one_tensor(op) -> bool:
    returns = op._schema.returns
    return len(returns) == 1 and str(returns[0].type) == "Tensor"


def _as_arrays(out):
    if isinstance(out, (list, tuple)):
        return type(out)(_as_arrays(o) for o in out)
    if out is None or isinstance(out, (jax.Array, Pending)):
        return out
    return jax.numpy.asarray(out)


def block(out) -> None:
    """Wait for every array behind ``out`` (tensors or containers of them)."""
    from ..tensor import TpuTensor, read

    if isinstance(out, TpuTensor):
        jax.block_until_ready(read(out))
    elif isinstance(out, (list, tuple)):
        for o in out:
            block(o)
