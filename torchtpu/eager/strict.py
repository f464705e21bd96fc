"""Strict eager: one cached XLA executable per (op, static args, shapes, dtypes).

``jax.jit`` keys its own cache on shapes and dtypes in C++; we key on the op and hand JAX the
static arguments, so the Python side of a cache hit is an argument walk and one call.
"""

from __future__ import annotations

import contextlib
import functools

import jax
import torch
from torch.utils._pytree import tree_leaves

from ..debug import counters as metrics
from ..ops.dtypes import as_meta, example_scalar, refuse_unpromoted_dtypes, to_jax_dtype
from ..ops.registry import Lowering
from ..runtime.execute import Executable
from .meta_errors import as_cpu_accepts, check_as_cpu, cpu_wording, has_cpu_check

_TENSORISH = ("Tensor", "Scalar", "number")


def _is_dynamic(arg: torch._C.Argument, rule: Lowering) -> bool:
    """Tensors and Scalars are traced; ints, shapes, flags, dtypes are static (unless the rule
    says otherwise)."""
    if arg.name in rule.static:
        return False
    if arg.name in rule.dynamic:
        return True
    text = str(arg.type)
    return any(k in text for k in _TENSORISH)


def _meta_tree(x, number: bool = False):
    if isinstance(x, (list, tuple)):
        return [_meta_tree(v, number) for v in x]
    if number and getattr(x, "ndim", None) == 0:
        # A Python bool traces as a plain (not weak-typed) bool: as a meta tensor, a meta
        # kernel taking a Scalar would read it (.item()) and fail, checking nothing.
        return example_scalar(x)
    if isinstance(x, jax.Array) or hasattr(x, "aval"):
        return as_meta(x)
    return x


# pow's meta kernel gives a bool tensor to a bool power int64, where CPU's kernel copies or
# fills (bool): its number stays a 0-d tensor there, which the meta kernel cannot read.
_NUMBERS_NOT_READ = frozenset({torch.ops.aten.pow.Tensor_Scalar,  # and its foreach forms
                               torch.ops.aten._foreach_pow.Scalar,
                               torch.ops.aten._foreach_pow.ScalarList})


def _numbers(op) -> dict:
    read = op not in _NUMBERS_NOT_READ
    return {a.name: read and "number" in str(a.type) for a in op._schema.arguments}


def pytorch_outputs(op, args, kwargs):
    """PyTorch's own outputs for these shapes and dtypes (meta kernels), or None if unknown.

    Raises PyTorch's own error for invalid arguments, so users see CPU's exception and message.
    """
    # A factory's device is meta too: a tpu device would make PyTorch build real tensors
    # (new_zeros allocates on the device it is given), ops that fused eager would record.
    numbers = _numbers(op)
    kwargs = {k: torch.device("meta") if k == "device" and v is not None
              else _meta_tree(v, numbers.get(k, False)) for k, v in kwargs.items()}
    if "device" not in kwargs and _is_factory(op):
        # No device given means the default one, CPU: a real allocation of the full size.
        kwargs["device"] = torch.device("meta")
    meta_args = as_cpu_accepts(op, [_meta_tree(a, n) for a, n in zip(args, numbers.values(),
                                                                     strict=False)])
    try:
        with _without_cuda_alerts(op):
            return op(*meta_args, **kwargs)
    except NotImplementedError:
        return None
    except TypeError as e:
        # A meta kernel's own bug, not the user's error: torch._check given an int (upsample
        # of an empty batch); CPU's kernel runs.
        if str(e).startswith("cond must be a bool"):
            return None
        raise
    except AssertionError as e:  # a Python meta kernel's assert: CPU's TORCH_CHECK raises
        raise RuntimeError(str(e)) from None
    except RuntimeError as e:
        # Meta kernels that need data (nonzero, item) cannot answer; that is not a user error.
        text = str(e).lower()
        if "meta" in text or "data-dependent" in text or "data dependent" in text:
            return None
        if text == "unexpected termination!":  # the refs' promotion of two uint16/32/64s
            refuse_unpromoted_dtypes(tree_leaves(meta_args))  # CPU's error, if it has one
        raise


