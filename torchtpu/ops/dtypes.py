"""torch <-> jax dtypes, and PyTorch's type promotion evaluated at trace time."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND as _KIND
from torch._prims_common import elementwise_dtypes

from ..runtime.execute import Executable

TORCH_TO_JAX: dict[torch.dtype, np.dtype] = {
    torch.float32: np.dtype(jnp.float32),
    torch.float64: np.dtype(jnp.float64),
    torch.float16: np.dtype(jnp.float16),
    torch.bfloat16: np.dtype(jnp.bfloat16),
    torch.int8: np.dtype(jnp.int8),
    torch.int16: np.dtype(jnp.int16),
    torch.int32: np.dtype(jnp.int32),
    torch.int64: np.dtype(jnp.int64),
    torch.uint8: np.dtype(jnp.uint8),
    torch.uint16: np.dtype(jnp.uint16),
    torch.uint32: np.dtype(jnp.uint32),
    torch.uint64: np.dtype(jnp.uint64),
    torch.bool: np.dtype(jnp.bool_),
    torch.complex64: np.dtype(jnp.complex64),
    torch.complex128: np.dtype(jnp.complex128),
    torch.float8_e4m3fn: np.dtype(jnp.float8_e4m3fn),
    torch.float8_e5m2: np.dtype(jnp.float8_e5m2),
    torch.float8_e4m3fnuz: np.dtype(jnp.float8_e4m3fnuz),
    torch.float8_e5m2fnuz: np.dtype(jnp.float8_e5m2fnuz),
}
JAX_TO_TORCH: dict[np.dtype, torch.dtype] = {v: k for k, v in TORCH_TO_JAX.items()}


def to_jax_dtype(dtype: torch.dtype) -> np.dtype:
    try:
        return TORCH_TO_JAX[dtype]
    except KeyError:
        # Not a TypeError: PyTorch's operators (h * 1j) turn one into NotImplemented, and
        # Python's "unsupported operand type(s)" would replace this message.
        raise RuntimeError(f"torchtpu: dtype {dtype} is not supported on tpu") from None


def to_torch_dtype(dtype) -> torch.dtype:
    """A jax (numpy) dtype as torch's; a torch dtype as it is (checks see both)."""
    return dtype if isinstance(dtype, torch.dtype) else JAX_TO_TORCH[np.dtype(dtype)]


def scalar_type_name(dtype) -> str:
    """c10's name for a dtype (torch or jax), as CPU's error messages print it: Float, Long..."""
    name = torch.empty(0, dtype=to_torch_dtype(dtype)).type()
    return name.removeprefix("torch.").removesuffix("Tensor")


# C++'s names for dtypes (caffe2::TypeMeta), as CPU's dtype checks print them.
_CPP_NAMES = {torch.float32: "float", torch.float64: "double", torch.float16: "c10::Half",
              torch.bfloat16: "c10::BFloat16", torch.int64: "long int", torch.int32: "int",
              torch.int16: "short int", torch.int8: "signed char", torch.uint8: "unsigned char",
              torch.bool: "bool", torch.complex64: "c10::complex<float>",
              torch.complex128: "c10::complex<double>"}


def cpp_name(dtype) -> str:
    """C++'s name for a dtype (torch or jax): float, double, long int..."""
    dtype = to_torch_dtype(dtype)
    return _CPP_NAMES.get(dtype, str(dtype))


def scalar_to(x, dtype):
    """A scalar converted to ``dtype`` as c10::Scalar::to does (floats truncate into integers)."""
    x = jnp.asarray(x)
    if jnp.issubdtype(dtype, jnp.integer) and jnp.issubdtype(x.dtype, jnp.inexact):
        x = jnp.trunc(x)
    return x.astype(dtype)


def lowest(dtype):
    """The identity of max in ``dtype``: -inf, or the integer minimum (False for bool)."""
    if jnp.issubdtype(dtype, jnp.inexact):
        return jnp.asarray(-jnp.inf, dtype)
    return jnp.asarray(False if dtype == jnp.bool_ else jnp.iinfo(dtype).min, dtype)


def highest(dtype):
    """The identity of min in ``dtype``: inf, or the integer maximum (True for bool)."""
    if jnp.issubdtype(dtype, jnp.inexact):
        return jnp.asarray(jnp.inf, dtype)
    return jnp.asarray(True if dtype == jnp.bool_ else jnp.iinfo(dtype).max, dtype)


