"""Elementwise ops: math, comparison and logic (activations are in activations.py).

Each op is one line through a small factory that declares its type promotion; PyTorch's meta
kernels then check the result dtype at trace time (eager/strict.py).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import torch
from jax import lax

from .complex_edges import (
    c10_divide,
    complex_abs,
    complex_exp,
    complex_expm1,
    complex_logaddexp,
    complex_pow,
    complex_sqrt,
    imag_sign_kept,
    inverse_trig,
    trig_c99,
    with_infinite_modulus,
)
from .dtypes import (
    LOW_PRECISION,
    astype,
    default_float,
    float_of,
    opmath,
    promote,
    result_type,
    scalar_to,
    scalar_type_name,
    to_jax_dtype,
    wrapped,
)
from .registry import LOWERINGS, lowering
from .special import erfinv, lgamma

aten = torch.ops.aten


def cpu_maximum(a, b):
    """``maximum`` as CPU's kernel orders it: ``a`` where the two are equal (-0.0 and 0.0
    keep ``a``'s sign; XLA's max orders -0.0 below 0.0), NaN from either."""
    return jnp.where((a < b) | jnp.isnan(b), b, a)


def cpu_minimum(a, b):
    return jnp.where((b < a) | jnp.isnan(b), b, a)


def _unary(op, fn):
    """Same dtype in and out (neg, abs, floor...)."""
    lowering(op)(lambda self: fn(self))


def _unary_float(op, fn):
    """Integers and bools compute in the default float dtype (sin, exp, sqrt...)."""
    lowering(op)(opmath(lambda self: fn(float_of(self))))


def _binary(op, fn):
    """Promote both operands to PyTorch's result dtype, then apply."""

    def rule(self, other):
        a, b = promote(self, other)
        return fn(a, b)

    lowering(op)(rule)


def _binary_integral(op, fn, kernel: str, bools: bool = False):
    """An integer op (bitwise, shifts, gcd): another dtype is CPU's NotImplementedError."""

    def rule(self, other):
        a, b = promote(self, other)
        kind = np.dtype(a.dtype).kind
        if not (kind in "iu" or bools and kind == "b"):
            raise NotImplementedError(
                f'"{kernel}_tpu" not implemented for \'{scalar_type_name(a.dtype)}\'')
        return fn(a, b)

    lowering(op)(rule)


def _compare(op, fn):
    def rule(self, other):
        a, b = promote(self, other)
        return fn(a, b)

    lowering(op)(rule)


def _promote_to_float(self, other):
    """Integer inputs promoted to float (atan2, copysign, xlogy): CPU casts each operand from
    its own dtype to the float result, so an int -1 beside a uint8 tensor stays -1 (cast to
    uint8 first, it would be 255)."""
    dtype = result_type(self, other)
    if not jnp.issubdtype(dtype, jnp.inexact):
        dtype = default_float()
    return [astype(x, dtype) if hasattr(x, "dtype") else jnp.asarray(x, dtype)
            for x in (self, other)]


def _binary_float(op, fn):
    @opmath
    def rule(self, other):
        return fn(*_promote_to_float(self, other))

    lowering(op)(rule)


def _sign(x):
    if x.dtype == jnp.bool_:
        return x  # a bool is its own sign
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        return jnp.sign(x)  # sgn: x / |x|
    # CPU's (0 < x) - (x < 0): NaN and -0.0 have sign 0 (Rprop takes sign(inf * 0))
    return (x > 0).astype(x.dtype) - (x < 0).astype(x.dtype)


for _op, _fn in [
    (aten.abs, lambda x: complex_abs(x) if jnp.iscomplexobj(x) else jnp.abs(x)),
    (aten.neg, jnp.negative), (aten.sign, _sign),
    (aten.bitwise_not, lambda x: jnp.logical_not(x) if x.dtype == jnp.bool_ else ~x),
    (aten.ceil, lambda x: jnp.ceil(x) if jnp.issubdtype(x.dtype, jnp.floating) else x),
    (aten.floor, lambda x: jnp.floor(x) if jnp.issubdtype(x.dtype, jnp.floating) else x),
    (aten.trunc, lambda x: jnp.trunc(x) if jnp.issubdtype(x.dtype, jnp.floating) else x),
    (aten.frac, lambda x: x - jnp.trunc(x)),
    (aten.relu, lambda x: cpu_maximum(x, jnp.zeros((), x.dtype))),
    (aten.sgn, _sign),
    (aten.positive, lambda x: x),
    (aten.conj_physical, jnp.conj),
]:
    _unary(_op, _fn)

