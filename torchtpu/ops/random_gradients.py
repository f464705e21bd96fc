"""Reparameterised gradients of Gamma and Dirichlet (Beta) samples: d sample / d concentration.

``_standard_gamma_grad`` follows ATen's ``standard_gamma_grad_one``, in float64 as on CPU: a
Taylor series for small samples, Rice's saddle-point expansion for large concentrations, else
a fitted bivariate rational function (its coefficients below).
``_dirichlet_grad`` follows ATen's ``dirichlet_grad_one``: Taylor series near 0 and 1, a
saddle-point expansion when both concentrations are large, else a rational correction to an
analytic approximation (its fitted coefficients below). As on CPU, the series run in the
sample's dtype and the other two in float64.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import torch
from jax.scipy.special import digamma

from .registry import lowering

aten = torch.ops.aten


@lowering(aten._standard_gamma_grad)
def _standard_gamma_grad(self, output):
    """d sample / d alpha of a Gamma(alpha, 1) sample (implicit reparameterisation)."""
    alpha, x = (v.astype(jnp.float64) for v in jnp.broadcast_arrays(self, output))
    large = jnp.where((np.float32(0.9) * alpha <= x) & (x <= np.float32(1.1) * alpha),
                      _gamma_grad_near_mean(x, alpha), _gamma_grad_large_alpha(x, alpha))
    out = jnp.where(x < np.float32(0.8), _gamma_grad_small_x(x, alpha),
                    jnp.where(alpha > 8, large, _gamma_grad_rational(x, alpha)))
    return out.astype(self.dtype)


_LOG_SMALLEST_SUBNORMAL = float(np.log(np.nextafter(0.0, 1.0)))


def _gamma_grad_small_x(x, alpha):
    """-(d cdf / d alpha) / pdf from the cdf's Taylor series (0 where that is NaN)."""
    numer, denom = jnp.ones_like(x), alpha
    series1, series2 = numer / denom, numer / (denom * denom)
    for i in range(1, 6):
        numer = numer * (-x / i)
        denom = denom + 1
        series1 = series1 + numer / denom
        series2 = series2 + numer / (denom * denom)
    # -cdf_alpha / pdf with x ** alpha cancelled: CPU's x ** alpha reaches 0 only below
    # float64's smallest subnormal, but XLA flushes subnormals to zero, so the quotient as
    # written would turn 0 / 0 (then 0) far earlier here than on CPU.
    result = -x * jnp.exp(x) * ((jnp.log(x) - digamma(alpha)) * series1 - series2)
    underflow = alpha * jnp.log(x) < _LOG_SMALLEST_SUBNORMAL
    return jnp.where(jnp.isnan(result) | underflow, 0, result)


def _gamma_grad_near_mean(x, alpha):
    """Large alpha, x within 10% of it: the saddle-point expansion's polynomial."""
    numer_1 = 1 + 24 * alpha * (1 + 12 * alpha)
    numer_2 = (1440 * (alpha * alpha) + 6 * x * (53 - 120 * x) - 65 * x * x / alpha
               + alpha * (107 + 3600 * x))
    return numer_1 * numer_2 / (1244160 * (alpha * alpha) * (alpha * alpha))


def _gamma_grad_large_alpha(x, alpha):
    denom = jnp.sqrt(8 * alpha)
    term2 = denom / (alpha - x)
    term3 = (x - alpha - alpha * jnp.log(x / alpha)) ** -1.5
    term23 = jnp.where(x < alpha, term2 - term3, term2 + term3)
    term1 = (jnp.log(x / alpha) * term23
             - jnp.sqrt(2 / alpha) * (alpha + x) / ((alpha - x) * (alpha - x)))
    stirling = 1 + 1 / (12 * alpha) * (1 + 1 / (24 * alpha))
    return -stirling * x * term1 / denom


# ATen's fitted coefficients: [power of u][p's four powers of v, then q's].
_GAMMA_RATIONAL = np.array([
    [0.16009398, -0.094634809, 0.025146376, -0.0030648343,
     1, 0.32668115, 0.10406089, 0.0014179084],
    [0.53487893, 0.1298071, 0.065735949, -0.0015649758,
     0.16639465, 0.020070113, -0.0035938915, -0.00058392623],
    [0.040121004, -0.0065914022, -0.0026286047, -0.0013441777,
     0.017050642, -0.0021309326, 0.00085092367, -1.5247877e-07],
])


