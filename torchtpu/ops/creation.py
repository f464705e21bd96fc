"""Factories and fills: full, zeros, linspace, eye, clone, fill_ (arange and range: in
creation_ranges.py)."""

from __future__ import annotations

import jax.numpy as jnp
import torch

from .dtypes import (
    astype,
    default_float,
    range_dtype,
    range_step_type,
    scalar_to,
    to_jax_dtype,
    wrapped,
)
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


def _held(value, dtype):
    """A fill value as ``dtype`` holds it: a complex number is True unless 0 as bool (jax
    would keep its real part; a non-zero imaginary part into a real dtype is refused before,
    as CPU refuses it). float8_e4m3fn saturates (CPU's one-element fill: 1e6 is 448; more
    elements refuse a number past its range before)."""
    if jnp.iscomplexobj(value) and not jnp.issubdtype(dtype, jnp.complexfloating):
        return jnp.asarray(value) != 0 if jnp.dtype(dtype) == jnp.bool_ else jnp.real(value)
    if jnp.dtype(dtype) == jnp.float8_e4m3fn:
        return astype(jnp.asarray(value), jnp.dtype(dtype))
    return value


@lowering(aten.full.default)
def _full(size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None):
    dtype = _dtype(dtype, fill=fill_value)
    return jnp.full(tuple(size), _held(wrapped(fill_value, dtype), dtype), dtype)


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


def _check_storage_nbytes(size, stride, dtype) -> None:
    """c10's computeStorageNbytes: the bytes a strided layout reaches, in uint64 arithmetic
    (a negative stride wraps), must fit an int64. (XLA aborted the process on the dense
    layouts' element count.)"""
    if len(size) != len(stride) or 0 in size:
        return
    wrap, nbytes, overflowed = 2 ** 64, 1, False
    for n, s in zip(size, stride, strict=True):
        reach = (s % wrap) * ((n - 1) % wrap)
        nbytes += reach
        overflowed |= reach >= wrap or nbytes >= wrap
    nbytes *= jnp.dtype(dtype).itemsize
    if overflowed or nbytes >= 2 ** 63:
        raise RuntimeError(f"Storage size calculation overflowed with sizes={list(size)} and "
                           f"strides={list(stride)}")


@lowering(aten.empty_strided)
def _empty_strided(size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
    _check_storage_nbytes(size, stride, _dtype(dtype))
    return jnp.zeros(tuple(size), _dtype(dtype))


@lowering(aten.scalar_tensor)
def _scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.asarray(_held(wrapped(s, _dtype(dtype)), _dtype(dtype)), _dtype(dtype))


@lowering(aten.full_like)
def _full_like(self, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None,
               memory_format=None):
    dtype = _dtype(dtype, like=self)
    return jnp.full(self.shape, _held(fill_value, dtype), dtype)


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
    _check_storage_nbytes(size, stride, _dtype(dtype, like=self))
    return jnp.zeros(tuple(size), _dtype(dtype, like=self))


@lowering(aten.new_ones)
def _new_ones(self, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.ones(tuple(size), _dtype(dtype, like=self))


@lowering(aten.new_full)
def _new_full(self, size, fill_value, *, dtype=None, layout=None, device=None,
              pin_memory=None):
    dtype = _dtype(dtype, like=self)
    return jnp.full(tuple(size), _held(fill_value, dtype), dtype)


@lowering(aten.fill.Scalar, aten.fill.Tensor)
def _fill(self, value):
    return jnp.full(self.shape, _held(value, self.dtype), self.dtype)


@lowering(aten.zero)
def _zero(self):
    return jnp.zeros(self.shape, self.dtype)


@lowering(aten.clone)
def _clone(self, *, memory_format=None):
    return jnp.array(self, copy=True)


# skip_meta: the meta kernel cannot tell a 0-d tensor endpoint from a traced Python scalar.
@lowering(aten.linspace.default, aten.linspace.Tensor_Tensor, aten.linspace.Tensor_Scalar,
          aten.linspace.Scalar_Tensor, skip_meta=True)
def _linspace(start, end, steps, *, dtype=None, layout=None, device=None, pin_memory=None):
    for x in (start, end):
        if jnp.ndim(x) != 0:
            raise RuntimeError("linspace only supports 0-dimensional start and end tensors, "
                               f"but got a tensor with {jnp.ndim(x)} dimension(s).")
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    dt = range_dtype(dtype, start, end)
    if steps == 0:
        return jnp.zeros((0,), dt)
    if steps == 1:
        return jnp.full((1,), start, dt)
    # CPU's kernel: the endpoints in the output dtype; integers step in float64, floats in
    # their own dtype. bfloat16/float16 round each operation; float32's vectorised
    # start + step * i rounds once (a fused multiply-add), which float64 computes exactly.
    ct = range_step_type(dt)
    s, e = (scalar_to(x, dt) for x in (start, end))
    # XLA:CPU turns a division by a constant into a multiplication by its reciprocal (49 / 49
    # gives 0.9999...); a divisor that depends on the data keeps the division exact, as CPU's.
    step = ((e - s) / (e * 0 + (steps - 1)) if dt in (jnp.float32, ct)
            else (e.astype(ct) - s.astype(ct)) / (e.astype(ct) * 0 + (steps - 1)))
    s, e, step = s.astype(ct), e.astype(ct), step.astype(ct)
    i = jnp.arange(steps).astype(ct)
    # PyTorch fills the second half backwards from `end` for symmetric rounding.
    out = jnp.where(i < steps // 2, s + step * i, e - step * (jnp.asarray(steps - 1, ct) - i))
    return out.astype(dt)


@lowering(aten.eye.default, aten.eye.m)
def _eye(n, m=None, *, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.eye(n, n if m is None else m, dtype=_dtype(dtype))
