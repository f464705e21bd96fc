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


def _atanh_parts(z, re, im):
    x, y = z.real, z.imag
    # x + NaN i: +-0 + NaN i for a zero or infinite x; NaN + y i: NaN + NaN i for a finite y
    nan_y = jnp.isnan(y) & ~jnp.isnan(x)
    zero = jnp.copysign(jnp.zeros_like(x), x)
    re = jnp.where(nan_y, _nan_unless((x == 0) | jnp.isinf(x), zero), re)
    nan_x = jnp.isnan(x) & ~jnp.isinf(y)
    return jnp.where(nan_x, jnp.nan, re), jnp.where(nan_y | nan_x, jnp.nan, im)


def _asinh_parts(z, re, im):
    x, y = z.real, z.imag
    nan_x = jnp.isnan(x) & jnp.isfinite(y)  # NaN + y i: NaN + NaN i but for a zero y
    return jnp.where(nan_x, jnp.nan, re), jnp.where(nan_x, _nan_unless(y == 0, y), im)


_INVERSE_TRIG = {
    "atanh": (True, 1, _atanh_parts), "asinh": (True, 1, _asinh_parts),
    # (result's real part odd in z's, imaginary part's sign against z's, NaN cases)
    "asin": (True, 1, _asin_parts), "acos": (False, -1, _acos_parts),
    "acosh": (False, 1, _acosh_parts), "atan": (True, 1, _atan_parts),
}


def inverse_trig(name, fn):
    """asin, acos, acosh, atan, asinh, atanh as CPU's C99 kernels give them: on a branch cut
    the sign of z's zero part picks the side (acos(2.5 - 0i) = +1.567i; XLA ignores it), and
    a NaN part makes NaN + NaN i except where C99 keeps a part (asin(0 + NaN i) = 0 + NaN i)."""
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


def _c99_multiply(z, w):
    """C's complex product (Annex G, libgcc's __muldc3): where the plain product is NaN + NaN i
    but a factor is infinite, the infinite factor's parts become +-1 or +-0, NaNs become 0, and
    the product is recomputed times infinity."""
    a, b, c, d = z.real, z.imag, w.real, w.imag
    ac, bd, ad, bc = a * c, b * d, a * d, b * c
    re, im = ac - bd, ad + bc
    lost = jnp.isnan(re) & jnp.isnan(im)
    zero = jnp.zeros_like(a)

    def unit(v):  # an infinite part as +-1, a finite one as +-0
        return jnp.copysign(jnp.where(jnp.isinf(v), 1.0, 0.0).astype(v.dtype), v)

    def unnan(v):
        return jnp.where(jnp.isnan(v), jnp.copysign(zero, v), v)

    z_inf = jnp.isinf(a) | jnp.isinf(b)
    w_inf = jnp.isinf(c) | jnp.isinf(d)
    a, b = jnp.where(z_inf, unit(a), a), jnp.where(z_inf, unit(b), b)
    c, d = jnp.where(z_inf, unnan(c), c), jnp.where(z_inf, unnan(d), d)
    c, d = jnp.where(w_inf, unit(c), c), jnp.where(w_inf, unit(d), d)
    a, b = jnp.where(w_inf, unnan(a), a), jnp.where(w_inf, unnan(b), b)
    overflow = ~(z_inf | w_inf) & (jnp.isinf(ac) | jnp.isinf(bd) | jnp.isinf(ad) | jnp.isinf(bc))
    a, b, c, d = (jnp.where(overflow, unnan(v), v) for v in (a, b, c, d))
    recomputed = z_inf | w_inf | overflow
    re = jnp.where(lost & recomputed, jnp.inf * (a * c - b * d), re)
    im = jnp.where(lost & recomputed, jnp.inf * (a * d + b * c), im)
    return lax.complex(re, im)


def complex_pow(x, y):
    """glibc's cpow, which CPU calls: cexp(y * clog(x)) with C's product. XLA's pow differs at
    the edges (0 ** y, an infinite base or exponent, NaN ** 0) and rounds differently."""
    return complex_exp(_c99_multiply(y, with_infinite_modulus(jnp.log)(x)))


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


def _c99_sinh(x, y, sinh, cosh):
    """C99's csinh on parts: sinh(x) cos(y) + i cosh(x) sin(y), a zero y kept (inf * 0 is
    not NaN there), and for an infinite or NaN y: +-0 + NaN i at x = +-0, inf + NaN i at an
    infinite x, NaN + NaN i otherwise."""
    re = jnp.where(y == 0, sinh(x), sinh(x) * jnp.cos(y))
    im = jnp.where(y == 0, y, cosh(x) * jnp.sin(y))
    wild = ~jnp.isfinite(y)
    re = jnp.where(wild, jnp.where(x == 0, x, jnp.where(jnp.isinf(x), jnp.inf, jnp.nan)), re)
    return re, jnp.where(wild, jnp.nan, im)


