"""Batch normalisation, as CPU's kernels compute it.

For a float32 input CPU sums the statistics in float64 (acc_type), rounds the mean and the
sum of squared deviations to float32, takes invstd in float64, and applies ``x * alpha +
beta`` with ``alpha = invstd * weight`` and ``beta = bias - mean * alpha``; its backward
works from the saved statistics. Here every sum is about as accurate as a float64 one
(``reduction.channel_sum``: blocks in float32, their sums in float64; float32 on TPUs, which
have none), as CPU's or more (its backward and channels_last kernels sum in float32).
"""

from __future__ import annotations

import jax.numpy as jnp
import torch

from .dtypes import LOW_PRECISION, check_with_meta, upcast
from .elementwise import exact_rsqrt
from .reduction import channel_sum, cpu_acc
from .registry import lowering

aten = torch.ops.aten


def _per_channel(v, ndim: int):
    return v.reshape((1, -1) + (1,) * (ndim - 2))


def _rsqrt(v, eps):
    """``1 / sqrt(v + eps)`` in the accumulation dtype (CPU's InvStd<acc_type>)."""
    acc = cpu_acc(v.dtype)
    if acc == v.dtype:
        return exact_rsqrt(v + eps)
    return 1 / jnp.sqrt(v.astype(acc) + eps)


def _apply(x, xf, mean, invstd, weight, bias):
    """``x * alpha + beta`` per channel, in float32 for low-precision input."""
    alpha = invstd if weight is None else invstd * upcast(weight)
    beta = -mean * alpha if bias is None else upcast(bias) - mean * alpha
    return (xf * _per_channel(alpha, x.ndim) + _per_channel(beta, x.ndim)).astype(x.dtype)


def _bn_stats_dtype(input, *params):  # noqa: A002
    """CPU keeps the saved statistics in float32 for bfloat16 input with float32 parameters
    (its "mixed type"), and in the input's dtype otherwise."""
    mixed = input.dtype in LOW_PRECISION and any(
        p is not None and p.dtype == jnp.float32 for p in params)
    return jnp.dtype(jnp.float32) if mixed else input.dtype


def _batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):  # noqa: A002
    """Returns (out, save_mean, save_invstd, new_running_mean, new_running_var) as CPU computes
    them, the statistics stored in their dtype (bfloat16 for bfloat16 input unless the
    parameters are float32). Outside training the saved statistics are empty, as on CPU."""
    stats = _bn_stats_dtype(input, weight, bias, running_mean, running_var)
    xf = upcast(input)
    if not training:
        invstd = exact_rsqrt(upcast(running_var) + eps)
        out = _apply(input, xf, upcast(running_mean), invstd, weight, bias)
        empty = jnp.zeros((0,), stats)
        return out, empty, empty, running_mean, running_var
    n = xf.size // xf.shape[1]
    mean = (channel_sum(xf) / n).astype(xf.dtype)
    var_sum = channel_sum(jnp.square(xf - _per_channel(mean, xf.ndim))).astype(xf.dtype)
    if stats != jnp.float16:  # CPU's float16 kernel keeps float32 statistics until invstd
        mean, var_sum = mean.astype(stats), var_sum.astype(stats)
    biased = upcast(var_sum) / n
    if stats == jnp.bfloat16:  # (c10::BFloat16 / int64_t rounds, the integer too)
        biased = (upcast(var_sum) / jnp.asarray(n, jnp.float32).astype(stats)).astype(stats)
    invstd = _rsqrt(upcast(biased), eps).astype(stats)
    out = _apply(input, xf, upcast(mean.astype(stats)), upcast(invstd), weight, bias)
    if stats == jnp.bfloat16:
        new_rm, new_rv = _bfloat16_running_update(mean, var_sum, n, running_mean, running_var,
                                                  momentum)
        return out, mean, invstd, new_rm, new_rv
    new_rm = new_rv = None
    if running_mean is not None:
        new_rm = (momentum * upcast(mean) + (1 - momentum) * upcast(running_mean)).astype(
            running_mean.dtype)
    if running_var is not None:
        unbiased = upcast(var_sum) / (n - 1) if n > 1 else jnp.full(var_sum.shape, jnp.nan)
        new_rv = (momentum * unbiased + (1 - momentum) * upcast(running_var)).astype(
            running_var.dtype)
    return out, mean.astype(stats), invstd, new_rm, new_rv


def _bfloat16_running_update(mean, var_sum, n, running_mean, running_var, momentum):
    """CPU's update with bfloat16 statistics and parameters: momentum is cast to bfloat16 and
    each c10::BFloat16 operation of two bfloat16 values (or one and an integer) rounds to
    bfloat16; one with a float stays float. Rounding once at the end drifted the running
    statistics a few bfloat16 steps per batch from CPU's."""
    bf16, f32 = jnp.bfloat16, jnp.float32

    def rounded(v):
        return v.astype(bf16).astype(f32)

    m = rounded(jnp.asarray(momentum, f32))
    keep = rounded(1 - m)
    new_rm = new_rv = None
    if running_mean is not None:
        new_rm = (rounded(m * upcast(mean)) + rounded(keep * upcast(running_mean))).astype(bf16)
    if running_var is not None:
        unbiased = (rounded(upcast(var_sum) / rounded(jnp.asarray(n - 1, f32))) if n > 1
                    else jnp.full(var_sum.shape, jnp.nan, f32))
        new_rv = (m * unbiased + rounded(keep * upcast(running_var))).astype(bf16)
    return new_rm, new_rv