def inverse(x):
    """1 / x; a complex x divides as c10::complex does (1 / 0 is inf + NaN i there)."""
    return c10_divide(1, x) if jnp.iscomplexobj(x) else 1 / x


def exact_rsqrt(x):
    """``1 / sqrt(x)`` as CPU computes it, two correctly rounded steps. XLA rewrites it
    into its own rsqrt, which differs in the last bit for about a third of the values."""
    if jnp.iscomplexobj(x):
        return inverse(imag_sign_kept(complex_sqrt)(x))
    return 1 / lax.optimization_barrier(jnp.sqrt(x))


def _expm1(x):
    return complex_expm1(x) if jnp.iscomplexobj(x) else jnp.expm1(x)


def _sigmoid(x):
    if jnp.iscomplexobj(x):  # CPU's 1 / (1 + exp(-z)), C99's exp and c10's division
        return inverse(1 + complex_exp(-x))
    return jax.nn.sigmoid(x)


def _exp_halved(a):
    """exp(a) / 2 for a >= 0, finite up to log(2 * max) (past where exp(a) overflows)."""
    over = a > math.log(jnp.finfo(a.dtype).max)
    h = lax.optimization_barrier(jnp.exp(jnp.where(over, a / 2, a)))
    return jnp.where(over, (h * 0.5) * h, h * 0.5)


def _hyperbolic(fn, odd: bool):
    """XLA's sinh and cosh are 12 ulps off for |x| past 10 (float32), where CPU's are
    correctly rounded. There exp(-|x|) is below half an ulp of exp(|x|): the result is
    +-exp(|x|) / 2, which exp gives to an ulp."""
    def rule(x):  # (real x: trig_c99 takes complex z apart)
        a = jnp.abs(x)
        big = a > (jnp.finfo(x.dtype).nmant + 2) * math.log(2) / 2
        far = _exp_halved(jnp.where(big, a, 0))
        return jnp.where(big, jnp.copysign(far, x) if odd else far, fn(x))

    return rule


_REAL_SINH_COSH = (_hyperbolic(jnp.sinh, odd=True), _hyperbolic(jnp.cosh, odd=False))


def _exp2(x):
    """2^round(x) * 2^(x - round(x)): XLA's exp2 is exp(x ln 2), whose rounded product is
    34 ulps off for large float32 x, where CPU's is correctly rounded."""
    if jnp.iscomplexobj(x):
        # exp(z ln 2) with each part scaled (a complex product makes inf * 0 a NaN), as CPU
        ln2 = math.log(2)
        return complex_exp(lax.complex(x.real * ln2, x.imag * ln2))
    n = jnp.clip(jnp.round(x), -2048, 2048)
    split = jnp.ldexp(jnp.exp2(x - n), n.astype(jnp.int32))
    return jnp.where(jnp.isfinite(x), split, jnp.exp2(x))


def _sqrt(x):
    return complex_sqrt(x) if jnp.iscomplexobj(x) else jnp.sqrt(x)


def _exp(x):
    return complex_exp(x) if jnp.iscomplexobj(x) else jnp.exp(x)


def apart(fn):
    """``fn`` with a result XLA may not rewrite together with the op that reads it: it turns
    a / sqrt(b) into a * rsqrt(b), a / exp(b) into a * exp(-b), exp(a) * exp(b) into
    exp(a + b) and log(exp(a)) into a, each some ulps from the two ops CPU and strict eager
    compute (fused eager and compiled programs hold both). On XLA:CPU the barrier costs
    nothing (its rsqrt is ~5x slower than a sqrt and a division)."""
    return lambda x: lax.optimization_barrier(fn(x))