def example_scalar(x):
    """A Python scalar of the kind a traced weak-typed scalar came from (for promotion)."""
    kind = np.dtype(x.dtype).kind
    return {"b": True, "i": 1, "u": 1, "f": 1.0, "c": 1j}[kind]


def as_meta(x):
    """A meta tensor (or a Python scalar) with x's shape and dtype, for PyTorch's own rules."""
    if isinstance(x, (bool, int, float, complex)):
        return x
    if getattr(x, "weak_type", False) and x.ndim == 0:
        return example_scalar(x)
    return torch.empty(x.shape, dtype=to_torch_dtype(x.dtype), device="meta")


def check_with_meta(op, *args, **kwargs) -> None:
    """Run PyTorch's meta kernel for its argument checks only (it raises CPU's errors), for a
    rule whose outputs differ from what the meta kernel says (``skip_meta``)."""
    def meta(a):
        if isinstance(a, (list, tuple)):
            return type(a)(meta(v) for v in a)
        return a if a is None or isinstance(a, (bool, int, float, str)) else as_meta(a)

    op(*[meta(a) for a in args], **{k: meta(v) for k, v in kwargs.items()})


def result_type(*operands) -> np.dtype:
    """PyTorch's result dtype for these arrays and scalars (tensors > 0-d > scalars)."""
    metas = [as_meta(x) for x in operands if x is not None]
    refuse_unpromoted_dtypes(metas)
    _, dtype = elementwise_dtypes(*metas, type_promotion_kind=_KIND.NO_OPMATH)
    return to_jax_dtype(dtype)


_UNPROMOTED_UINTS = (torch.uint16, torch.uint32, torch.uint64)


def refuse_unpromoted_dtypes(metas: list) -> None:
    """CPU's error for a float8 or a uint16/32/64 tensor beside a tensor of a dtype PyTorch
    does not promote it with (elementwise_dtypes would promote them)."""
    dtypes = list(dict.fromkeys(m.dtype for m in metas if isinstance(m, torch.Tensor) and m.dim()))
    if len(dtypes) > 1 and any(d.itemsize == 1 and d.is_floating_point
                               or d in _UNPROMOTED_UINTS for d in dtypes):
        functools.reduce(torch.promote_types, dtypes)  # raises CPU's RuntimeError


def promote(*operands):
    """Cast arrays and scalars to their PyTorch result dtype."""
    dtype = result_type(*operands)
    return [None if x is None else astype(x, dtype) if getattr(x, "dtype", None) == np.bool_
            else jnp.asarray(wrapped(x, dtype), dtype) for x in operands]


def wrapped(x, dtype: np.dtype):
    """A Python int as CPU converts it into an integer dtype: wrapped (``uint8 - (-1)`` adds
    255). (Eager passes numbers at run time, where jax wraps them too.)"""
    if type(x) is int and dtype.kind in "iu" and -2**63 <= x < 2**63:
        return np.array(x, np.int64).astype(dtype)
    return x


def default_float() -> np.dtype:
    return to_jax_dtype(torch.get_default_dtype())


def range_dtype(dtype, *endpoints):
    """linspace/logspace's dtype: the one asked for, else the default float, made complex
    when an endpoint is (torch.linspace(0, 1j, 3) is complex64)."""
    if dtype is not None:
        return to_jax_dtype(dtype)
    if any(jnp.iscomplexobj(x) for x in endpoints):
        return jnp.complex128 if default_float() == jnp.float64 else jnp.complex64
    return default_float()


def range_step_type(dtype):
    """The type CPU's linspace/logspace kernels step in: bfloat16/float16 their own, complex
    complex128, the rest float64."""
    if dtype in (jnp.bfloat16, jnp.float16):
        return dtype
    return jnp.complex128 if jnp.issubdtype(dtype, jnp.complexfloating) else jnp.float64


def float_of(x):
    """x as floating point: integers and bools become the default float dtype, as in PyTorch."""
    return x if jnp.issubdtype(x.dtype, jnp.inexact) else x.astype(default_float())


def _float_to_int(x, dtype):
    """Floats (bfloat16, float8 too) as CPU's x86 kernels convert them: to int64 directly,
    to the narrower types through int32 (-1.0 is 255 as uint8, 300.0 is 44 as int8), a
    value outside the intermediate's range, inf or NaN being its minimum (int8's 3e9 is its
    low bits, 0). XLA saturates instead. uint32 and uint64 go through int64 and wrap."""
    if dtype in (np.uint32, np.uint64):
        return x.astype(jnp.int64).astype(dtype)
    wide = np.dtype(np.int64 if dtype == np.int64 else np.int32)
    bound = 2.0 ** (wide.itemsize * 8 - 1)
    if x.dtype.itemsize < 4:  # exactly, and with bounds it can hold
        x = x.astype(jnp.float32)
    inside = (x >= -bound) & (x < bound)  # False for NaN
    out = jnp.where(inside, x, 0).astype(wide)
    return jnp.where(inside, out, np.iinfo(wide).min).astype(dtype)


