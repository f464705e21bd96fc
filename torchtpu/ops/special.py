"""Special functions (torch.special): gamma family, Bessel functions, error functions."""

from __future__ import annotations

import math

import jax.numpy as jnp
import jax.scipy.special as jsp
import numpy as np
import torch
from jax import lax

from .dtypes import float_of, promote
from .registry import lowering

aten = torch.ops.aten


def _unary(op, fn):
    """Integers and bools compute in the default float dtype, as PyTorch's special ops do."""
    lowering(op)(lambda self: fn(float_of(self)))


def _binary(op, fn):
    def rule(self, other):
        a, b = promote(self, other)
        return fn(float_of(a), float_of(b))

    lowering(op)(rule)


def horner(coeffs, z):
    """sum c_i z^(k-i), highest power first."""
    out = jnp.zeros_like(z)
    for c in coeffs:
        out = out * z + c
    return out


# Cephes' rational approximations of J0 and J1 (S. L. Moshier), as PyTorch's CPU kernels
# evaluate them: |x| <= 5 a rational function of x^2 times the factors of the first two zeros,
# beyond that Hankel's asymptotic form with rational functions of 25/x^2. (jax's bessel_jn
# returns NaN near zero and drifts for large x.)
_J0_R = ((-4.79443220978201773821e09, 1.95617491946556577543e12, -2.49248344360967716204e14,
          9.70862251047306323952e15),
         (4.99563147152651017219e02, 1.73785401676374683123e05, 4.84409658339962045305e07,
          1.11855537045356834862e10, 2.11277520115489217587e12, 3.10518229857422583814e14,
          3.18121955943204943306e16, 1.71086294081043136091e18))
_J0_ZEROS_SQ = (5.78318596294678452118e00, 3.04712623436620863991e01)
_J0_P = ((7.96936729297347051624e-04, 8.28352392107440799803e-02, 1.23953371646414299388e00,
          5.44725003058768775090e00, 8.74716500199817011941e00, 5.30324038235394892183e00,
          9.99999999999999997821e-01),
         (9.24408810558863637013e-04, 8.56288474354474431428e-02, 1.25352743901058953537e00,
          5.47097740330417105182e00, 8.76190883237069594232e00, 5.30605288235394617618e00,
          1.00000000000000000218e00))
_J0_Q = ((-1.13663838898469149931e-02, -1.28252718670509318512e00, -1.95539544257735972385e01,
          -9.32060152123768231369e01, -1.77681167980488050595e02, -1.47077505154951170175e02,
          -5.14105326766599330220e01, -6.05014350600728481186e00),
         (6.43178256118178023184e01, 8.56430025976980587198e02, 3.88240183605401609683e03,
          7.24046774195652478189e03, 5.93072701187316984827e03, 2.06209331660327847417e03,
          2.42005740240291393179e02))
_J1_R = ((-8.99971225705559398224e08, 4.52228297998194034323e11, -7.27494245221818276015e13,
          3.68295732863852883286e15),
         (6.20836478118054335476e02, 2.56987256757748830383e05, 8.35146791431949253037e07,
          2.21511595479792499675e10, 4.74914122079991414898e12, 7.84369607876235854894e14,
          8.95222336184627338078e16, 5.32278620332680085395e18))
_J1_ZEROS_SQ = (1.46819706421238932572e01, 4.92184563216946036703e01)
_J1_P = ((7.62125616208173112003e-04, 7.31397056940917570436e-02, 1.12719608129684925192e00,
          5.11207951146807644818e00, 8.42404590141772420927e00, 5.21451598682361504063e00,
          1.00000000000000000254e00),
         (5.71323128072548699714e-04, 6.88455908754495404082e-02, 1.10514232634061696926e00,
          5.07386386128601488557e00, 8.39985554327604159757e00, 5.20982848682361821619e00,
          9.99999999999999997461e-01))
_J1_Q = ((5.10862594750176621635e-02, 4.98213872951233449420e00, 7.58238284132545283818e01,
          3.66779609360150777800e02, 7.10856304998926107277e02, 5.97489612400613639965e02,
          2.11688757100572135698e02, 2.52070205858023719784e01),
         (7.42373277035675149943e01, 1.05644886038262816351e03, 4.98641058337653607651e03,
          9.56231892404756170795e03, 7.99704160447350683650e03, 2.82619278517639096600e03,
          3.36093607810698293419e02))