for _op, _fn in [
    (aten.acos, inverse_trig("acos", jnp.arccos)),
    (aten.acosh, inverse_trig("acosh", jnp.arccosh)),
    (aten.asin, inverse_trig("asin", jnp.arcsin)),
    (aten.asinh, inverse_trig("asinh", jnp.arcsinh)),
    (aten.atan, inverse_trig("atan", jnp.arctan)),
    (aten.atanh, inverse_trig("atanh", jnp.arctanh)),
    *[(getattr(aten, _name), trig_c99(_name, *_REAL_SINH_COSH))
      for _name in ("cos", "sin", "cosh", "sinh")],
    (aten.tan, trig_c99("tan")), (aten.tanh, trig_c99("tanh")), (aten.exp, apart(_exp)),
    (aten.exp2, _exp2),
    (aten.expm1, _expm1), (aten.log, with_infinite_modulus(jnp.log)),
    (aten.log2, with_infinite_modulus(jnp.log2)), (aten.log10, with_infinite_modulus(jnp.log10)),
    (aten.log1p, jnp.log1p), (aten.sqrt, imag_sign_kept(apart(_sqrt))),
    (aten.rsqrt, exact_rsqrt), (aten.reciprocal, inverse),
    (aten.sigmoid, _sigmoid), (aten.erf, jax.scipy.special.erf),
    (aten.erfc, jax.scipy.special.erfc), (aten.erfinv, erfinv),
    (aten.lgamma, lgamma),
    (aten.i0, jax.scipy.special.i0), (aten.sinc, jnp.sinc),
    (aten.deg2rad, jnp.deg2rad), (aten.rad2deg, jnp.rad2deg),
    (aten.angle, lambda x: jnp.angle(x) if jnp.iscomplexobj(x) else _real_angle(x)),
]:
    _unary_float(_op, _fn)

for _op, _fn in [
    (aten.maximum, cpu_maximum), (aten.minimum, cpu_minimum),
    # NaN only where both are; equal values give the first (its sign of zero), as on CPU
    (aten.fmax, lambda a, b: jnp.where(jnp.isnan(a) | (a < b), b, a)),
    (aten.fmin, lambda a, b: jnp.where(jnp.isnan(a) | (b < a), b, a)),
    (aten.fmod, jnp.fmod),
    (aten.remainder, jnp.remainder), (aten.nextafter, jnp.nextafter),
]:
    _binary(_op, _fn)


def _gcd(a, b):
    """CPU's calc_gcd: Euclid from |a|, |b| while a != 0. jnp.gcd keeps its pair ordered, and
    |int_min| (negative) made it swap forever once another element kept the loop going."""
    a, b = jnp.broadcast_arrays(jnp.abs(a), jnp.abs(b))

    def body(state):
        a, b = state
        active = a != 0
        return jnp.where(active, lax.rem(b, jnp.where(active, a, 1)), a), jnp.where(active, a, b)

    return lax.while_loop(lambda state: jnp.any(state[0] != 0), body, (a, b))[1]


def _lcm(a, b):
    g = _gcd(a, b)
    dtype = g.dtype
    # C++ promotes int8 and int16 to int for a / g * b and its abs, then wraps the result.
    a, b, g = (v.astype(jnp.promote_types(dtype, jnp.int32))
               for v in jnp.broadcast_arrays(a, b, g))
    return jnp.where(g == 0, 0, jnp.abs(lax.div(a, jnp.where(g == 0, 1, g)) * b)).astype(dtype)


for _ops, _fn, _kernel, _bools in [
    ((aten.bitwise_and, aten.__and__), jnp.bitwise_and, "bitwise_and", True),
    ((aten.bitwise_or, aten.__or__), jnp.bitwise_or, "bitwise_or", True),
    ((aten.bitwise_xor, aten.__xor__), jnp.bitwise_xor, "bitwise_xor", True),
    ((aten.bitwise_left_shift,), jnp.left_shift, "lshift", False),
    ((aten.bitwise_right_shift,), jnp.right_shift, "rshift", False),
    ((aten.gcd,), _gcd, "gcd", False), ((aten.lcm,), _lcm, "lcm", False),
]:
    for _op in _ops:
        _binary_integral(_op, _fn, _kernel, _bools)

def _logaddexp(a, b):
    return complex_logaddexp(a, b) if jnp.iscomplexobj(a) else jnp.logaddexp(a, b)


