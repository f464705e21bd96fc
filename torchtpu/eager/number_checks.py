"""CPU's checks of Python-number arguments by value (c10's checked_convert and the like).

Rules see numbers traced, so these run on the values before the rule: a number an op would
convert to the tensor's dtype that does not fit (``masked_fill(mask, -1e9)`` on float16), an
integer tensor to a negative integer power.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

from .foreach_checks import each_tensor

_DEFAULT = ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT

_C_TYPES = {"float32": "float", "float64": "double", "float16": "c10::Half",
            "bfloat16": "c10::BFloat16", "int8": "int8_t", "int16": "int16_t", "int32": "int",
            "int64": "int64_t", "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t",
            "uint64": "uint64_t", "bool": "bool", "complex32": "c10::complex<c10::Half>",
            "complex64": "c10::complex<float>", "complex128": "c10::complex<double>",
            **{f"float8_{kind}": f"c10::Float8_{kind}"
               for kind in ("e4m3fn", "e5m2", "e4m3fnuz", "e5m2fnuz")}}
# The floating dtypes without an infinity: checked_convert refuses inf into them.
_NO_INF = frozenset({torch.float8_e4m3fn, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz})
# CPU fills a one-element tensor through scalar_fill (fill_, full, scalar_tensor), which reads
# the number as a double and rounds it into these dtypes unchecked: one float16 element filled
# with 1e6 is inf, two raise. (float8_e4m3fn saturates there: 1e6 is 448.)
_UNCHECKED_ONE = frozenset({torch.float16, torch.bfloat16, torch.float8_e4m3fn,
                            torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz})


# Ops that convert a Python number to the tensor's dtype, checked (c10's checked_convert):
# the argument's position. Their rules see the number traced, so this runs on the value.
_NUMBER_AT = {torch.ops.aten.masked_fill.Scalar: 2}


def _integer_power(self, exponent) -> str | None:
    # (a bool tensor by an int is an int64 power; by a bool, no power at all)
    integral = not (self.dtype.is_floating_point or self.dtype.is_complex
                    or self.dtype == torch.bool and type(exponent) is not int)
    if integral and type(exponent) is int and exponent < 0:
        return "Integers to negative integer powers are not allowed."
    return _fill_fits(exponent, self.dtype) if integral and type(exponent) is int else None


def _fill_fits(value, dtype: torch.dtype) -> str | None:
    """CPU's overflow error if the Python number ``value`` does not convert into ``dtype``."""
    if isinstance(value, complex) and not dtype.is_complex and dtype != torch.bool:
        if value.imag != 0:  # checked_convert refuses losing an imaginary part
            return str(overflow_error(str(dtype).removeprefix("torch.")))
        value = value.real
    if (isinstance(value, bool) or not isinstance(value, (int, float, complex))
            or dtype == torch.bool):
        return None
    if dtype.is_complex:  # each part into the real type of the parts
        parts = (value.real, value.imag) if isinstance(value, complex) else (value,)
        if all(_fits(part, dtype.to_real()) for part in parts):
            return None
    elif _fits(value, dtype):
        return None
    return str(overflow_error(str(dtype).removeprefix("torch.")))


def _one_fill_fits(value, dtype: torch.dtype, numel: int) -> str | None:
    """``_fill_fits`` for a fill of ``numel`` elements (CPU's scalar_fill for one)."""
    if numel == 1 and dtype in _UNCHECKED_ONE:
        # (it reads a complex number as a double first, checked)
        return str(overflow_error("float64")) if isinstance(value, complex) and value.imag else None
    return _fill_fits(value, dtype)


def _clamp_bounds(self, *bounds) -> str | None:
    """clamp converts its bounds to the result's dtype, checked: the tensor's, or the default
    float dtype for an integer tensor clamped by a float."""
    numbers = [b for b in bounds if b is not None]
    dtype = self.dtype
    if dtype.is_complex or not dtype.is_floating_point and any(
            isinstance(b, complex) for b in numbers):
        return None  # (a complex result: clamp's own check refuses it, clamp_checks.py)
    if dtype.is_floating_point and any(isinstance(b, complex) and b.imag for b in numbers):
        # CPU reads every bound of a floating tensor as a double before its dtype
        return str(overflow_error("float64"))
    if not (dtype.is_floating_point or all(type(b) is int for b in numbers)):
        dtype = torch.get_default_dtype()
    return next(filter(None, (_fill_fits(b, dtype) for b in numbers)), None)


def _clamp_bound(self, bound) -> str | None:
    # (clamp_min/clamp_max refuse the complex result of a complex bound first)
    return None if isinstance(bound, complex) else _clamp_bounds(self, bound)


