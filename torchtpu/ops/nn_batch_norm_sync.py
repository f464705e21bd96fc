"""The batch norm pieces ``nn.SyncBatchNorm`` calls between its collectives.

Each process computes its own statistics (``batch_norm_stats``), gathers every process's,
combines them weighted by count (``batch_norm_gather_stats_with_counts``) and normalises
(``batch_norm_elemt``); the backward reduces locally (``batch_norm_backward_reduce``),
all-reduces the two sums and finishes elementwise (``batch_norm_backward_elemt``). PyTorch
has these kernels for CUDA only; the formulas are CUDA's, statistics in float32 for
bfloat16/float16 input as there.
"""

from __future__ import annotations

import jax.numpy as jnp
import torch

from .dtypes import upcast
from .elementwise import exact_rsqrt
from .registry import lowering

aten = torch.ops.aten


def _channel_axes(x) -> tuple[int, ...]:
    return (0,) + tuple(range(2, x.ndim))


def _per_channel(v, x):
    return v.reshape((1, -1) + (1,) * (x.ndim - 2))


def _invstd(var, eps):
    """CUDA's ``InvStd``: 0 where both the variance and eps are 0, instead of inf."""
    safe = jnp.where(var + eps == 0, 1, var + eps)
    return jnp.where(var + eps == 0, 0, exact_rsqrt(safe))


@lowering(aten.batch_norm_stats, skip_meta=True)
def _batch_norm_stats(input, eps):  # noqa: A002
    x = upcast(input)
    axes = _channel_axes(x)
    mean = jnp.mean(x, axis=axes)
    var = jnp.mean(jnp.square(x - _per_channel(mean, x)), axis=axes)
    return mean, _invstd(var, eps)


@lowering(aten.batch_norm_gather_stats_with_counts, mutates=("running_mean", "running_var"),
          skip_meta=True)
def _batch_norm_gather_stats_with_counts(input, mean, invstd, running_mean, running_var,  # noqa: A002
                                         momentum, eps, counts):
    """The global mean and invstd from each process's (row of ``mean``/``invstd``) and its
    element count; the running statistics move toward them (the variance unbiased by the
    total count), in place as on CUDA."""
    counts = counts.astype(mean.dtype)[:, None]
    total = jnp.sum(counts, axis=0)
    global_mean = jnp.sum(mean * counts, axis=0) / total
    var = (1 / jnp.square(invstd) - eps) + jnp.square(mean - global_mean)
    global_var = jnp.sum(var * counts, axis=0) / total
    out = (global_mean, _invstd(global_var, eps))
    if running_mean is not None:
        out += ((momentum * global_mean + (1 - momentum) * upcast(running_mean)).astype(
            running_mean.dtype),)
    if running_var is not None:
        unbiased = global_var * total / (total - 1)
        out += ((momentum * unbiased + (1 - momentum) * upcast(running_var)).astype(
            running_var.dtype),)
    return out


@lowering(aten.batch_norm_gather_stats, mutates=("running_mean", "running_var"), skip_meta=True)
def _batch_norm_gather_stats(input, mean, invstd, running_mean, running_var, momentum, eps,  # noqa: A002
                             count):
    counts = jnp.full((mean.shape[0],), count, mean.dtype)
    return _batch_norm_gather_stats_with_counts(input, mean, invstd, running_mean, running_var,
                                                momentum, eps, counts)


@lowering(aten.batch_norm_elemt, skip_meta=True)
def _batch_norm_elemt(input, weight, bias, mean, invstd, eps):  # noqa: A002
    x = upcast(input)
    out = (x - _per_channel(upcast(mean), x)) * _per_channel(upcast(invstd), x)
    if weight is not None:
        out = out * _per_channel(upcast(weight), x)
    if bias is not None:
        out = out + _per_channel(upcast(bias), x)
    return out.astype(input.dtype)


@lowering(aten.batch_norm_backward_reduce, skip_meta=True)
def _batch_norm_backward_reduce(grad_out, input, mean, invstd, weight, input_g, weight_g,  # noqa: A002
                                bias_g):
    """Per channel: the sums of dy and of dy * (x - mean) (None unless ``input_g``), and the
    weight's and bias's gradients (None unless asked for)."""
    dy, x = upcast(grad_out), upcast(input)
    axes = _channel_axes(x)
    sum_dy = jnp.sum(dy, axis=axes)
    sum_dy_xmu = jnp.sum(dy * (x - _per_channel(upcast(mean), x)), axis=axes)
    param_dtype = weight.dtype if weight is not None else mean.dtype
    return (sum_dy.astype(mean.dtype) if input_g else None,
            sum_dy_xmu.astype(mean.dtype) if input_g else None,
            (sum_dy_xmu * upcast(invstd)).astype(param_dtype) if weight_g else None,
            sum_dy.astype(param_dtype) if bias_g else None)


@lowering(aten.batch_norm_backward_elemt, skip_meta=True)
def _batch_norm_backward_elemt(grad_out, input, mean, invstd, weight, sum_dy, sum_dy_xmu,  # noqa: A002
                               count):
    """The input's gradient from the all-reduced sums; ``count`` holds each process's
    element count."""
    dy, x = upcast(grad_out), upcast(input)
    mean, invstd = upcast(mean), upcast(invstd)
    total = jnp.sum(count).astype(mean.dtype)
    mean_dy = _per_channel(upcast(sum_dy) / total, x)
    mean_dy_xmu = _per_channel(upcast(sum_dy_xmu) / total, x)
    xmu = x - _per_channel(mean, x)
    scale = _per_channel(invstd, x)
    if weight is not None:
        scale = scale * _per_channel(upcast(weight), x)
    grad = (dy - mean_dy - xmu * _per_channel(jnp.square(invstd), x) * mean_dy_xmu) * scale
    return grad.astype(input.dtype)