for _op, _fn in [(aten.atan2, jnp.arctan2), (aten.hypot, jnp.hypot),
                 (aten.copysign, jnp.copysign), (aten.xlogy, jax.scipy.special.xlogy),
                 (aten.logaddexp, _logaddexp), (aten.logaddexp2, jnp.logaddexp2)]:
    _binary_float(_op, _fn)

for _op, _fn in [
    (aten.eq, jnp.equal), (aten.ne, jnp.not_equal), (aten.lt, jnp.less),
    (aten.le, jnp.less_equal), (aten.gt, jnp.greater), (aten.ge, jnp.greater_equal),
]:
    _compare(_op, _fn)

for _op, _fn in [
    (aten.logical_and, jnp.logical_and), (aten.logical_or, jnp.logical_or),
    (aten.logical_xor, jnp.logical_xor),
]:
    lowering(_op)(lambda self, other, _fn=_fn: _fn(self.astype(bool), other.astype(bool)))

lowering(aten.logical_not)(lambda self: jnp.logical_not(self))
# PyTorch's own decompositions reach it (renorm in low precision).
lowering(torch.ops.prims.convert_element_type.default)(
    lambda self, dtype: astype(self, to_jax_dtype(dtype)))
lowering(aten.isnan)(lambda self: jnp.isnan(self))
lowering(aten.isinf)(lambda self: jnp.isinf(self))
lowering(aten.isfinite)(lambda self: jnp.isfinite(self))
lowering(aten.isneginf)(lambda self: jnp.isneginf(self))
lowering(aten.isposinf)(lambda self: jnp.isposinf(self))
lowering(aten.signbit)(lambda self: jnp.signbit(self))


def _is_one(alpha) -> bool:
    return isinstance(alpha, int) and alpha == 1


def _plus_scaled(a, b, alpha, sign=1):
    """a + sign * alpha * b. CPU rounds alpha to a bfloat16/float16 tensor's dtype and the
    sum once (XLA would round the product too)."""
    if _is_one(alpha):
        return a + b if sign > 0 else a - b
    if a.dtype in LOW_PRECISION and b.dtype == a.dtype:
        scale = jnp.asarray(sign * alpha, a.dtype).astype(jnp.float32)
        return (a.astype(jnp.float32) + scale * b.astype(jnp.float32)).astype(a.dtype)
    return a + b * alpha if sign > 0 else a - b * alpha


@lowering(aten.add)
def _add(self, other, alpha=1):
    a, b = promote(self, other)
    return _plus_scaled(a, b, alpha)


@lowering(aten.sub)
def _sub(self, other, alpha=1):
    a, b = promote(self, other)
    return _plus_scaled(a, b, alpha, -1)


@lowering(aten.rsub)
def _rsub(self, other, alpha=1):
    a, b = promote(self, other)
    return _plus_scaled(b, a, alpha, -1)


@lowering(aten._add_relu)
def _add_relu(self, other, alpha=1):
    # (the fused add + ReLU of torch.ao's quantization-ready modules)
    total = _add(self, other, alpha)
    return jnp.where(total < 0, jnp.zeros((), total.dtype), total)


# CPU multiplies a bfloat16/float16 tensor by a number at float32's precision (x * 0.1);
# an added number it rounds to the tensor's dtype first, as promote does.
lowering(aten.mul)(opmath(lambda self, other: jnp.multiply(*promote(self, other))))


@opmath
def _true_div(self, other):
    # Integers divide in the result's float type, each converted straight to it: through
    # their own type a number out of its range wrapped (int16 audio / 32768 flipped sign).
    dtype = result_type(self, other)
    if not jnp.issubdtype(dtype, jnp.inexact):
        dtype = default_float()
    return exact_division(jnp.asarray(self, dtype), jnp.asarray(other, dtype))