def _hardtanh_limits(self, min_val=-1, max_val=1) -> str | None:
    """hardtanh truncates an integer tensor's limits to integers, refuses a negative one for
    uint8, then clamps by them."""
    if self.dtype.is_floating_point or self.dtype.is_complex or self.dtype == torch.bool:
        return _clamp_bounds(self, min_val, max_val)  # (clamp's own checks refuse the others)
    min_val, max_val = int(min_val), int(max_val)
    if self.dtype == torch.uint8 and (min_val < 0 or max_val < 0):
        return "cannot do hardtanh on an unsigned type with negative limits"
    return _clamp_bounds(self, min_val, max_val)


def _alpha(self, other, alpha=1) -> str | None:
    """add/sub's alpha (positional in their .Scalar overloads): of the result's kind (c10's
    alpha_check), and fitting its dtype."""
    if type(alpha) is int and alpha == 1:  # the default, on every x + y: nothing to check
        return None
    dtype = torch.result_type(self, other)
    if isinstance(alpha, bool) and dtype != torch.bool:
        return "Boolean alpha only supported for Boolean results."
    if not (dtype.is_floating_point or dtype.is_complex or isinstance(alpha, int)):
        return "For integral input tensors, argument alpha must not be a floating point number."
    if isinstance(alpha, complex) and not dtype.is_complex:
        return "For non-complex input tensors, argument alpha must not be a complex number."
    return _fill_fits(alpha, dtype)


def _into_opmath(value, dtype: torch.dtype) -> str | None:
    """Kernels that convert a number to the tensor's opmath type (float for the half-width
    floats), checked."""
    return _fill_fits(value, torch.float32 if dtype in (torch.half, torch.bfloat16) else dtype)


def _lerp_weight(self, end, weight) -> str | None:
    # (its kernel, built for floating dtypes only, refuses others first)
    return _into_opmath(weight, self.dtype) if self.dtype.is_floating_point else None


def _pointwise_value(self, tensor1, tensor2, value=1) -> str | None:
    return _into_opmath(value, self.dtype)


def _foreach_alpha(self, other, *, alpha=1) -> str | None:
    pairs = zip(self, other, strict=False)  # (lists of other lengths: the op's own error)
    return next(filter(None, (_alpha(a, b, alpha=alpha) for a, b in pairs)), None)


def _index_fill_value(self, dim, index, value) -> str | None:
    if (value.is_complex() if isinstance(value, torch.Tensor) else isinstance(value, complex)):
        if not self.is_complex():
            return "index_fill_(): Converting complex Scalar to non-complex type is not supported"
    return None if isinstance(value, torch.Tensor) else _fill_fits(value, self.dtype)


def _addr_scalars(self, vec1, vec2, *, beta=1, alpha=1) -> str | None:
    """addr's beta and alpha: of the result's kind (its check_addr_scalar), and fitting it."""
    if type(beta) is int and type(alpha) is int and isinstance(self, torch.Tensor):
        return None  # (the defaults: integers convert to any dtype addr can have)
    dtype = elementwise_dtypes(self, vec1, vec2, type_promotion_kind=_DEFAULT)[1]
    for name, value in (("beta", beta), ("alpha", alpha)):
        if isinstance(value, bool) and dtype != torch.bool:
            return f"Boolean {name} only supported for Boolean results."
        if not (dtype.is_floating_point or dtype.is_complex or isinstance(value, int)):
            return (f"For integral input tensors, argument {name} must not be a floating "
                    "point number.")
    return _blas_scalars(self, beta=beta, alpha=alpha, dtype=dtype)


def _blas_scalars(self, *_, beta=1, alpha=1, dtype=None) -> str | None:
    """addmm and kin convert beta and alpha to the result's dtype, checked (a complex number
    into a real tensor)."""
    dtype = dtype or self.dtype
    return next(filter(None, (_fill_fits(v, dtype) for v in (beta, alpha))), None)


def _scalar_tensor_value(value, *, dtype=None, **_) -> str | None:
    """scalar_tensor fills its one element as fill_ does: -1e5 is -inf in float16 (and so
    ``x_half[mask] = -1e5``, whose value PyTorch's indexing makes with scalar_tensor)."""
    return dtype and _one_fill_fits(value, dtype, 1)


def _logspace_single(start, end, steps, base=10.0, *, dtype=None, **_) -> str | None:
    """A one-step logspace: CPU fills it with base ** start, checked as fill_ of one element;
    more steps convert unchecked."""
    dtype = dtype or torch.get_default_dtype()
    if steps != 1 or isinstance(start, (bool, complex)) or not isinstance(start, (int, float)):
        return None
    try:
        value = math.pow(base, start)
    except OverflowError:  # (C++'s pow is inf there)
        value = math.inf
    return _one_fill_fits(value, dtype, 1)


