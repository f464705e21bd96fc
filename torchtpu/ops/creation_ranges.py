"""arange, range, logspace, and the functional copy (into a fresh tensor's shape).

PyTorch's CPU logspace reads the endpoints as the output dtype, takes the step in float64 and
raises a float64 base to float64 exponents, rounding each power once to the output dtype.
range (arange with its end included, deprecated but still called) computes in CPU's
accumulate type: int64 for integers, float32 for the half-width floats, float64 otherwise.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import torch

from .dtypes import (
    ALL_TYPES_AND_HALVES,
    astype,
    default_float,
    range_dtype,
    scalar_to,
    scalar_type_name,
    to_jax_dtype,
)
from .registry import lowering

aten = torch.ops.aten


@lowering(aten.copy)
def _copy(self, src, non_blocking=False):
    return jnp.broadcast_to(src.astype(self.dtype), self.shape)


# The meta kernel cannot tell a 0-d tensor endpoint from a traced Python scalar; the rule makes
# PyTorch's one check itself.
@lowering(aten.logspace.default, aten.logspace.Tensor_Tensor, aten.logspace.Tensor_Scalar,
          aten.logspace.Scalar_Tensor, skip_meta=True)
def _logspace(start, end, steps, base=10.0, *, dtype=None, layout=None, device=None,
              pin_memory=None):
    for x in (start, end):
        if jnp.ndim(x) != 0:
            raise RuntimeError("logspace only supports 0-dimensional start and end tensors, "
                               f"but got a tensor with {jnp.ndim(x)} dimension(s).")
    dt = range_dtype(dtype, start, end)
    ct = jnp.complex128 if jnp.issubdtype(dt, jnp.complexfloating) else jnp.float64
    base = jnp.asarray(base, ct)
    if steps == 1:
        return scalar_to(jnp.power(base, jnp.asarray(start, ct)), dt).reshape(1)
    first, last = scalar_to(start, dt), scalar_to(end, dt)
    # C++ subtracts integers in int or wider (end < start stays negative in uint8), floats in
    # their own type
    wide = jnp.int64 if jnp.issubdtype(dt, jnp.integer) else dt
    step = (last.astype(wide) - first.astype(wide)).astype(ct) / (steps - 1)
    i = jnp.arange(steps, dtype=ct)
    exponent = jnp.where(i.real < steps // 2, first.astype(ct) + step * i,
                         last.astype(ct) - step * (steps - 1 - i))
    # (a power past an integer type's range converted as CPU's x86 kernel does)
    return astype(jnp.power(base, exponent), np.dtype(dt))


def _range_acc(dtype) -> np.dtype:
    """at::acc_type<scalar_t, /*is_cuda=*/false>: what range's kernel computes in."""
    if np.dtype(dtype).kind in "iu":
        return np.dtype(np.int64)
    if np.dtype(dtype) in (np.dtype(jnp.float16), np.dtype(jnp.bfloat16)):
        return np.dtype(np.float32)
    return np.dtype(np.float64)


def _checked_to(x, acc: np.dtype):
    """c10::Scalar::to<acc>: refuses a number the type cannot hold (NaN or infinity into an
    integer, a finite float32 overflow, an imaginary part), truncates a float into integers."""
    ctype = {"int64": "int64_t", "float32": "float", "float64": "double"}[acc.name]
    error = RuntimeError(f"value cannot be converted to type {ctype} without overflow")
    if isinstance(x, complex):
        if x.imag != 0:
            raise error
        x = x.real
    if acc.kind == "i":
        if isinstance(x, float) and not (math.isfinite(x) and -2.0**63 <= x < 2.0**63):
            raise error
        return int(x)
    x = float(x)
    if acc == np.float32 and math.isfinite(x) and abs(x) > float(np.finfo(np.float32).max):
        raise error
    return acc.type(x)


def _check_bounds(first, last, by) -> None:
    """RangeUtils.h's checks, in its order: a nonzero step, finite bounds, the step's sign."""
    if not (by > 0 or by < 0):
        raise RuntimeError("step must be nonzero")
    if not (math.isfinite(first) and math.isfinite(last)):
        raise RuntimeError(f"unsupported range: {first:g} -> {last:g}")
    if not (by > 0 and last >= first or by < 0 and last <= first):
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")