@lowering(aten.div, static=("rounding_mode",))
def _div(self, other, rounding_mode=None):
    if rounding_mode is None:
        return _true_div(self, other)
    a, b = promote(self, other)
    if jnp.issubdtype(a.dtype, jnp.integer):
        if rounding_mode == "trunc":
            return lax.div(*jnp.broadcast_arrays(a, b))  # lax.div does not broadcast
        return jnp.floor_divide(a, b)
    # CPU divides step by step, bfloat16/float16 rounding each step to the dtype: trunc of
    # the (rounded) quotient, and floor by c10::div_floor_floating's fmod-based steps (which
    # also give its signed zeros).
    low = a.dtype
    if low in LOW_PRECISION:
        a, b = a.astype(jnp.float32), b.astype(jnp.float32)

    def r(x):
        return x.astype(low).astype(a.dtype)

    if rounding_mode == "trunc":
        return jnp.trunc(r(a / b)).astype(low)
    mod = r(jnp.fmod(a, b))
    div = r(r(a - mod) / b)
    div = jnp.where((mod != 0) & ((b < 0) != (mod < 0)), r(div - 1), div)
    floor = jnp.floor(div)
    floor = jnp.where(r(div - floor) > 0.5, r(floor + 1), floor)
    floor = jnp.where(div == 0, jnp.copysign(0.0, r(a / b)), floor)
    return jnp.where(b == 0, r(a / b), floor).astype(low)


@lowering(aten.floor_divide)
def _floor_divide(self, other):
    a, b = promote(self, other)
    return jnp.floor_divide(a, b)


@lowering(aten.pow.Tensor_Tensor, aten.pow.Scalar)
@opmath
def _pow(self, exponent):
    a, b = promote(self, exponent)
    if a.dtype == jnp.bool_:  # CPU's kernel has no bool form
        raise NotImplementedError('"pow" not implemented for \'Bool\'')
    if not jnp.issubdtype(a.dtype, jnp.integer):
        return _power(a, b)
    # PyTorch's integer power with a negative exponent: 1 and -1 keep their magnitude, others
    # truncate to 0 (jnp wraps around).
    neg = b < 0
    out = _int_power(a, jnp.where(neg, 0, b))
    odd = (b % 2) != 0
    small = jnp.where(a == 1, 1, jnp.where(a == -1, jnp.where(odd, -1, 1), 0)).astype(a.dtype)
    return jnp.where(neg, small, out)


def _power(a, b):
    if jnp.issubdtype(a.dtype, jnp.complexfloating):
        return complex_pow(a, b)
    return jnp.power(a, b)


def _real_angle(x):
    """CPU's angle of a real number: pi below zero, else 0 (-0.0 too, where atan2 gives pi),
    NaN kept."""
    return jnp.where(jnp.isnan(x), x, jnp.where(x < 0, jnp.pi, 0).astype(x.dtype))


def _int_power(a, b):
    """``a ** b`` for integers ``b >= 0`` by squaring, wrapping as CPU's kernel does, over
    every bit of ``b`` (jnp.power reads its low six: 2 ** 64 was 1, not 0)."""
    a, b = jnp.broadcast_arrays(a, b)

    def step(carry):
        acc, base, e = carry
        return jnp.where(e & 1 == 1, acc * base, acc), base * base, e >> 1

    acc, _, _ = lax.while_loop(lambda c: jnp.any(c[2] != 0), step, (jnp.ones_like(a), a, b))
    return acc


@lowering(aten.pow.Tensor_Scalar)
def _pow_scalar(self, exponent):
    """CPU's kernel for a number exponent: 0 and 1 exact; 2, 3 and -2 as products, -1 as a
    reciprocal, 0.5 and -0.5 as roots (x ** 2 is x * x there; XLA's pow is a few ulps off,
    and sqrt's -0 and -inf differ from pow's), complex bases too (XLA's complex pow goes
    through exp and log: (501j) ** 2 had an imaginary part). bfloat16 rounds after each step
    and takes the exponent in bfloat16; float16 is pow throughout, the exponent in float16."""
    dtype = result_type(self, exponent)
    if dtype == jnp.bool_:  # a bool by True or False: CPU copies it or fills ones, no kernel
        return jnp.where(exponent, self, True)
    if not jnp.issubdtype(dtype, jnp.inexact):
        return _pow(self, exponent)
    low = dtype in LOW_PRECISION
    x = self.astype(jnp.float32 if low else dtype)
    e = jnp.asarray(exponent, dtype).astype(x.dtype)

    def rounded(v):  # a bfloat16 vector op's result
        return v.astype(dtype).astype(x.dtype) if low else v

    forms = {0: lambda: jnp.ones_like(x), 1: lambda: x}
    if dtype != jnp.float16:
        forms |= {2: lambda: x * x, 3: lambda: rounded(rounded(x * x) * x),
                  -2: lambda: inverse(rounded(x * x)), -1: lambda: inverse(x),
                  0.5: lambda: imag_sign_kept(_sqrt)(x)}
    if isinstance(exponent, (int, float)):  # a constant here (torch.compile)
        if exponent == -0.5 and dtype != jnp.float16:
            return exact_rsqrt(x).astype(dtype)
        return forms.get(exponent, lambda: _power(x, e))().astype(dtype)
    # A number passed at run time (eager): every form, selected.
    out = _power(x, e)
    for value, form in forms.items():
        out = jnp.where(e == value, form(), out)
    if dtype != jnp.float16:
        out = jnp.where(e == -0.5, exact_rsqrt(x), out)
    return out.astype(dtype)