def astype(x, dtype):
    """``x.astype(dtype)`` inside a rule, with PyTorch's CPU behaviour for float -> int."""
    if dtype.kind in "iu" and jnp.issubdtype(x.dtype, jnp.inexact):
        return _float_to_int(jnp.real(x), dtype)
    if dtype == np.dtype(jnp.float8_e4m3fn) and x.dtype != dtype and jnp.issubdtype(
            x.dtype, jnp.inexact):
        # float8_e4m3fn has no inf: CPU saturates past its range (infinities too) to +-448
        # where XLA gives NaN.
        top = float(jnp.finfo(jnp.float8_e4m3fn).max)
        x = jnp.clip(jnp.real(x) if jnp.iscomplexobj(x) else x, -top, top)
    if jnp.iscomplexobj(x) and dtype.kind not in "cb":
        x = jnp.real(x)  # what PyTorch keeps; jax deprecates casting the complex itself
    if x.dtype == np.bool_ and dtype.kind in "fc":
        # A select, not a convert: XLA rewrites ``convert(mask) * y`` as ``select(mask, y, 0)``,
        # which drops y's NaN, inf and -0.0 where CPU keeps them (``loss * mask``).
        return jnp.where(x, jnp.ones((), dtype), jnp.zeros((), dtype))
    return x.astype(dtype)


_cast_exe = Executable(astype, static_argnums=(1,))
_broadcast_exe = Executable(jnp.broadcast_to, static_argnums=(1,))


def cast(x, dtype):
    """``x.astype(dtype)`` with PyTorch's CPU behaviour for out-of-range float -> int."""
    return _cast_exe(x, np.dtype(dtype))


def broadcast(x, shape: tuple):
    return _broadcast_exe(x, tuple(shape))


LOW_PRECISION = (np.dtype(jnp.bfloat16), np.dtype(jnp.float16))
# The dtypes of CPU kernels built with AT_DISPATCH_ALL_TYPES_AND2(Half, BFloat16).
ALL_TYPES_AND_HALVES = frozenset(np.dtype(d) for d in (
    jnp.uint8, jnp.int8, jnp.int16, jnp.int32, jnp.int64, jnp.float16, jnp.bfloat16,
    jnp.float32, jnp.float64))


def upcast(x):
    """bfloat16/float16 as float32: the precision PyTorch's CPU kernels compute them in
    (``opmath``); other dtypes and None as they are."""
    return x if x is None or x.dtype not in LOW_PRECISION else x.astype(jnp.float32)


def opmath(fn):
    """A rule computed as PyTorch's CPU kernels compute bfloat16/float16: when that is the
    one floating dtype among its tensor arguments, in float32, its float32 results rounded
    once to it; Python numbers and 0-d tensors beside it keep float32's precision (x * 0.1).
    (Written natively, a rule of several steps rounds after each: gelu, softmax and silu
    then differed from CPU on a quarter to two thirds of bfloat16 elements.)"""

    @functools.wraps(fn)
    def rule(*args, **kwargs):
        # Python numbers arrive weakly typed (float64); 0-d tensors yield to dimensioned ones
        # in type promotion, as here.
        tensors = [x for x in jax.tree_util.tree_leaves((args, kwargs))
                   if isinstance(x, jax.Array) and not x.weak_type
                   and jnp.issubdtype(x.dtype, jnp.floating)]
        floats = {x.dtype for x in tensors if x.ndim} or {x.dtype for x in tensors}
        low = floats.pop() if len(floats) == 1 else None
        if low not in LOW_PRECISION:
            return fn(*args, **kwargs)

        def up(x):
            return x.astype(jnp.float32) if isinstance(x, jax.Array) and x.dtype == low else x

        def down(x):
            return x.astype(low) if isinstance(x, jax.Array) and x.dtype == jnp.float32 else x

        out = fn(*jax.tree_util.tree_map(up, args), **jax.tree_util.tree_map(up, kwargs))
        return jax.tree_util.tree_map(down, out)

    return rule
