"""Activations and their backward rules (autograd calls the backward rules directly).

Most follow CPU's formulas rather than jax.nn's, so results agree with CPU's to the last bit.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import torch

from .dtypes import opmath
from .elementwise import cpu_maximum, cpu_minimum
from .registry import lowering

aten = torch.ops.aten


# GELU and its gradient by CPU's formulas: jax's exact form, x * erfc(-x / sqrt 2) / 2, is
# the more accurate in the far negative tail, where CPU's 1 + erf(...) cancels to 0 (gelu(-13)
# is -0.0 on CPU and -8e-38 in jax: a fifth of bfloat16 results differed in their last bit).
_SQRT_2_PI = math.sqrt(2 / math.pi)  # tanh form's kBeta
_KAPPA = 0.044715


def _gelu_tanh_inner(x):
    return _SQRT_2_PI * (x + _KAPPA * (x * x * x))


@lowering(aten.gelu, static=("approximate",))
@opmath
def _gelu(self, *, approximate="none"):
    if approximate == "tanh":
        return 0.5 * self * (1 + jnp.tanh(_gelu_tanh_inner(self)))
    return self * 0.5 * (1 + jax.scipy.special.erf(self * math.sqrt(0.5)))


@lowering(aten.gelu_backward, static=("approximate",))
@opmath
def _gelu_backward(grad_output, self, *, approximate="none"):
    x = self
    if approximate == "tanh":
        t = jnp.tanh(_gelu_tanh_inner(x))
        inner_derivative = _SQRT_2_PI * (1 + 3 * _KAPPA * (x * x))
        return grad_output * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * inner_derivative)
    cdf = 0.5 * (1 + jax.scipy.special.erf(x * math.sqrt(0.5)))
    pdf = (2 / math.sqrt(math.pi) * math.sqrt(0.5) * 0.5) * jnp.exp(x * x * -0.5)
    return grad_output * (cdf + x * pdf)


# SiLU by CPU's formula, x / (1 + exp(-x)): jax's x * sigmoid(x) differed from CPU's in the
# last bit for a quarter of float32 values (0.4% this way).
@lowering(aten.silu)
@opmath
def _silu(self):
    return self / (1 + jnp.exp(-self))


@lowering(aten.silu_backward)
@opmath
def _silu_backward(grad_output, self):
    s = 1 / (1 + jnp.exp(-self))
    return grad_output * s * (1 + self * (1 - s))


@lowering(aten.sigmoid_backward)
def _sigmoid_backward(grad_output, output):
    if output.dtype == jnp.float16:  # CPU's kernel: float16 arithmetic, in this order
        return grad_output * (1 - output) * output
    return opmath(lambda g, y: g * y * (1 - y))(grad_output, output)


@lowering(aten.tanh_backward)
@opmath
def _tanh_backward(grad_output, output):
    return grad_output * (1 - output * output)


@lowering(aten.threshold)
def _threshold(self, threshold, value):
    return jnp.where(self <= threshold, jnp.asarray(value, self.dtype), self)


@lowering(aten.threshold_backward)
def _threshold_backward(grad_output, self, threshold):
    return jnp.where(self <= threshold, jnp.zeros((), grad_output.dtype), grad_output)


@lowering(aten.leaky_relu)
@opmath
def _leaky_relu(self, negative_slope=0.01):
    return jnp.where(self > 0, self, self * negative_slope)


# Static: CPU refuses a negative slope after an in-place forward (nn_checks), a check of the
# slope's value; one model uses one slope.
@lowering(aten.leaky_relu_backward, static=("negative_slope", "self_is_result"))
@opmath
def _leaky_relu_backward(grad_output, self, negative_slope, self_is_result):
    return jnp.where(self > 0, grad_output, grad_output * negative_slope)


@lowering(aten.hardtanh)
def _hardtanh(self, min_val=-1, max_val=1):
    x = cpu_minimum(cpu_maximum(self, jnp.asarray(min_val, self.dtype)),
                    jnp.asarray(max_val, self.dtype))
    return x.astype(self.dtype)


@lowering(aten.hardtanh_backward)
def _hardtanh_backward(grad_output, self, min_val, max_val):
    inside = (self > min_val) & (self < max_val)
    return jnp.where(inside, grad_output, jnp.zeros((), grad_output.dtype))


@lowering(aten.elu)
@opmath
def _elu(self, alpha=1, scale=1, input_scale=1):
    # As CPU's kernel: expm1 (exp(x) - 1 lost ~500x its precision near 0) times the two
    # coefficients multiplied first, in the compute dtype.
    negcoef = jnp.asarray(alpha, self.dtype) * jnp.asarray(scale, self.dtype)
    neg = jnp.expm1(self * input_scale) * negcoef
    return jnp.where(self > 0, self * scale, neg)


@lowering(aten.softplus)
@opmath
def _softplus(self, beta=1, threshold=20):
    bx = self * beta
    return jnp.where(bx > threshold, self, jnp.log1p(jnp.exp(bx)) / beta)


@lowering(aten.hardsigmoid)
@opmath
def _hardsigmoid(self):
    return jnp.clip(self / 6 + 0.5, 0, 1).astype(self.dtype)


@lowering(aten.hardswish)
@opmath
def _hardswish(self):
    return self * jnp.clip(self + 3, 0, 6) / 6


@lowering(aten.mish)
@opmath
def _mish(self):
    return self * jnp.tanh(jax.nn.softplus(self))


@lowering(aten.mish_backward)
@opmath
def _mish_backward(grad_output, self):
    # tanh(softplus(x)) and 1 - tanh² in closed form: 1 - t*t cancels near t = 1, where XLA's
    # tanh's last bits made the gradient 3x further from float64 than CPU's. Past x = 20, t
    # rounds to 1 (and e^2x would overflow float32).
    u = jnp.exp(jnp.minimum(self, 20))
    n = u * (u + 2)
    t = n / (n + 2)
    sech2 = jnp.where(self > 20, 0, 4 * (n + 1) / ((n + 2) * (n + 2)))
    return grad_output * (t + self * jax.nn.sigmoid(self) * sech2)


@lowering(aten.softshrink_backward)
def _softshrink_backward(grad_output, self, lambd):
    return jnp.where(jnp.abs(self) > lambd, grad_output, jnp.zeros((), grad_output.dtype))


@lowering(aten.hardshrink_backward)
def _hardshrink_backward(grad_out, self, lambd):
    return jnp.where(jnp.abs(self) > lambd, grad_out, jnp.zeros((), grad_out.dtype))


def _glu_halves(x, half: int, dim: int):
    return (jax.lax.slice_in_dim(x, 0, half, axis=dim),
            jax.lax.slice_in_dim(x, half, 2 * half, axis=dim))


# glu's forward-mode formulas (derivatives.yaml) call kernels of their own, which have no
# decomposition: CPU's glu_jvp kernel, one pass, and glu_backward_jvp's composite of ops.
@lowering(aten.glu_jvp)
def _glu_jvp(glu, x, dx, dim):
    dim = dim % x.ndim
    _, b = _glu_halves(x, glu.shape[dim], dim)
    da, db = _glu_halves(dx, glu.shape[dim], dim)
    sig_b = 1 / (1 + jnp.exp(-b))
    return da * sig_b + glu * (db - sig_b * db)


@lowering(aten.glu_backward_jvp)
def _glu_backward_jvp(grad_x, grad_glu, x, dgrad_glu, dx, dim):
    dim = dim % x.ndim
    half = grad_glu.shape[dim]
    a, b = _glu_halves(x, half, dim)
    da, db = _glu_halves(dx, half, dim)
    grad_x_a, _ = _glu_halves(grad_x, half, dim)
    sig_b = jax.nn.sigmoid(b)
    glu = a * sig_b
    db_neg_sig_b = db - db * sig_b
    dgrad_x_a = dgrad_glu * sig_b + grad_x_a * db_neg_sig_b
    dgrad_x_b = dgrad_x_a * (a - glu) + grad_x_a * (da - da * sig_b - glu * db_neg_sig_b)
    return jnp.concatenate([dgrad_x_a, dgrad_x_b], axis=dim)