@lowering(aten.round.default)
def _round(self):
    return jnp.round(self) if jnp.issubdtype(self.dtype, jnp.inexact) else self


@lowering(aten.round.decimals)
@opmath
def _round_decimals(self, *, decimals=0):
    # CPU's kernel: scale by a power of ten, round half to even, undo the scaling with the
    # inverse operation (jnp.round multiplies by a rounded 10**-decimals instead).
    scale = 10.0 ** abs(decimals)
    if decimals < 0:
        return jnp.round(exact_division(self, scale)) * jnp.asarray(scale, self.dtype)
    return exact_division(jnp.round(self * jnp.asarray(scale, self.dtype)), scale)


def exact_division(x, divisor):
    """``x / divisor`` rounded once per element: XLA turns a division by a broadcast (a
    number, x / x.sum(-1, keepdim=True)) into a multiplication by its reciprocal (1 ulp off
    a third of the quotients) unless the divisor is a whole array it cannot see through."""
    divisor = jnp.asarray(divisor, x.dtype)
    shape = jnp.broadcast_shapes(x.shape, divisor.shape)
    return x / lax.optimization_barrier(jnp.broadcast_to(divisor, shape))


@lowering(aten.clamp.Tensor, aten.clip.Tensor)
def _clamp(self, min=None, max=None):  # noqa: A002 (PyTorch's argument names)
    dtype = result_type(self, *(v for v in (min, max) if v is not None))
    x = self.astype(dtype)
    if min is not None:
        x = cpu_maximum(x, jnp.asarray(wrapped(min, dtype), dtype))
    if max is not None:
        x = cpu_minimum(x, jnp.asarray(wrapped(max, dtype), dtype))
    return x


def _real_number(x):
    """A complex number as CPU reads it into a floating tensor's dtype: its real part."""
    return jnp.real(x) if x is not None and jnp.iscomplexobj(x) else x


# skip_meta: PyTorch's reference makes a floating tensor clamped by a complex number complex;
# CPU's kernel keeps its dtype and reads the real part (clamp_checks.py refuses the rest).
@lowering(aten.clamp.default, aten.clip.default, skip_meta=True)
def _clamp_by_numbers(self, min=None, max=None):  # noqa: A002
    if jnp.issubdtype(self.dtype, jnp.floating):
        min, max = _real_number(min), _real_number(max)  # noqa: A001
    return _clamp(self, min, max)


@lowering(aten.clamp_min)
def _clamp_min(self, min):  # noqa: A002
    return _clamp(self, min=min)


@lowering(aten.clamp_max)
def _clamp_max(self, max):  # noqa: A002
    return _clamp(self, max=max)


@lowering(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar)
def _where(condition, self, other):
    a, b = promote(self, other)
    return jnp.where(condition.astype(bool), a, b)


@lowering(aten.masked_fill)
def _masked_fill(self, mask, value):
    return jnp.where(mask.astype(bool), jnp.asarray(value).astype(self.dtype), self)


@lowering(aten.lerp)
@opmath
def _lerp(self, end, weight):
    a, b, w = promote(self, end, weight)
    return lerp_from_nearer_end(a, b, w)


