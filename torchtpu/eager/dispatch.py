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
from torch.utils._pytree import tree_map

from .. import sparse_compressed
from ..ops.decomps import DECOMPOSITIONS
from ..ops.registry import LOWERINGS
from ..runtime import code_limit, memory
from ..runtime.execute import Pending, unrecorded
from ..runtime.platform import check_device_index
from ..tensor import DEVICE, TpuTensor, set_executor
from ..tensor import wrap as wrap_tensor
from . import (
    bounds,
    fallback,
    fft_layout,
    matmul_checks,
    meta_errors,
    mutation,
    number_checks,
    result_layout,
    special,
    strict,
    views,
)
from .values import MIXED_DEVICES, CompressedOperand, unwrap, wrap_out

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
    except CompressedOperand:
        return sparse_compressed.run(func, args, kwargs or {})
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
        return _with_host_indices(func, bounds.deferred(func, _build(func, fused=True)))
    return _strict_handler(func)


def _strict_handler(func) -> Handler:
    handler = _STRICT.get(func)
    if handler is None:
        handler = _STRICT[func] = _with_host_indices(func, bounds.checked(func, _build(func)))
    return handler


def _build(func, fused: bool = False) -> Handler:
    handler = _build_here(func, fused)
    handler = _drawing_on_the_host_with_a_generator(func, handler)
    if func in _COPIES:
        handler = _pairwise_across_devices(func, handler)
    if func in _CHECKS_ERRORS:
        handler = _checking_errors(handler, _CHECKS_ERRORS[func])
    if func is torch.ops.aten.cholesky_inverse.default:
        handler = _refusing_a_zero_diagonal(handler)
    if func in matmul_checks.CHECKED_ON_TENSORS:  # (checks of strides, which arrays lack)
        handler = _checked_as_cpu(func, handler)
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


# Copies where not every tensor is on tpu: CPU's and cuda's kernels go through copy_, which
# moves across devices. _foreach_copy_ takes its slow path, a copy_ per pair (tensordict's
# update_ of a memmapped, host-side TensorDict from a tpu one); copy, functionalization's form
# of copy_ (torch.func.functionalize), copies into a clone of self, on self's device.
_COPIES = {
    torch.ops.aten._foreach_copy_.default: torch._C.DispatchKey.CompositeExplicitAutograd,
    torch.ops.aten.copy.default: torch._C.DispatchKey.CompositeExplicitAutogradNonFunctional,
}


def _pairwise_across_devices(func, inner: Handler) -> Handler:
    kernel = torch._C.DispatchKeySet(_COPIES[func])

    def handler(args, kwargs):
        self, src = args[0], args[1] if len(args) > 1 else kwargs["src"]
        tensors = (*self, *src) if isinstance(self, (list, tuple)) else (self, src)
        if all(type(t) is TpuTensor for t in tensors):
            return inner(args, kwargs)
        return func.redispatch(kernel, *args, **kwargs)

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


def _refusing_a_zero_diagonal(inner: Handler) -> Handler:
    # CPU's LAPACK (potri) refuses a factor with a zero on its diagonal: a singular matrix
    def handler(args, kwargs):
        factor = args[0]
        if isinstance(factor, torch.Tensor) and factor.numel():
            zero = torch.diagonal(factor, dim1=-2, dim2=-1) == 0
            info = torch.where(zero.any(-1), zero.int().argmax(-1) + 1, 0)
            torch._linalg_check_errors(info, "cholesky_inverse", is_matrix=factor.dim() == 2)
        return inner(args, kwargs)

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
            return result_layout.following_memory_format(
                func, mutation.rule_with_mutations(func, inner, rule.mutates))
        if func.overloadpacket in _LIKE:
            return number_checks.checking_number(
                func, result_layout.keeping_layout(_rule_handler(rule, fused)))
        if func in result_layout.STRIDE_ARG:
            return result_layout.strided(_rule_handler(rule, fused),
                                         result_layout.STRIDE_ARG[func])
        if func in _LU_OF_TRANSPOSE:
            return _factoring_a_itself(_rule_handler(rule, fused))
        if func in _HOST_ARGS:
            return _taking_host_arguments(_rule_handler(rule, fused), _HOST_ARGS[func])
        if func is aten.as_strided_scatter.default:
            return result_layout.scattering_in_memory_order(_rule_handler(rule, fused))
        if func is aten.nonzero.default:
            return result_layout.in_columns(_rule_handler(rule, fused))
        if func in fft_layout.FFT_OPS:
            return fft_layout.laid_out_as_cpu(func, _rule_handler(rule, fused))
        return number_checks.checking_number(
            func, result_layout.following_memory_format(func, _rule_handler(rule, fused)))
    derived = mutation.derived_handler(func, functional_handler)
    if derived is not None:
        return derived
    decomp = DECOMPOSITIONS.get(func)
    if decomp is not None:
        return result_layout.following_memory_format(func, _decomposed(func, decomp))
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
        handler = _checked_by_meta(func, decomp)
    else:
        handler = lambda args, kwargs: decomp(*args, **kwargs)  # noqa: E731
        if meta_errors.has_cpu_check(func):
            handler = _checked_as_cpu(func, handler)
    if func.is_view or any(r.alias_info is not None for r in func._schema.returns):
        return handler
    return _in_memory_of_its_own(handler)


def _in_memory_of_its_own(inner: Handler) -> Handler:
    """A decomposition's results in memory of their own, as its op's kernel gives them: one
    that indexes with a 0-d tensor (``flattened[index]``) returns a view of its input, which
    autograd would then share between two gradients."""

    def handler(args, kwargs):
        out = inner(args, kwargs)
        results = out if isinstance(out, (list, tuple)) else (out,)
        shared = {id(x._storage) for x in result_layout.flat(args) if type(x) is TpuTensor}
        if not any(type(r) is TpuTensor and id(r._storage) in shared for r in results):
            return out
        fresh = [aten.clone.default(r) if type(r) is TpuTensor and id(r._storage) in shared
                 else r for r in results]
        if results is not out:
            return fresh[0]
        return fresh if type(out) is list else tuple(fresh)  # (a namedtuple too)

    return handler


def _checked_by_meta(func, decomp) -> Handler:
    def handler(args, kwargs):
        meta_errors.check_as_cpu(func, args, kwargs)
        try:
            func(*[views.meta_like(a) for a in args], **kwargs)
        except RuntimeError as e:
            raise meta_errors.cpu_wording(func, e, args) or e from None
        return decomp(*args, **kwargs)

    return handler


def _checked_as_cpu(func, inner: Handler) -> Handler:
    # CPU's checks only (of dtypes, numbers and strides): running the meta kernel costs each
    # call.
    def handler(args, kwargs):
        meta_errors.check_as_cpu(func, args, kwargs)
        return inner(args, kwargs)

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