def _gamma_grad_rational(x, alpha):
    """exp(p / q), p and q cubic in log(alpha) with coefficients quadratic in log(x / alpha)."""
    u, v = jnp.log(x / alpha), jnp.log(alpha)
    c = [_GAMMA_RATIONAL[0, i] + u * (_GAMMA_RATIONAL[1, i] + u * _GAMMA_RATIONAL[2, i])
         for i in range(8)]
    p = c[0] + v * (c[1] + v * (c[2] + v * c[3]))
    q = c[4] + v * (c[5] + v * (c[6] + v * c[7]))
    return jnp.exp(p / q)


@lowering(aten._dirichlet_grad)
def _dirichlet_grad(x, alpha, total):
    x, alpha, total = jnp.broadcast_arrays(x, alpha, total)
    beta = total - alpha
    boundary = total * x * (1 - x)
    wide = [v.astype(jnp.float64) for v in (x, alpha, total)]
    mid = _beta_grad_alpha_mid(wide[0], wide[1], wide[2] - wide[1])
    out = jnp.where(
        (x <= 0.5) & (boundary < 2.5), _beta_grad_alpha_small(x, alpha, beta),
        jnp.where((x >= 0.5) & (boundary < 0.75), -_beta_grad_beta_small(1 - x, beta, alpha),
                  jnp.where((alpha > 6) & (beta > 6), mid.astype(x.dtype),
                            _rational_correction(*wide, _psi(total) - _psi(alpha))
                            .astype(x.dtype))))
    return out


_PSI_10 = 2.25175258906672110764
_PSI_ASYMPTOTIC = (8.33333333333333333333E-2, -2.10927960927960927961E-2,
                   7.57575757575757575758E-3, -4.16666666666666666667E-3,
                   3.96825396825396825397E-3, -8.33333333333333333333E-3,
                   8.33333333333333333333E-2)


def _psi(x):
    """ATen's ``digamma_one<scalar_t, double>``, step for step: the sum accumulates in float64
    but x is stepped, squared, inverted and logged in its own dtype. Near a pole (the small
    concentrations these gradients see) that rounding moves float32 results by ~1e-3
    relative, so an exact float64 digamma does not give CPU's numbers."""
    acc = jnp.float64
    one, pi = jnp.ones((), x.dtype), jnp.asarray(np.pi, x.dtype)
    negative = x < 0
    pole = (x == 0) | (negative & (x == jnp.floor(x)))
    summand = jnp.where(negative, (-pi / jnp.tan(pi * x)).astype(acc), 0)
    x = jnp.where(negative, one - x, x)
    result = jnp.zeros(x.shape, acc)
    for _ in range(10):  # x >= 0 here, so ten steps reach 10
        below = x < 10
        result = jnp.where(below, result - (one / x).astype(acc), result)
        x = jnp.where(below, x + one, x)
    z = 1.0 / (x * x).astype(acc)
    poly = z * 0
    for c in _PSI_ASYMPTOTIC:
        poly = poly * z + c
    y = jnp.where(x < 1e17, z * poly, 0)
    asymptotic = result + jnp.log(x).astype(acc) - (0.5 / x).astype(acc) - y + summand
    out = jnp.where(x == 10, result + _PSI_10 + summand, asymptotic)
    return jnp.where(pole, jnp.inf, out).astype(x.dtype)


def _beta_grad_alpha_small(x, alpha, beta):
    """Near x = 0: the Taylor series of d cdf / d alpha over the density."""
    factor = _psi(alpha) - _psi(alpha + beta) - jnp.log(x)
    numer = jnp.ones_like(x)
    series = numer / alpha * (factor + 1 / alpha)
    for i in range(1, 11):
        numer = numer * ((i - beta) * x / i)  # CPU's association: float32 rounds alike
        denom = alpha + i
        series = series + numer / denom * (factor + 1 / denom)
    result = x * (1 - x) ** -beta * series
    return jnp.where(jnp.isnan(result), 0, result)


def _beta_grad_beta_small(x, alpha, beta):
    """Near x = 0, with respect to beta (the gradient near 1, mirrored)."""
    factor = _psi(alpha + beta) - _psi(beta)
    numer, betas, dbetas = jnp.ones_like(x), jnp.ones_like(x), jnp.zeros_like(x)
    series = factor / alpha
    for i in range(1, 9):
        numer = numer * (-x / i)
        dbetas = dbetas * (beta - i) + betas
        betas = betas * (beta - i)
        series = series + numer / (alpha + i) * (dbetas + factor * betas)
    result = -((1 - x) ** (1 - beta)) * series
    return jnp.where(jnp.isnan(result), 0, result)


