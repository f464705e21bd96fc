"""Factories and fills: full, zeros, arange, linspace, eye, clone, fill_."""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import torch

from .dtypes import default_float, to_jax_dtype
from .registry import lowering

aten = torch.ops.aten


def _dtype(dtype, like=None, fill=None):
    if dtype is not None:
        return to_jax_dtype(dtype)
    if like is not None:
        return like.dtype
    if fill is not None:
        return jnp.asarray(fill).dtype if not isinstance(fill, float) else default_float()
    return default_float()


@lowering(aten.full.default)
def _full(size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.full(tuple(size), fill_value, _dtype(dtype, fill=fill_value))


@lowering(aten.zeros.default)
def _zeros(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.zeros(tuple(size), _dtype(dtype))


@lowering(aten.ones.default)
def _ones(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.ones(tuple(size), _dtype(dtype))


@lowering(aten.empty.memory_format)
def _empty(size, *, dtype=None, layout=None, device=None, pin_memory=None,
           memory_format=None):
    return jnp.zeros(tuple(size), _dtype(dtype))


@lowering(aten.empty_strided)
def _empty_strided(size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.zeros(tuple(size), _dtype(dtype))


@lowering(aten.scalar_tensor)
def _scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.asarray(s, _dtype(dtype))


@lowering(aten.full_like)
def _full_like(self, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None,
               memory_format=None):
    return jnp.full(self.shape, fill_value, _dtype(dtype, like=self))


@lowering(aten.zeros_like, aten.empty_like)
def _zeros_like(self, *, dtype=None, layout=None, device=None, pin_memory=None,
                memory_format=None):
    return jnp.zeros(self.shape, _dtype(dtype, like=self))


@lowering(aten.ones_like)
def _ones_like(self, *, dtype=None, layout=None, device=None, pin_memory=None,
               memory_format=None):
    return jnp.ones(self.shape, _dtype(dtype, like=self))


@lowering(aten.new_zeros, aten.new_empty)
def _new_zeros(self, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.zeros(tuple(size), _dtype(dtype, like=self))


@lowering(aten.new_empty_strided)
def _new_empty_strided(self, size, stride, *, dtype=None, layout=None, device=None,
                       pin_memory=None):
    return jnp.zeros(tuple(size), _dtype(dtype, like=self))


@lowering(aten.new_ones)
def _new_ones(self, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.ones(tuple(size), _dtype(dtype, like=self))


@lowering(aten.new_full)
def _new_full(self, size, fill_value, *, dtype=None, layout=None, device=None,
              pin_memory=None):
    return jnp.full(tuple(size), fill_value, _dtype(dtype, like=self))


@lowering(aten.fill.Scalar, aten.fill.Tensor)
def _fill(self, value):
    return jnp.full(self.shape, value, self.dtype)


@lowering(aten.zero)
def _zero(self):
    return jnp.zeros(self.shape, self.dtype)


@lowering(aten.clone)
def _clone(self, *, memory_format=None):
    return jnp.array(self, copy=True)


@lowering(aten.arange.start_step, static=("start", "end", "step"))
def _arange(start, end, step=1, *, dtype=None, layout=None, device=None, pin_memory=None):
    if dtype is None:
        floaty = any(isinstance(v, float) for v in (start, end, step))
        dtype_j = default_float() if floaty else jnp.int64
    else:
        dtype_j = to_jax_dtype(dtype)
    if np.dtype(dtype_j).kind in "iub":
        # CPU truncates the bounds to integers first, then divides in integers.
        start, end, step = int(start), int(end), int(step)
        num = end - start + step - (1 if step > 0 else -1)
        n = max(abs(num) // abs(step) * (1 if (num >= 0) == (step > 0) else -1), 0)
    else:
        n = max(math.ceil((end - start) / step), 0)
    return (start + jnp.arange(n, dtype=jnp.float64 if isinstance(step, float) or
                               isinstance(start, float) else jnp.int64) * step).astype(dtype_j)


@lowering(aten.linspace.default)
def _linspace(start, end, steps, *, dtype=None, layout=None, device=None, pin_memory=None):
    dt = _dtype(dtype)
    if steps == 1:
        return jnp.full((1,), start, dt)
    i = jnp.arange(steps, dtype=jnp.float64)
    step = (end - start) / (steps - 1)
    # PyTorch fills the second half backwards from `end` for symmetric rounding.
    out = jnp.where(i < steps // 2, start + step * i, end - step * (steps - 1 - i))
    return out.astype(dt) if jnp.issubdtype(dt, jnp.floating) else jnp.trunc(out).astype(dt)


@lowering(aten.eye.default, aten.eye.m)
def _eye(n, m=None, *, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.eye(n, n if m is None else m, dtype=_dtype(dtype))