# Their meta kernels take a meta tensor for a cuda one, and raise cuda's determinism alerts
# under torch.use_deterministic_algorithms; CPU's kernels are deterministic.
_CUDA_ALERTS = {
    torch.ops.aten.histc.default, torch.ops.aten.median.dim, torch.ops.aten.nanmedian.dim,
    torch.ops.aten.mode.default,
}


@contextlib.contextmanager
def _without_cuda_alerts(op):
    if op not in _CUDA_ALERTS or not torch.are_deterministic_algorithms_enabled():
        yield
        return
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(False)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(True, warn_only=warn_only)


def _is_factory(op) -> bool:
    return any(a.name == "device" and a.kwarg_only for a in op._schema.arguments)


def _conform(op, out, expected):
    """Cast a rule's outputs to PyTorch's dtypes; a shape mismatch is a bug in the rule."""
    if out is None:  # an output the op's mask left out (a norm's backward's grad_input)
        return None
    if isinstance(expected, torch.Tensor):
        if out.shape != tuple(expected.shape):
            raise AssertionError(
                f"torchtpu: lowering of {op} produced shape {out.shape}, "
                f"PyTorch gives {tuple(expected.shape)}"
            )
        want = to_jax_dtype(expected.dtype)
        return out if out.dtype == want else out.astype(want)
    if isinstance(expected, (list, tuple)) and isinstance(out, (list, tuple)):
        done = [_conform(op, o, e) for o, e in zip(out, expected, strict=False)]
        return type(out)(done + list(out[len(done):]))
    return out


def traced(rule: Lowering):
    """The function jax.jit traces for a rule: the rule, checked against PyTorch's meta."""

    def run(*args, **kwargs):
        metrics.count("compile", rule.op)
        try:
            return checked(*args, **kwargs)
        except RuntimeError as e:  # a meta kernel's check (in the rule too: check_with_meta)
            reworded = cpu_wording(rule.op, e, args)
            if reworded is not None:
                raise reworded from None
            raise

    def checked(*args, **kwargs):
        # PyTorch's checks first: invalid input raises PyTorch's error, not a JAX one.
        check_as_cpu(rule.op, args, kwargs)
        if rule.skip_meta:
            return rule.fn(*args, **kwargs)
        expected = pytorch_outputs(rule.op, args, kwargs)
        try:
            out = rule.fn(*args, **kwargs)
        except (TypeError, ValueError) as e:
            # Python turns a TypeError from an operator into "unsupported operand type".
            raise RuntimeError(f"torchtpu: lowering of {rule.op} failed: {e}") from e
        return out if expected is None else _conform(rule.op, out, expected)

    run.__name__ = rule.fn.__name__
    return run


_COMPILED: dict = {}


def _eager_checked(rule: Lowering):
    """An eager rule (it runs each call, in Python) with CPU's argument checks first."""
    if not has_cpu_check(rule.op):
        return rule.fn

    def checked(*args, **kwargs):
        check_as_cpu(rule.op, args, kwargs)
        return rule.fn(*args, **kwargs)

    functools.update_wrapper(checked, rule.fn)
    return checked


def compile_rule(rule: Lowering) -> Executable:
    """The rule as an executable, with the schema's non-tensor arguments static (cached)."""
    exe = _COMPILED.get(rule.op)
    if exe is not None:
        return exe
    schema = rule.op._schema
    nums = tuple(
        i for i, a in enumerate(schema.arguments) if not a.kwarg_only and not _is_dynamic(a, rule)
    )
    names = tuple(a.name for a in schema.arguments if a.kwarg_only and not _is_dynamic(a, rule))
    key = f"rule:{rule.op}"  # fused eager's program store names it so
    is_view = getattr(rule.op, "is_view", False)
    if rule.eager:
        exe = Executable(_eager_checked(rule), nums, names, jit=False, key=key, is_view=is_view)
    else:
        exe = Executable(traced(rule), nums, names, key=key, is_view=is_view)
    _COMPILED[rule.op] = exe
    return exe