# Ops whose Python-number arguments CPU checks by value (rules see numbers traced).
_NUMBER_CHECKS = {
    torch.ops.aten.addr.default: _addr_scalars,
    **{getattr(torch.ops.aten, name).default: _blas_scalars
       for name in ("addmm", "addmv", "baddbmm", "addbmm")},
    torch.ops.aten.index_fill.int_Scalar: _index_fill_value,
    torch.ops.aten.index_fill.int_Tensor: _index_fill_value,
    **{getattr(torch.ops.aten, name).Tensor: _alpha for name in ("add", "sub", "rsub")},
    **{getattr(torch.ops.aten, name).Scalar: _alpha for name in ("add", "sub", "rsub")},
    **{getattr(torch.ops.aten, name).List: _foreach_alpha
       for name in ("_foreach_add", "_foreach_sub", "_foreach_add_", "_foreach_sub_")},
    torch.ops.aten.pow.Tensor_Scalar: _integer_power,
    torch.ops.aten.lerp.Scalar: _lerp_weight,
    torch.ops.aten.addcmul.default: _pointwise_value,
    torch.ops.aten.addcdiv.default: _pointwise_value,
    torch.ops.aten.clamp.default: _clamp_bounds,
    torch.ops.aten.clamp_min.default: _clamp_bound,
    torch.ops.aten.hardtanh.default: _hardtanh_limits,
    torch.ops.aten.clamp_max.default: _clamp_bound,
    torch.ops.aten.fill.Scalar: lambda self, value: _one_fill_fits(value, self.dtype, self.numel()),
    torch.ops.aten.full_like.default: lambda self, value, *, dtype=None, **_: _one_fill_fits(
        value, dtype or self.dtype, self.numel()),
    torch.ops.aten.new_full.default: lambda self, size, value, *, dtype=None, **_: _one_fill_fits(
        value, dtype or self.dtype, math.prod(size)),
    # (with no dtype, the number's own: it fits)
    torch.ops.aten.full.default: lambda size, value, *, dtype=None, **_: dtype and _one_fill_fits(
        value, dtype, math.prod(size)),
    torch.ops.aten.scalar_tensor.default: _scalar_tensor_value,
    torch.ops.aten.logspace.default: _logspace_single,
}

_NUMBER_CHECKS |= each_tensor(_NUMBER_CHECKS)
NUMBER_OPS = frozenset(_NUMBER_AT) | frozenset(_NUMBER_CHECKS)


def check_number_fits(op, args: Sequence, kwargs: dict | None = None) -> None:
    """CPU's errors for Python numbers: one its op would convert to the tensor's dtype that
    does not fit (``masked_fill(mask, -1e9)`` on float16, NaN into an integer tensor), and
    the value checks of ``_NUMBER_CHECKS``."""
    if (check := _NUMBER_CHECKS.get(op)) and (message := check(*args, **(kwargs or {}))):
        raise RuntimeError(message)
    at = _NUMBER_AT.get(op)
    if at is not None and len(args) > at and (message := _fill_fits(args[at], args[0].dtype)):
        raise RuntimeError(message)


def _fits(value: int | float, dtype: torch.dtype) -> bool:
    """Whether c10's checked_convert takes ``value`` into a real ``dtype``."""
    if dtype.is_floating_point:
        if math.isinf(value):
            return dtype not in _NO_INF
        return math.isnan(value) or abs(value) <= torch.finfo(dtype).max
    info = torch.iinfo(dtype)
    # An unsigned type takes a negative number it can wrap.
    low = -info.max if info.min == 0 else info.min
    return math.isfinite(value) and low <= value <= info.max


def checking_number(op, compute):
    """``compute`` (args, kwargs) with ``check_number_fits`` first, if ``op`` takes such a
    number."""
    if op not in NUMBER_OPS:
        return compute

    def checked(args, kwargs):
        check_number_fits(op, args, kwargs)
        return compute(args, kwargs)

    return checked


def overflow_error(dtype_name: str) -> RuntimeError:
    """c10's error for a number that does not convert into the dtype named ``dtype_name``."""
    ctype = _C_TYPES.get(dtype_name, dtype_name)
    return RuntimeError(f"value cannot be converted to type {ctype} without overflow")


# CPU's mul_(Tensor, Scalar) passes its number to mul_out as the first operand, where the
# kernel does not take it as a scalar: TensorIterator casts it to the tensor's dtype first
# (0.9 becomes 0.8984375 in bfloat16; 257 becomes 256), where mul(Tensor, Scalar) and
# Tensor.mul_(number) multiply by it in float32. (CPU's in-place foreach multiplications run
# mul_(Tensor, Scalar) per tensor, but cuda's multiply in float32, and so does tpu's: the
# optimizers take their multi-tensor path here by default, as on cuda, where CPU's default
# for-loop path calls Tensor.mul_.)
_CAST_FIRST = {torch.ops.aten.mul_.Scalar}
_HALVES = (torch.bfloat16, torch.float16)


def casting_number_first(op, compute):
    """``compute`` (args, kwargs) given its number already cast to the tensor's dtype, for
    the ops whose CPU kernels round it so (only 16-bit floats change)."""
    if op not in _CAST_FIRST:
        return compute

    def cast(args, kwargs):
        self, number = args[0], args[1]
        if self.dtype in _HALVES and type(number) in (int, float):
            number = torch.tensor(number, dtype=self.dtype).item()
        return compute((self, number, *args[2:]), kwargs)

    return cast