def _hankel(x, p, q, phase):
    """sqrt(2/(pi x)) (P cos(x - phase) - 5/x Q sin(x - phase)) for x > 5."""
    w = 25.0 / (x * x)
    pw = horner(p[0], w) / horner(p[1], w)
    qw = horner(q[0], w) / horner(q[1], w)
    return ((pw * jnp.cos(x - phase) - 5.0 / x * qw * jnp.sin(x - phase))
            * math.sqrt(2 / math.pi) / jnp.sqrt(x))


def _bessel_j0(x):
    x = jnp.abs(x)
    small = x <= 5.0
    xs = jnp.where(small, x, 1.0)
    z = xs * xs
    near = ((z - _J0_ZEROS_SQ[0]) * (z - _J0_ZEROS_SQ[1])
            * horner(_J0_R[0], z) / horner(_J0_R[1], z))
    near = jnp.where(xs < 1e-5, 1.0 - z / 4.0, near)
    far = _hankel(jnp.where(small, 6.0, x), _J0_P, _J0_Q, math.pi / 4)
    return jnp.where(small, near, far)


def _bessel_j1(x):
    sign = jnp.where(x < 0, -1.0, 1.0).astype(x.dtype)
    x = jnp.abs(x)
    small = x <= 5.0
    xs = jnp.where(small, x, 1.0)
    z = xs * xs
    near = (horner(_J1_R[0], z) / horner(_J1_R[1], z) * xs
            * (z - _J1_ZEROS_SQ[0]) * (z - _J1_ZEROS_SQ[1]))
    far = _hankel(jnp.where(small, 6.0, x), _J1_P, _J1_Q, 3 * math.pi / 4)
    return sign * jnp.where(small, near, far)


def _spherical_bessel_j0(x):
    # sin(x)/x, with the series near zero where the quotient loses precision.
    small = jnp.abs(x) < 0.5
    xs = jnp.where(small, 1.0, x)
    x2 = x * x
    series = 1 - x2 / 6 * (1 - x2 / 20 * (1 - x2 / 42))
    return jnp.where(small, series, jnp.where(jnp.isinf(x), 0, jnp.sin(xs) / xs))


def _erfcx(x):
    """exp(x^2) erfc(x). jax switches to the asymptotic series only where exp(x^2) would
    overflow; erfc has underflowed before that (XLA flushes subnormals), so 9.19 < x < 9.41
    gave 0 in float32 (26.54 < x < 26.64 in float64) where CPU gives 1 / (x sqrt(pi))."""
    z = x.astype(jnp.promote_types(x.dtype, jnp.float32))
    large = z > math.sqrt(-math.log(jnp.finfo(z.dtype).tiny)) - 0.5
    zs = jnp.where(large, z, 1.0)
    direct = jnp.exp(jnp.square(jnp.where(large, 0.0, z))) * jsp.erfc(jnp.where(large, 0.0, z))
    # 1 / (x sqrt(pi)) * sum_n (-1)^n (2n - 1)!! / (2 x^2)^n, to the dtype's precision.
    inv = 1 / (2 * zs * zs)
    terms = 9 if z.dtype == jnp.float64 else 5
    series, term = jnp.ones_like(zs), jnp.ones_like(zs)
    for n in range(1, terms + 1):
        term = -term * (2 * n - 1) * inv
        series = series + term
    asymptotic = series / (zs * math.sqrt(math.pi))
    return jnp.where(large, asymptotic, direct).astype(x.dtype)


def _log_ndtr(x):
    """CPU's calc_log_ndtr: log(erfcx(-t) / 2) - t^2 below -1 (t = x / sqrt 2), which stays
    finite to |x| = 2.6e19 in float32 (jax's squares x, -inf past 1.8e19)."""
    t = x * math.sqrt(0.5)
    low = x < -1
    tail = jnp.log(_erfcx(-jnp.where(low, t, -1.0)) / 2) - t * t
    return jnp.where(low, tail, jnp.log1p(-jsp.erfc(t) / 2))


for _op, _fn in [
    (aten.special_i0e, jsp.i0e), (aten.special_i1, jsp.i1), (aten.special_i1e, jsp.i1e),
    (aten.special_ndtri, jsp.ndtri), (aten.special_log_ndtr, _log_ndtr),
    (aten.special_erfcx, _erfcx), (aten.special_ndtr, jsp.ndtr),
    (aten.special_modified_bessel_i0, jsp.i0), (aten.special_modified_bessel_i1, jsp.i1),
    (aten.special_bessel_j0, _bessel_j0), (aten.special_bessel_j1, _bessel_j1),
    (aten.special_spherical_bessel_j0, _spherical_bessel_j0),
    (aten.special_entr, jsp.entr),
]:
    _unary(_op, _fn)