def lerp_from_nearer_end(a, b, w):
    """CPU's lerp: from ``a`` for ``|w| < 0.5``, else back from ``b`` (so ``w = 1`` gives
    ``b`` exactly, and each half loses no precision to the other end's magnitude)."""
    if isinstance(w, (int, float)):
        near_a, w = abs(w) < 0.5, jnp.asarray(w, a.dtype)  # 1 - w in a's type, as CPU
        return a + w * (b - a) if near_a else b - (b - a) * (1 - w)
    return jnp.where(jnp.abs(w) < 0.5, a + w * (b - a), b - (b - a) * (1 - w))


@lowering(aten.addcmul)
@opmath
def _addcmul(self, tensor1, tensor2, value=1):
    a, b, c = promote(self, tensor1, tensor2)
    if not jnp.issubdtype(a.dtype, jnp.inexact):  # CPU takes the value in an integer's dtype
        value = scalar_to(value, a.dtype)
    return a + value * b * c


@lowering(aten.addcdiv)
@opmath
def _addcdiv(self, tensor1, tensor2, value=1):
    a, b, c = promote(self, tensor1, tensor2)
    return a + value * b / c


@opmath
def _fma(a, b, c):
    """a * b + c: torch._inductor's prims.fma, which Dynamo traces addcmul_/addcdiv_ with a
    value (and add_ with a tensor alpha) into. XLA may fuse it; one rounding either way
    is within CPU's."""
    x, y, z = promote(a, b, c)
    return x * y + z


def register_inductor_prims() -> None:
    """Rules for the prims Dynamo puts into graphs: they exist only once torch._inductor's
    prims are imported (cheap after Dynamo), so they are registered on the first compile."""
    from torch._inductor import inductor_prims  # noqa: F401  (defines torch.ops.prims.fma)

    if torch.ops.prims.fma.default not in LOWERINGS:
        lowering(torch.ops.prims.fma.default)(_fma)


@lowering(aten.nan_to_num)
def _nan_to_num(self, nan=None, posinf=None, neginf=None):
    return jnp.nan_to_num(self, nan=0.0 if nan is None else nan, posinf=posinf, neginf=neginf)


@lowering(aten.heaviside)
def _heaviside(self, values):
    a, b = promote(self, values)
    return jnp.where(a == 0, b, (a > 0).astype(a.dtype))


@lowering(aten.logit)
def _logit(self, eps=None):
    # Not opmath: CPU's vectorised kernel rounds each step to a bfloat16/float16 input's dtype
    # (eps too), and so do these steps.
    x = float_of(self)
    if eps is not None:
        lo = jnp.asarray(eps, x.dtype)
        x = jnp.clip(x, lo, 1 - lo)
    return jnp.log(x / (1 - x))


@lowering(aten._conj_physical, aten._conj)
def _conj_physical(self):
    # _conj's value; eager/views.py makes it a view with the conj bit over its base's memory.
    return jnp.conj(self)


@lowering(aten._neg_view)
def _neg_view(self):
    return -self


def _check_complex_parts(a, b) -> None:
    """CPU's checks of torch.complex's and torch.polar's parts (complex's meta kernel raises
    AssertionError where CPU raises RuntimeError; polar's promotes mixed dtypes)."""
    floating = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))
    if a.dtype not in floating or b.dtype not in floating:
        raise RuntimeError(
            "Expected both inputs to be Half, Float or Double tensors but got "
            f"{scalar_type_name(a.dtype)} and {scalar_type_name(b.dtype)}")
    if a.dtype != b.dtype:
        raise RuntimeError(f"Expected object of scalar type {scalar_type_name(a.dtype)} but got "
                           f"scalar type {scalar_type_name(b.dtype)} for second argument")


@lowering(aten.complex, skip_meta=True)
def _complex(real, imag):
    # Directly: its decomposition writes through view_as_real, which is a copy here.
    _check_complex_parts(real, imag)
    real, imag = jnp.broadcast_arrays(real, imag)
    return jax.lax.complex(real, imag)


@lowering(aten.polar, skip_meta=True)
def _polar(abs, angle):  # noqa: A002
    _check_complex_parts(abs, angle)
    return jax.lax.complex(abs * jnp.cos(angle), abs * jnp.sin(angle))