def _c99_cosh(x, y, sinh, cosh):
    """C99's ccosh on parts: cosh(x) cos(y) + i sinh(x) sin(y); at a zero y the imaginary
    part is y signed by x (NaN x: y); for an infinite or NaN y: NaN + 0i at x = +-0,
    inf + NaN i at an infinite x, NaN + NaN i otherwise."""
    re = jnp.where(y == 0, cosh(x), cosh(x) * jnp.cos(y))
    im = jnp.where(y == 0, jnp.where(jnp.isnan(x), y, jnp.copysign(jnp.ones_like(x), x) * y),
                   sinh(x) * jnp.sin(y))
    wild = ~jnp.isfinite(y)
    re = jnp.where(wild, jnp.where(jnp.isinf(x), jnp.inf, jnp.nan), re)
    im = jnp.where(wild, jnp.where(x == 0, jnp.zeros_like(y), jnp.nan), im)
    return re, im


def _c99_tanh(x, y, out_re, out_im):
    """C99's ctanh from XLA's value: a zero y kept (tanh(x) + y i), a zero x kept (tan(y) i,
    NaN for an infinite or NaN y), +-1 + 0i signed by sin(2y) at an infinite x, and
    NaN + NaN i for another finite x beside an infinite or NaN y."""
    re = jnp.where(y == 0, jnp.tanh(x), out_re)
    im = jnp.where(y == 0, y, out_im)
    wild = ~jnp.isfinite(y)
    re = jnp.where(wild & jnp.isfinite(x), jnp.where(x == 0, x, jnp.nan), re)
    im = jnp.where(wild & jnp.isfinite(x), jnp.nan, im)
    im = jnp.where((x == 0) & ~wild, jnp.tan(y), im)
    re = jnp.where(x == 0, x, re)
    infinite = jnp.isinf(x)
    zero = jnp.zeros_like(y)
    re = jnp.where(infinite, jnp.copysign(jnp.ones_like(x), x), re)
    im = jnp.where(infinite, jnp.copysign(zero, jnp.where(wild, y, jnp.sin(2 * y))), im)
    return re, im


def trig_c99(name, sinh=jnp.sinh, cosh=jnp.cosh):
    """sinh, cosh, tanh and, through sin(z) = -i sinh(iz), cos(z) = cosh(iz) and
    tan(z) = -i tanh(iz), sin, cos, tan, as CPU's C99 kernels give them: the signs of zero
    parts and the cases of an infinite or NaN part (XLA's formulas make NaN + NaN i).
    ``sinh`` and ``cosh`` compute the real parts' (XLA's are some ulps off past 10)."""
    hyperbolic = {"sin": "sinh", "cos": "cosh", "tan": "tanh"}.get(name, name)
    fn = {"sinh": jnp.sinh, "cosh": jnp.cosh, "tanh": jnp.tanh}[hyperbolic]

    def parts(x, y):
        if hyperbolic == "sinh":
            return _c99_sinh(x, y, sinh, cosh)
        if hyperbolic == "cosh":
            return _c99_cosh(x, y, sinh, cosh)
        out = fn(lax.complex(x, y))
        return _c99_tanh(x, y, out.real, out.imag)

    def rule(z):
        if not jnp.iscomplexobj(z):
            return {"sinh": sinh, "cosh": cosh, "tanh": jnp.tanh, "sin": jnp.sin,
                    "cos": jnp.cos, "tan": jnp.tan}[name](z)
        if name == hyperbolic:
            return lax.complex(*parts(z.real, z.imag))
        re, im = parts(-z.imag, z.real)  # iz
        if name == "cos":
            return lax.complex(re, im)
        if name == "sin":  # CPU's csin: +inf i wherever y is infinite beside a non-finite x
            re = jnp.where(jnp.isinf(z.imag) & ~jnp.isfinite(z.real), -jnp.inf, re)
        return lax.complex(im, -re)  # -i w

    return rule


def c10_divide(a, b):
    """a / b as c10::complex divides (NumPy's scaled form): 1 / 0 is inf + NaN i, a
    quotient of infinities NaN + NaN i (XLA's gives -inf and signed zeros there)."""
    # the barrier keeps XLA from folding a constant numerator's + 0, which flips zero signs
    a = lax.optimization_barrier(jnp.broadcast_to(jnp.asarray(a, b.dtype), b.shape))
    ar, ai, c, d = a.real, a.imag, b.real, b.imag
    wide = jnp.abs(c) >= jnp.abs(d)
    both_zero = (c == 0) & (d == 0)
    safe_c, safe_d = jnp.where(c == 0, 1, c), jnp.where(d == 0, 1, d)
    rat = jnp.where(wide, d / safe_c, c / safe_d)
    scl = 1 / jnp.where(wide, c + d * rat, d + c * rat)
    re = jnp.where(wide, (ar + ai * rat) * scl, (ar * rat + ai) * scl)
    im = jnp.where(wide, (ai - ar * rat) * scl, (ai * rat - ar) * scl)
    re = jnp.where(both_zero, ar / jnp.abs(c), re)
    im = jnp.where(both_zero, ai / jnp.abs(d), im)
    return lax.complex(re, im)


def complex_expm1(z):
    """c10's expm1: expm1(x) cos(y) - 2 sin(y / 2)^2 + i exp(x) sin(y)."""
    x, y = z.real, z.imag
    a = jnp.sin(y / 2)
    return lax.complex(jnp.expm1(x) * jnp.cos(y) - 2 * a * a, jnp.exp(x) * jnp.sin(y))

