"""Complex functions where XLA's formulas leave C99's (Annex G) edge cases, which CPU's kernels
keep: an infinite part with a NaN one, and the sign of a zero on a branch cut."""

from __future__ import annotations

import math

import jax.numpy as jnp
from jax import lax

# (results are built with lax.complex: arithmetic such as re + 1j * im adds +0.0 to a -0.0
# real part and multiplies a NaN into it)


def _infinite(z):
    return jnp.isinf(z.real) | jnp.isinf(z.imag)


def complex_abs(z):
    """|z| is infinite where either part is, a NaN in the other notwithstanding (hypot's)."""
    return jnp.where(_infinite(z), jnp.inf, jnp.abs(z))


def with_infinite_modulus(log):
    """A logarithm whose real part, log|z|, is infinite where either part of z is."""
    def rule(z):
        out = log(z)
        if not jnp.iscomplexobj(z):
            return out
        return jnp.where(_infinite(z), lax.complex(jnp.full_like(out.real, jnp.inf), out.imag), out)

    return rule


def real_sign_kept(fn):
    """An odd function mapping each half plane into itself (asinh, atanh): the result's real
    part has the sign of z's, -0.0 included, which chooses the side of a branch cut."""
    def rule(z):
        out = fn(z)
        if not jnp.iscomplexobj(z):
            return out
        return lax.complex(jnp.copysign(out.real, z.real), out.imag)

    return rule


def imag_sign_kept(fn):
    """sqrt: the result's imaginary part has the sign of z's (-0.0 picks the cut's lower side)."""
    def rule(z):
        out = fn(z)
        if not jnp.iscomplexobj(z):
            return out
        return lax.complex(out.real, jnp.copysign(out.imag, z.imag))

    return rule


def _nan_unless(keep, value):
    return jnp.where(keep, value, jnp.nan)


def _asin_parts(z, re, im):
    x, y = z.real, z.imag
    nan_y = jnp.isnan(y) & jnp.isfinite(x)  # C99: x + NaN i is NaN + NaN i but for x = 0
    return jnp.where(nan_y, _nan_unless(x == 0, x), re), jnp.where(nan_y, jnp.nan, im)


def _acos_parts(z, re, im):
    x, y = z.real, z.imag
    if z.dtype == jnp.complex128:  # CPU's double kernel: a zero imaginary result is +0
        im = jnp.where(im == 0, jnp.zeros_like(im), im)
    nan_y = jnp.isnan(y) & jnp.isfinite(x)
    return (jnp.where(nan_y, _nan_unless(x == 0, jnp.full_like(x, math.pi / 2)), re),
            jnp.where(nan_y, jnp.nan, im))


def _acosh_parts(z, re, im):
    x, y = z.real, z.imag
    nan_y = jnp.isnan(y) & jnp.isfinite(x)
    return (jnp.where(nan_y, jnp.nan, re),
            jnp.where(nan_y, _nan_unless(x == 0, jnp.full_like(x, math.pi / 2)), im))


def _atan_parts(z, re, im):
    x, y = z.real, z.imag
    nan_y = jnp.isnan(y) & jnp.isfinite(x)
    # NaN + y i: NaN, with a signed zero imaginary part where y is zero or infinite
    zero_im = jnp.copysign(jnp.zeros_like(y), y)
    im = jnp.where(jnp.isnan(x), _nan_unless((y == 0) | jnp.isinf(y), zero_im), im)
    return jnp.where(nan_y | jnp.isnan(x), jnp.nan, re), jnp.where(nan_y, jnp.nan, im)


_INVERSE_TRIG = {
    # (result's real part odd in z's, imaginary part's sign against z's, NaN cases)
    "asin": (True, 1, _asin_parts), "acos": (False, -1, _acos_parts),
    "acosh": (False, 1, _acosh_parts), "atan": (True, 1, _atan_parts),
}


def inverse_trig(name, fn):
    """asin, acos, acosh, atan as CPU's C99 kernels give them: on a branch cut the sign of
    z's zero part picks the side (acos(2.5 - 0i) = +1.567i; XLA ignores it), and a NaN part
    makes NaN + NaN i except where C99 keeps a part (asin(0 + NaN i) = 0 + NaN i)."""
    real_odd, imag_sign, nan_parts = _INVERSE_TRIG[name]

    def rule(z):
        out = fn(z)
        if not jnp.iscomplexobj(z):
            return out
        re = jnp.copysign(out.real, z.real) if real_odd else out.real
        im = jnp.copysign(out.imag, z.imag if imag_sign > 0 else -z.imag)
        return lax.complex(*nan_parts(z, re, im))

    return rule


def complex_sqrt(z):
    """C99's csqrt where a part is infinite beside a NaN: x + inf i is inf + inf i (x NaN too),
    +inf + NaN i is inf + NaN i, -inf + NaN i is NaN + inf i."""
    out = jnp.sqrt(z)
    x, y = z.real, z.imag
    re = jnp.where(jnp.isinf(y) | (x == jnp.inf), jnp.inf, out.real)
    re = jnp.where((x == -jnp.inf) & jnp.isnan(y), jnp.nan, re)
    im = jnp.where(jnp.isinf(y), y, out.imag)
    im = jnp.where((x == jnp.inf) & jnp.isnan(y), jnp.nan, im)
    im = jnp.where((x == -jnp.inf) & jnp.isnan(y), jnp.inf, im)
    return lax.complex(re, im)


def complex_exp(z):
    """C99's cexp, which CPU calls: exp(x +- 0i) = exp(x) +- 0i (XLA's cis drops the zero's sign
    and makes inf * 0 a NaN); an infinite or NaN imaginary part gives inf + NaN i where x is
    +inf and +-0 where it is -inf, not NaN + NaN i."""
    out = jnp.exp(z)
    re, im = z.real, z.imag
    real, imag = out.real, out.imag
    unbounded = ~jnp.isfinite(im)
    zero = jnp.zeros_like(re)
    real = jnp.where(im == 0, jnp.exp(re), real)
    imag = jnp.where(im == 0, im, imag)
    real = jnp.where(unbounded & (re == jnp.inf), jnp.inf, real)
    imag = jnp.where(unbounded & (re == jnp.inf), jnp.nan, imag)
    real = jnp.where(unbounded & (re == -jnp.inf), zero, real)
    imag = jnp.where(unbounded & (re == -jnp.inf),
                     jnp.where(jnp.isnan(im), zero, jnp.copysign(zero, im)), imag)
    return lax.complex(real, imag)


def complex_logaddexp(a, b):
    """CPU's complex kernel (jnp's folds the imaginary parts): the operand of larger real part
    factored out, any NaN infectious, and infinite real parts of one sign taken apart."""
    a_lower = a.real < b.real
    lo, hi = jnp.where(a_lower, a, b), jnp.where(a_lower, b, a)
    both_infinite = ~jnp.isfinite(lo.real) & (lo.real == hi.real)
    infinite = jnp.where(lo.real < 0, lo, jnp.log(jnp.exp(lo) + jnp.exp(hi)))
    out = jnp.where(both_infinite, infinite, jnp.log1p(jnp.exp(lo - hi)) + hi)
    return jnp.where(jnp.isnan(a) | jnp.isnan(b), jnp.array(complex(math.nan, math.nan), a.dtype),
                     out)
