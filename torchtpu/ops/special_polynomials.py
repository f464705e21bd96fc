"""Orthogonal polynomials of torch.special: Chebyshev (and shifted), Hermite, Laguerre, Legendre.

PyTorch's CPU kernels (ATen/native/Math.h) evaluate each element with a three-term recurrence
on an integer degree, with closed forms at the interval ends and, for Chebyshev polynomials of
high degree inside (-1, 1), trigonometric formulas. The rules follow the same case order and
the same arithmetic, so float32 results agree with CPU's to rounding. The degree ``n`` is a
tensor: the recurrence runs to the largest degree present, each element keeping its own value
once its degree is reached.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import torch
from jax import lax

from .dtypes import astype, float_of, promote
from .registry import lowering

aten = torch.ops.aten


def _operands(x, n):
    """x in PyTorch's float result dtype, and the degree as int64 (C's truncation toward zero;
    a NaN, infinite or out-of-range degree counts as negative, as the x86 conversion makes it)."""
    x, n = promote(x, n)
    x, n = float_of(x), float_of(n)
    degree = astype(n, np.dtype(np.int64))
    return x, jnp.broadcast_to(degree, jnp.broadcast_shapes(x.shape, n.shape))


def _recur(x, n, first, step):
    """P_n(x) for n >= 1 from P_0 = 1, P_1 = ``first``: the j-th step (j = 1 .. n - 1) maps
    (P_{j-1}, P_j) to P_{j+1}. Elements stop at their own degree, or once they are NaN."""
    x = jnp.broadcast_to(x, n.shape)
    p0 = jnp.ones_like(x)
    q0 = jnp.broadcast_to(first, n.shape).astype(x.dtype)
    last = jnp.max(n, initial=0) if n.size else jnp.int64(0)

    def cond(state):
        j, _, q = state
        return (j < last) & jnp.any((j < n) & ~jnp.isnan(q))

    def body(state):
        j, p, q = state
        r = step(x, j.astype(x.dtype), p, q)
        live = (j < n) & ~jnp.isnan(q)
        return j + 1, jnp.where(live, q, p), jnp.where(live, r, q)

    _, _, q = lax.while_loop(cond, body, (jnp.int64(1), p0, q0))
    return q


def _low_degrees(n, x, first, value):
    """0 below degree 0, 1 at degree 0, ``first`` at degree 1, ``value`` above."""
    one = jnp.ones_like(x)
    return jnp.where(n < 0, jnp.zeros_like(x),
                     jnp.where(n == 0, one, jnp.where(n == 1, first, value)))


def _chebyshev(kind: str, x, n, shifted: bool):
    dt = x.dtype
    t = x + x - 1 if shifted else x
    two_t = t + t
    first = {"t": t, "u": t + t, "v": t + t - 1, "w": t + t + 1}[kind]
    value = _recur(t, n, first, lambda _, j, p, q: two_t * q - p)
    value = _low_degrees(n, x, first, value)

    nf = n.astype(dt)
    even = n % 2 == 0
    plus = (x == 1) if shifted else (jnp.abs(x) == 1) & (x > 0)
    minus = (x == 0) if shifted else (jnp.abs(x) == 1) & (x < 0)
    # Values at the ends of the interval, and the degree above which the trigonometric form
    # is used inside it.
    if kind == "t":
        at_plus, at_minus = jnp.ones_like(t), jnp.where(even, 1, -1).astype(dt)
        trig_from = 6
    elif kind == "u":
        at_plus, at_minus = nf + 1, jnp.where(even, nf + 1, -(nf + 1))
        trig_from = 6 if shifted else 8
    elif kind == "v":
        at_plus, at_minus = jnp.ones_like(t), jnp.where(even, nf + nf + 1, -(nf + nf + 1))
        trig_from = 6 if shifted else 8
    else:
        at_plus, at_minus = nf + nf + 1, jnp.where(even, 1, -1).astype(dt)
        trig_from = 4 if shifted else 8

    inside = jnp.abs(t) < 1
    theta = jnp.arccos(jnp.where(inside, t, 0))
    if kind == "t":
        trig = jnp.cos(nf * theta)
    elif kind == "u":
        s = jnp.sin(theta)
        trig = jnp.where(s != 0, jnp.sin((nf + 1) * theta) / jnp.where(s != 0, s, 1),
                         (nf + 1) * jnp.cos((nf + 1) * theta) / t)
    elif kind == "v":
        half = theta / 2
        trig = jnp.where(jnp.sin(half) != 1, jnp.cos((nf + 0.5) * theta) / jnp.cos(half),
                         at_minus)
    else:
        half = theta / 2
        degenerate = jnp.where(t > 0, nf + nf + 1, at_minus)
        trig = jnp.where(jnp.cos(half) != 1, jnp.sin((nf + 0.5) * theta) / jnp.sin(half),
                         degenerate)

    value = jnp.where((n > trig_from) & inside, trig, value)
    value = jnp.where(minus, at_minus, value)
    value = jnp.where(plus, at_plus, value)
    return jnp.where(n < 0, jnp.zeros_like(value), value)


def _register_chebyshev(op, kind, shifted):
    @lowering(op)
    def rule(x, n):
        x, n = _operands(x, n)
        return _chebyshev(kind, x, n, shifted)

    rule.__name__ = f"_{'shifted_' if shifted else ''}chebyshev_polynomial_{kind}"


for _kind in "tuvw":
    _register_chebyshev(getattr(aten, f"special_chebyshev_polynomial_{_kind}"), _kind, False)
    _register_chebyshev(getattr(aten, f"special_shifted_chebyshev_polynomial_{_kind}"), _kind,
                        True)


def _hermite_limit(dtype) -> int:
    # Math.h's getHermitianLimit: degrees above it give NaN.
    return 512 if dtype == jnp.float64 else 128


@lowering(aten.special_hermite_polynomial_h)
def _hermite_polynomial_h(x, n):
    x, n = _operands(x, n)
    first = x + x
    value = _recur(x, n, first, lambda x, j, p, q: (x + x) * q - (j + j) * p)
    value = jnp.where(n > _hermite_limit(x.dtype), jnp.nan, value)
    return _low_degrees(n, x, first, value)


@lowering(aten.special_hermite_polynomial_he)
def _hermite_polynomial_he(x, n):
    x, n = _operands(x, n)
    value = _recur(x, n, x, lambda x, j, p, q: x * q - j * p)
    value = jnp.where(n > _hermite_limit(x.dtype), jnp.nan, value)
    return _low_degrees(n, x, x, value)


@lowering(aten.special_laguerre_polynomial_l)
def _laguerre_polynomial_l(x, n):
    x, n = _operands(x, n)
    first = 1 - x
    value = _recur(x, n, first, lambda x, j, p, q: (((j + j) + (1 - x)) * q - j * p) / (j + 1))
    value = _low_degrees(n, x, first, value)
    return jnp.where((n >= 0) & (x == 0), jnp.ones_like(value), value)


@lowering(aten.special_legendre_polynomial_p)
def _legendre_polynomial_p(x, n):
    x, n = _operands(x, n)
    value = _recur(x, n, x, lambda x, j, p, q: ((j + j + 1) * x * q - j * p) / (j + 1))
    value = _low_degrees(n, x, x, value)
    ends = jnp.where((x > 0) | (n % 2 == 0), 1, -1).astype(x.dtype)
    return jnp.where((n >= 0) & (jnp.abs(x) == 1), ends, value)
