"""Special functions (torch.special): gamma family, Bessel functions, error functions."""

from __future__ import annotations

import jax.numpy as jnp
import jax.scipy.special as jsp
import torch

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


def _bessel_j(n):
    return lambda x: jsp.bessel_jn(x, v=n)[n]


def _spherical_bessel_j0(x):
    # sin(x)/x, with the series near zero where the quotient loses precision.
    small = jnp.abs(x) < 0.5
    xs = jnp.where(small, 1.0, x)
    x2 = x * x
    series = 1 - x2 / 6 * (1 - x2 / 20 * (1 - x2 / 42))
    return jnp.where(small, series, jnp.sin(xs) / xs)


for _op, _fn in [
    (aten.special_i0e, jsp.i0e), (aten.special_i1, jsp.i1), (aten.special_i1e, jsp.i1e),
    (aten.special_ndtri, jsp.ndtri), (aten.special_log_ndtr, jsp.log_ndtr),
    (aten.special_erfcx, jsp.erfcx), (aten.special_ndtr, jsp.ndtr),
    (aten.special_modified_bessel_i0, jsp.i0), (aten.special_modified_bessel_i1, jsp.i1),
    (aten.special_bessel_j0, _bessel_j(0)), (aten.special_bessel_j1, _bessel_j(1)),
    (aten.special_spherical_bessel_j0, _spherical_bessel_j0),
    (aten.special_entr, jsp.entr),
]:
    _unary(_op, _fn)

for _op, _fn in [
    (aten.igamma, jsp.gammainc), (aten.igammac, jsp.gammaincc),
    (aten.special_zeta, jsp.zeta), (aten.special_xlog1py, jsp.xlog1py),
]:
    _binary(_op, _fn)


@lowering(aten.polygamma, static=("n",))
def _polygamma(n, self):
    x = float_of(self)
    if n == 0:
        return jsp.digamma(x)
    return jsp.polygamma(n, x)


@lowering(aten.mvlgamma, static=("p",))
def _mvlgamma(self, p):
    return jsp.multigammaln(float_of(self), p)


@lowering(aten.frexp.Tensor)
def _frexp(self):
    mantissa, exponent = jnp.frexp(self)
    return mantissa, exponent.astype(jnp.int32)

