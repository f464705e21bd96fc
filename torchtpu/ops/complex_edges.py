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