# The gamma family, with PyTorch's values at poles and for negative arguments.


def _digamma(x):
    # Cephes and PyTorch: -inf at +0, +inf at -0 (jax gives NaN); NaN at negative integers.
    return jnp.where(x == 0, jnp.copysign(jnp.inf, -x), jsp.digamma(x)).astype(x.dtype)


def _trigamma(x):
    """PyTorch's trigamma (its CPU kernel's formula): below 1/2 the reflection formula, then
    six terms of the series and its asymptotic expansion, in float32 (float64 for float64);
    a negative integer gives the same large finite value as CPU's, not inf."""
    wide = jnp.promote_types(x.dtype, jnp.float32)
    xw = x.astype(wide)
    pi = np.asarray(math.pi, wide)
    neg = xw < 0.5
    sin_pi_x = jnp.sin(pi * xw)
    result = jnp.where(neg, -(pi * pi) / (sin_pi_x * sin_pi_x), 0)
    xw = jnp.where(neg, 1 - xw, xw)
    for _ in range(6):
        result = result + 1 / (xw * xw)
        xw = xw + 1
    ixx = 1 / (xw * xw)
    result = result + (1 + 1 / (2 * xw) + ixx * (1 / 6 - ixx * (1 / 30 - ixx * (1 / 42)))) / xw
    return jnp.where(neg, -result, result).astype(x.dtype)


def _zeta_positive(s, q):
    return jsp.zeta(jnp.asarray(s, q.dtype), q)


# Euler-Maclaurin's denominators: (2j)! / B_2j, as Cephes tabulates them.
_ZETA_EM = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9,
            7.47242496e10, -2.950130727918164224e12, 1.1646782814350067249e14,
            -4.5979787224074726105e15, 1.8152105401943546773e17, -7.1661652561756670113e18)
_MACHEP = 1.11022302462515654042e-16


def _zeta(x, q):
    """Hurwitz zeta as CPU's kernel (Cephes) computes it, step for step: the domain checks,
    then terms summed from q until one is below MACHEP of the sum (or nine and past 9), then
    Euler-Maclaurin's tail. jax's series is not it at the edges: NaN for q < 1 and at a
    huge x (zeta(1e20, 1.8)), where CPU has inf; 0 where CPU's tail overflows to NaN."""
    x, q = jnp.broadcast_arrays(x, q)
    early = (x <= 1) | ((q <= 0) & ((q == jnp.floor(q)) | (x != jnp.floor(x))))

    def looping(state):
        _, a, _, i, done = state
        return ~done & ((i < 9) | (a <= 9))

    def body(state):
        total, a, b, i, done = state
        run = looping(state)
        a = jnp.where(run, a + 1, a)
        b = jnp.where(run, a ** -x, b)
        total = jnp.where(run, total + b, total)
        converged = (-_MACHEP * total < b) & (b < _MACHEP * total)
        return total, a, b, i + run, done | (run & converged)

    total = q ** -x
    state = (total, q, jnp.zeros_like(q), jnp.zeros(q.shape, jnp.int32), early)
    total, w, b, _, done = lax.while_loop(lambda st: jnp.any(looping(st)), body, state)
    total = jnp.where(done, total, total + b * w / (x - 1) - 0.5 * b)
    a, k = 1.0, 0.0
    for denominator in _ZETA_EM:
        a = a * (x + k)
        b = b / w
        t = a * b / denominator
        total = jnp.where(done, total, total + t)
        done = done | (jnp.abs(t / total) < _MACHEP)
        a = a * (x + k + 1)
        b = b / w
        k += 2
    pole = (q <= 0) & (q == jnp.floor(q))
    out = jnp.where((q < 0) & (x != jnp.floor(x)), jnp.nan, total)
    out = jnp.where(pole, jnp.inf, out)
    return jnp.where(x == 1, jnp.inf, jnp.where(x < 1, jnp.nan, out))


lowering(aten.digamma)(lambda self: _digamma(float_of(self)))


def in_float64(fn):
    """``fn`` evaluated in float64 and rounded once, where CPU's float results are within an
    ulp or two and XLA's float32 ones are not: the incomplete gamma loses digits as the shape
    grows (1e-4 relative at a = 1e3, 4e-2 at 1e5: Gamma's and Chi2's cdf), lgamma is 28 ulps
    off on [3, 10] and 4e-6 off below 0, erfinv drifts 5e-6 as |x| nears 1."""
    def rule(*xs):
        return fn(*(x.astype(jnp.promote_types(x.dtype, jnp.float64)) for x in xs)
                  ).astype(xs[0].dtype)

    return rule