def _updating(op):
    """native_batch_norm's rule (and _native_batch_norm_legit's): the outputs, then the new
    values of the mutated running statistics (schema order)."""
    def rule(input, weight, bias, running_mean, running_var, training, momentum, eps):  # noqa: A002
        check_with_meta(op, input, weight, bias, running_mean, running_var, training, momentum,
                        eps)
        out, mean, invstd, rm, rv = _batch_norm(input, weight, bias, running_mean, running_var,
                                                training, momentum, eps)
        return (out, mean, invstd) + tuple(v for v in (rm, rv) if v is not None)

    rule.__name__ = f"_{op._schema.name.split('::')[1]}"
    return rule


# The batch norm rules skip the meta kernel's outputs (its saved statistics are float32 and
# never empty, CPU's are neither) but run it for its argument checks.
lowering(aten.native_batch_norm, mutates=("running_mean", "running_var"), skip_meta=True)(
    _updating(aten.native_batch_norm.default))
lowering(aten._native_batch_norm_legit.default, skip_meta=True)(
    _updating(aten._native_batch_norm_legit.default))


@lowering(aten._native_batch_norm_legit.no_stats, skip_meta=True)
def _native_batch_norm_no_stats(input, weight, bias, training, momentum, eps):  # noqa: A002
    check_with_meta(aten._native_batch_norm_legit.no_stats, input, weight, bias, training,
                      momentum, eps)
    out, mean, invstd, _, _ = _batch_norm(input, weight, bias, None, None, True, momentum, eps)
    return out, mean, invstd


@lowering(aten._native_batch_norm_legit_no_training, skip_meta=True)
def _native_batch_norm_no_training(input, weight, bias, running_mean, running_var, momentum,  # noqa: A002
                                   eps):
    check_with_meta(aten._native_batch_norm_legit_no_training.default, input, weight, bias,
                      running_mean, running_var, momentum, eps)
    out, mean, invstd, _, _ = _batch_norm(input, weight, bias, running_mean, running_var, False,
                                          momentum, eps)
    return out, mean, invstd


@lowering(aten._batch_norm_with_update.default, skip_meta=True)
def _batch_norm_with_update(input, weight, bias, running_mean, running_var, momentum, eps):  # noqa: A002
    check_with_meta(aten._batch_norm_with_update.default, input, weight, bias, running_mean,
                      running_var, momentum, eps)
    out, mean, invstd, rm, rv = _batch_norm(input, weight, bias, running_mean, running_var,
                                            True, momentum, eps)
    reserve = jnp.zeros((0,), jnp.uint8)  # cuDNN's workspace; empty elsewhere
    return out, mean, invstd, reserve, rm, rv


@lowering(aten._batch_norm_no_update, skip_meta=True)
def _batch_norm_no_update(input, weight, bias, running_mean, running_var, momentum, eps):  # noqa: A002
    check_with_meta(aten._batch_norm_no_update.default, input, weight, bias, running_mean,
                      running_var, momentum, eps)
    training = running_mean is None or running_var is None
    out, mean, invstd, _, _ = _batch_norm(input, weight, bias, running_mean, running_var,
                                          training, momentum, eps)
    return out, mean, invstd, jnp.zeros((0,), jnp.uint8)


@lowering(aten.native_batch_norm_backward)
def _native_batch_norm_backward(grad_out, input, weight, running_mean, running_var,  # noqa: A002
                                save_mean, save_invstd, train, eps, output_mask):
    """CPU's closed form from the saved statistics (the running ones outside training):
    ``dx = (dy - sum/N - (x - mean) * dotp * invstd^2 / N) * invstd * w``, ``dw = dotp *
    invstd``, ``db = sum``."""
    param_dtype = weight.dtype if weight is not None else input.dtype
    # CPU accumulates a bfloat16/float16 backward in float32 and rounds each gradient once
    # (the bias's gradient of bfloat16 activations under autocast is a float32 sum).
    dy, x = upcast(grad_out), upcast(input)
    w = jnp.ones((input.shape[1],), x.dtype) if weight is None else upcast(weight)
    if train:
        mean, invstd = upcast(save_mean), upcast(save_invstd)
    else:
        mean, invstd = upcast(running_mean), exact_rsqrt(upcast(running_var) + eps)
    centred = x - _per_channel(mean, x.ndim)
    total, dotp = channel_sum(dy), channel_sum(centred * dy)
    if train:
        n = x.size // x.shape[1]
        k = (dotp * invstd * invstd / n).astype(x.dtype)
        grad_mean = (total / n).astype(x.dtype)
        gx = ((dy - _per_channel(grad_mean, x.ndim) - centred * _per_channel(k, x.ndim))
              * _per_channel(invstd * w, x.ndim))
    else:
        gx = dy * _per_channel(invstd * w, x.ndim)
    return (gx.astype(input.dtype) if output_mask[0] else None,
            (dotp * invstd).astype(param_dtype) if output_mask[1] else None,
            total.astype(param_dtype) if output_mask[2] else None)