def _beta_grad_alpha_mid(x, alpha, beta):
    """Both concentrations large: Rice's saddle-point expansion (a polynomial at the mean)."""
    total = alpha + beta
    mean = alpha / total
    std = jnp.sqrt(alpha * beta / (total + 1)) / total
    b2 = beta * beta
    poly = 47 * x * b2 * b2 + alpha * (
        (43 + 20 * (16 + 27 * beta) * x) * b2 * beta + alpha * (
            3 * (59 + 180 * beta - 90 * x) * b2 + alpha * (
                (453 + 1620 * beta * (1 - x) - 455 * x) * beta + alpha * (
                    8 * (1 - x) * (135 * beta - 11)))))
    prefactor_num = (1 + 12 * alpha) * (1 + 12 * beta) / (total * total)
    prefactor_den = 12960 * alpha ** 3 * b2 * (1 + 12 * total)
    at_mean = prefactor_num / (1 - x) * poly / prefactor_den

    prefactor = -x / jnp.sqrt(2 * alpha * beta / total)
    stirling = ((1 + 1 / (12 * alpha) + 1 / (288 * alpha * alpha))
                * (1 + 1 / (12 * beta) + 1 / (288 * b2))
                / (1 + 1 / (12 * total) + 1 / (288 * total * total)))
    axbx = alpha * (x - 1) + beta * x
    term1 = ((2 * alpha * alpha * (x - 1) + alpha * beta * (x - 1) - x * b2)
             / (jnp.sqrt(2 * alpha / beta) * total ** 1.5 * axbx * axbx))
    term2 = 0.5 * jnp.log(alpha / (total * x))
    term3 = jnp.sqrt(8 * alpha * beta / total) / axbx
    term4 = (beta * jnp.log(beta / (total * (1 - x)))
             + alpha * jnp.log(alpha / (total * x))) ** -1.5
    away = stirling * prefactor * (term1 + term2 * (term3 + jnp.where(x < mean, term4, -term4)))
    return jnp.where((mean - 0.1 * std <= x) & (x <= mean + 0.1 * std), at_mean, away)


# ATen's fitted coefficients: [numerator, denominator][power of u][power of a][power of b].
_RATIONAL = np.array([
    [[[1.003668233, -0.01061107488, -0.0657888334, 0.01201642863],
      [0.6336835991, -0.3557432599, 0.05486251648, -0.001465281033],
      [-0.03276231906, 0.004474107445, 0.002429354597, -0.0001557569013]],
     [[0.221950385, -0.3187676331, 0.01799915743, 0.01074823814],
      [-0.2951249643, 0.06219954479, 0.01535556598, 0.001550077057],
      [0.02155310298, 0.004170831599, 0.001292462449, 6.976601077e-05]],
     [[-0.05980841433, 0.008441916499, 0.01085618172, 0.002319392565],
      [0.02911413504, 0.01400243777, -0.002721828457, 0.000751041181],
      [0.005900514878, -0.001936558688, -9.495446725e-06, 5.385558597e-05]]],
    [[[1, -0.02924021934, -0.04438342661, 0.007285809825],
      [0.6357567472, -0.3473456711, 0.05454656494, -0.002407477521],
      [-0.03301322327, 0.004845219414, 0.00231480583, -0.0002307248149]],
     [[0.5925320577, -0.1757678135, 0.01505928619, 0.000564515273],
      [0.1014815858, -0.06589186703, 0.01272886114, -0.0007316646956],
      [-0.007258481865, 0.001096195486, 0.0003934994223, -4.12701925e-05]],
     [[0.06469649321, -0.0236701437, 0.002902096474, -5.896963079e-05],
      [0.001925008108, -0.002869809258, 0.0008000589141, -6.063713228e-05],
      [-0.0003477407336, 6.959756487e-05, 1.097287507e-05, -1.650964693e-06]]],
])


def _rational_correction(x, alpha, total, psi_difference):
    """Elsewhere: x (psi(total) - psi(alpha)) / beta, corrected by a fitted rational function
    of log x, log(alpha / x) and log(total) - log(alpha / x). As on CPU, the digammas are
    taken in the inputs' own dtype (``psi_difference``), the rest in float64."""
    u = jnp.log(x)
    a = jnp.log(alpha) - u
    b = jnp.log(total) - a
    p = q = jnp.zeros_like(x)
    for i, pow_u in enumerate((1, u, u * u)):
        for j, pow_a in enumerate((1, a, a * a)):
            c = _RATIONAL[:, i, j]
            p = p + pow_u * pow_a * (c[0, 0] + b * (c[0, 1] + b * (c[0, 2] + b * c[0, 3])))
            q = q + pow_u * pow_a * (c[1, 0] + b * (c[1, 1] + b * (c[1, 2] + b * c[1, 3])))
    return p / q * x * psi_difference.astype(x.dtype) / (total - alpha)