@lowering(aten.range.default, aten.range.step, static=("start", "end", "step"), skip_meta=True)
def _range(start, end, step=1, *, dtype=None, layout=None, device=None, pin_memory=None):
    # skip_meta: the meta kernel divides by an integer step of 0 (a float step under 1 with an
    # integer dtype) before its own check, which kills the process with SIGFPE.
    dt = np.dtype(default_float() if dtype is None else to_jax_dtype(dtype))
    if dt not in ALL_TYPES_AND_HALVES:
        raise NotImplementedError(f'"range_cpu" not implemented for \'{scalar_type_name(dt)}\'')
    acc = _range_acc(dt)
    first, last, by = (_checked_to(x, acc) for x in (start, end, step))
    _check_bounds(first, last, by)
    if acc.kind == "i":
        size = (last - first) // by + 1
    else:
        size = (last - first) / by + acc.type(1)
        if size >= 2.0**63:  # CPU's cast of it to int64 gives INT64_MIN
            raise RuntimeError("IntArrayRef contains an int that cannot be represented as a "
                               f"SymInt: {-2**63}")
        size = int(size)
    i = jnp.arange(size, dtype=jnp.int64 if acc.kind == "i" else jnp.float64)
    if acc == np.float32:
        # CPU rounds the product and then the sum to float32: the product of a float32 step
        # and an index under 2**24 is exact in float64, and a float32 sum rounded from float64
        # is the float32 sum.
        product = (i * float(by)).astype(jnp.float32).astype(jnp.float64)
        return (product + float(first)).astype(jnp.float32).astype(dt)
    return (first + i * by).astype(dt)


def _arange_size(start, end, step, dt: np.dtype) -> int:
    """arange's element count, after CPU's checks in CPU's order (RangeUtils.h): the bounds as
    doubles, then as the accumulate type, the count from int64s for int64 and from doubles for
    every other dtype (arange(0, 5.5, dtype=torch.int32) has 6 elements, with int64 5)."""
    if dt not in ALL_TYPES_AND_HALVES:
        raise NotImplementedError(f'"arange_cpu" not implemented for \'{scalar_type_name(dt)}\'')
    d_start, d_end, d_step = (_checked_to(x, np.dtype(np.float64)) for x in (start, end, step))
    _check_bounds(d_start, d_end, d_step)
    first, last, by = (_checked_to(x, _range_acc(dt)) for x in (start, end, step))
    if dt == np.int64:
        if by == 0:  # a float step under 1, truncated (CPU's TORCH_CHECK_VALUE)
            raise ValueError("step must be nonzero")
        # (end - start + step - sign(step)) / step in C++'s int64s, which wrap
        num = (last - first + by - (1 if by > 0 else -1) + 2**63) % 2**64 - 2**63
        size = abs(num) // abs(by) * (1 if (num < 0) == (by < 0) else -1)
    else:
        size = math.ceil((d_end - d_start) / d_step)
    if not 0 <= size <= 2.0**63:
        raise RuntimeError("invalid size, possible overflow?")
    return int(size)


# skip_meta: PyTorch's Python reference checks in another order than CPU's kernel (a NaN bound
# is "inconsistent with step sign" there) and counts integer dtypes other than int64 otherwise.
@lowering(aten.arange.start_step, static=("start", "end", "step"), skip_meta=True)
def _arange(start, end, step=1, *, dtype=None, layout=None, device=None, pin_memory=None):
    if dtype is None:
        floaty = any(isinstance(v, float) for v in (start, end, step))
        dt = np.dtype(default_float() if floaty else jnp.int64)
    else:
        dt = np.dtype(to_jax_dtype(dtype))
    n = _arange_size(start, end, step, dt)
    if dt.kind in "iu":
        # CPU computes start + step * i in int64 from the truncated bounds.
        first, by = int(start), int(step)
        return (first + jnp.arange(n, dtype=jnp.int64) * by).astype(dt)
    return (start + jnp.arange(n, dtype=jnp.float64) * step).astype(dt)