lgamma = in_float64(jsp.gammaln)
erfinv = in_float64(jsp.erfinv)


def _with_cephes_edges(fn, upper: bool):
    """CPU's calc_igamma/calc_igammac edge cases, checked in its order, over ``fn``: a = 0
    (1 or 0 for x > 0), x = 0, an infinite a (0 or 1 unless x is infinite too), then an
    infinite x; negative arguments give NaN."""
    def rule(a, x):
        out = fn(a, x)
        lo, hi = (1.0, 0.0) if upper else (0.0, 1.0)  # the values at x = 0 and x = inf
        nan = jnp.nan
        out = jnp.where(jnp.isinf(x), hi, out)
        out = jnp.where(jnp.isinf(a), jnp.where(jnp.isinf(x), nan, lo), out)
        out = jnp.where(x == 0, lo, out)
        out = jnp.where(a == 0, jnp.where(x > 0, hi, nan), out)
        return jnp.where((x < 0) | (a < 0), nan, out).astype(out.dtype)

    return rule


for _op, _fn in [
    (aten.igamma, _with_cephes_edges(in_float64(jsp.gammainc), upper=False)),
    (aten.igammac, _with_cephes_edges(in_float64(jsp.gammaincc), upper=True)),
    (aten.special_xlog1py, jsp.xlog1py),
    # CPU sums in float64 (its acc_type): in float32 the terms below 1 overflow and cancel
    # (-inf + inf = NaN where CPU gives +-inf), and jax's series is NaN for a large s
    # (zeta(1e5, 1), zeta(4988429, 501)) where CPU gives 1 and 0.
    (aten.special_zeta, in_float64(_zeta)),
]:
    _binary(_op, _fn)


@lowering(aten.polygamma, static=("n",))
def _polygamma(n, self):
    x = float_of(self)
    if n == 0:
        return _digamma(x)
    if n == 1:
        return _trigamma(x)
    # (-1)^(n+1) n! zeta(n + 1, x) for x > 0, computed in float32 at least (bfloat16 rounds
    # once at the end). Below zero CPU sums zeta's series in float64; its terms cancel, so in
    # float32 the reflection formula is used instead:
    # psi_n(x) = (-1)^n psi_n(1 - x) - pi^(n+1) P_n(cot(pi x)), P_n(cot u) = d^n/du^n cot u.
    x32 = x.astype(jnp.promote_types(x.dtype, jnp.float32))
    sign = 1.0 if n % 2 else -1.0
    neg = x32 < 0
    positive = jnp.where(neg, 1 - x32, x32)
    series = sign * math.factorial(n) * _zeta_positive(float(n + 1), positive)
    r = x32 - jnp.round(x32)  # exact; cot(pi x) = cos(pi r) / sin(pi r), cos via sin near 1/2
    cot = jnp.sin(np.pi * (0.5 - jnp.abs(r))) / jnp.sin(np.pi * r)
    reflected = (-1) ** n * series - np.pi ** (n + 1) * horner(_cot_derivative(n), cot)
    pole = neg & ((r == 0) | jnp.isinf(x32))  # CPU: zeta is +inf at non-positive integers
    out = jnp.where(pole, sign * jnp.inf, jnp.where(neg, reflected, series))
    return jnp.where(x32 == 0, sign * jnp.inf, out).astype(x.dtype)


def _cot_derivative(n: int) -> tuple[float, ...]:
    """Coefficients (highest first) of P with d^n/du^n cot(u) = P(cot u): d/du cot = -(1 + c^2)."""
    poly = np.polynomial.Polynomial([0.0, 1.0])
    for _ in range(n):
        poly = poly.deriv() * np.polynomial.Polynomial([-1.0, 0.0, -1.0])
    return tuple(float(c) for c in poly.coef[::-1])


@lowering(aten.mvlgamma, static=("p",))
def _mvlgamma(self, p):
    # CPU's sum of lgammas, each correctly rounded (XLA's float32 ones were 4e-6 off below
    # zero, and five terms add past tolerance where they cancel).
    x = float_of(self)
    terms = lgamma(x[..., None] + jnp.arange(-p / 2 + 0.5, 0.5, 0.5, dtype=x.dtype))
    return jnp.sum(terms, axis=-1) + jnp.asarray(p * (p - 1) * math.log(math.pi) / 4, x.dtype)


@lowering(aten.frexp.Tensor)
def _frexp(self):
    mantissa, exponent = jnp.frexp(self)
    return mantissa, exponent.astype(jnp.int32)

