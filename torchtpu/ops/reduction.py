"""Reductions, scans, sorting and softmax."""

from __future__ import annotations

import math
import operator
import warnings

import jax
import jax.numpy as jnp
import torch
from jax import lax

from ..runtime.platform import platform
from .complex_edges import complex_logaddexp
from .dtypes import (
    LOW_PRECISION,
    astype,
    check_with_meta,
    float_of,
    opmath,
    scalar_type_name,
    to_jax_dtype,
)
from .registry import lowering

aten = torch.ops.aten


def _axes(dim, ndim):
    """PyTorch's dim argument (None, int, or list; [] means all) as a jnp axis tuple."""
    if dim is None or dim == () or dim == []:
        return None
    dims = dim if isinstance(dim, (tuple, list)) else (dim,)
    if ndim == 0:
        return None
    return tuple(d % ndim for d in dims)


def _acc_dtype(x, dtype):
    if dtype is not None:
        return to_jax_dtype(dtype)
    if jnp.issubdtype(x.dtype, jnp.integer) or x.dtype == jnp.bool_:
        return jnp.int64
    return x.dtype


def _complex_apart(reduce, x, **kwargs):
    """A complex reduction as the reductions of its real and imaginary parts: XLA:CPU sums a
    complex array in an order whose rounding drifts (a 4-d complex64 sum of 2^18 equal values
    0.15% off), each part as accurately as a real sum."""
    if not jnp.iscomplexobj(x):
        return reduce(x, **kwargs)
    return lax.complex(reduce(jnp.real(x), **kwargs), reduce(jnp.imag(x), **kwargs))


@lowering(aten.sum.dim_IntList, aten.sum.default, static=())
def _sum(self, dim=None, keepdim=False, *, dtype=None):
    out_dtype = _acc_dtype(self, dtype)
    acc = jnp.float32 if out_dtype in LOW_PRECISION else out_dtype
    x = astype(self, jnp.dtype(acc))  # (a float into an integer dtype: CPU's conversion)
    return _complex_apart(jnp.sum, x, axis=_axes(dim, self.ndim), keepdims=keepdim).astype(
        out_dtype)


@lowering(aten.mean.dim, aten.mean.default)
def _mean(self, dim=None, keepdim=False, *, dtype=None):
    x = self if dtype is None else self.astype(to_jax_dtype(dtype))
    axes = _axes(dim, self.ndim)
    if not jnp.iscomplexobj(x):
        return jnp.mean(x, axis=axes, keepdims=keepdim)
    # CPU divides the complex sum by a complex count, so an inf or nan real part makes the
    # imaginary part nan as well (inf+0.5j summed gives inf+nanj, not inf+0.5j).
    count = math.prod(x.shape[d] for d in (range(x.ndim) if axes is None else axes))
    total = _complex_apart(jnp.sum, x, axis=axes, keepdims=keepdim)
    return total / jnp.asarray(complex(count), total.dtype)


@lowering(aten.prod.dim_int, aten.prod.default)
def _prod(self, dim=None, keepdim=False, *, dtype=None):
    out_dtype = jnp.dtype(_acc_dtype(self, dtype))
    return jnp.prod(astype(self, out_dtype), axis=_axes(dim, self.ndim), keepdims=keepdim,
                    dtype=out_dtype)


def check_nonempty(name, self, dim, as_given=False):
    """CPU's checks for reductions without an identity: the meta kernel raises RuntimeError
    where CPU raises IndexError, so these rules skip it and run it after their own checks.
    amax/amin name a dim as the caller gave it (-1), the others wrapped (as_given)."""
    axes = _axes(dim, self.ndim)
    if axes is None:
        if self.size == 0:
            raise RuntimeError(
                f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
                "Specify the reduction dim with the 'dim' argument.")
        return
    given = dim if isinstance(dim, (tuple, list)) else (dim,)
    for d, g in zip(axes, given, strict=True):
        if self.shape[d] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {g if as_given else d} to "
                             "have non-zero size.")


@lowering(aten.amax, skip_meta=True)
def _amax(self, dim=(), keepdim=False):
    check_nonempty("amax", self, dim, as_given=True)
    check_with_meta(aten.amax.default, self, dim, keepdim)
    return jnp.max(self, axis=_axes(dim, self.ndim), keepdims=keepdim)


@lowering(aten.amin, skip_meta=True)
def _amin(self, dim=(), keepdim=False):
    check_nonempty("amin", self, dim, as_given=True)
    check_with_meta(aten.amin.default, self, dim, keepdim)
    return jnp.min(self, axis=_axes(dim, self.ndim), keepdims=keepdim)


@lowering(aten.aminmax, skip_meta=True)
def _aminmax(self, *, dim=None, keepdim=False):
    # PyTorch decomposes it into amin and amax, whose messages would name them instead.
    if dim is None and self.size == 0:
        raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the "
                           "operation has no identity.")
    if dim is not None and -self.ndim <= dim < self.ndim and self.shape[dim] == 0:
        raise IndexError(f"aminmax: Expected reduction dim {dim % self.ndim} to have non-zero "
                         "size.")
    check_with_meta(aten.aminmax.default, self, dim=dim, keepdim=keepdim)
    axis = None if dim is None else _axes(dim, self.ndim)
    return (jnp.min(self, axis=axis, keepdims=keepdim), jnp.max(self, axis=axis, keepdims=keepdim))


@lowering(aten.max.default)
def _max_all(self):
    return jnp.max(self)


@lowering(aten.min.default)
def _min_all(self):
    return jnp.min(self)


def _arg_reduce(fn, self, dim, keepdim):
    if dim is None:
        return fn(self.reshape(-1)).astype(jnp.int64).reshape((1,) * self.ndim if keepdim else ())
    if self.ndim == 0:
        return jnp.zeros((), jnp.int64)
    return fn(self, axis=dim % self.ndim, keepdims=keepdim).astype(jnp.int64)


@lowering(aten.max.dim)
def _max_dim(self, dim, keepdim=False):
    if self.ndim == 0:
        return self, jnp.zeros((), jnp.int64)
    return (jnp.max(self, axis=dim % self.ndim, keepdims=keepdim),
            _arg_reduce(jnp.argmax, self, dim, keepdim))


@lowering(aten.min.dim)
def _min_dim(self, dim, keepdim=False):
    if self.ndim == 0:
        return self, jnp.zeros((), jnp.int64)
    return (jnp.min(self, axis=dim % self.ndim, keepdims=keepdim),
            _arg_reduce(jnp.argmin, self, dim, keepdim))


@lowering(aten.argmax)
def _argmax(self, dim=None, keepdim=False):
    return _arg_reduce(jnp.argmax, self, dim, keepdim)


@lowering(aten.argmin)
def _argmin(self, dim=None, keepdim=False):
    return _arg_reduce(jnp.argmin, self, dim, keepdim)


@lowering(aten.any.default, aten.any.dim, aten.any.dims, aten._is_any_true)
def _any(self, dim=None, keepdim=False):
    return jnp.any(self.astype(bool), axis=_logical_axes(dim, self.ndim), keepdims=keepdim)


@lowering(aten.all.default, aten.all.dim, aten.all.dims, aten._is_all_true)
def _all(self, dim=None, keepdim=False):
    return jnp.all(self.astype(bool), axis=_logical_axes(dim, self.ndim), keepdims=keepdim)


def _logical_axes(dim, ndim):
    # all.dims and any.dims of no dims reduce nothing (sum's [] is every dim)
    return () if isinstance(dim, (list, tuple)) and not dim else _axes(dim, ndim)


# correction static: CPU warns of a correction that leaves no degrees of freedom.
@lowering(aten.var.correction, aten.var.dim, aten.var.default, static=("correction",))
@opmath
def _var(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return _moments("var", self, dim, _ddof(unbiased, correction), keepdim)[0]


@lowering(aten.std.correction, aten.std.dim, aten.std.default, static=("correction",))
@opmath
def _std(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return _moments("std", self, dim, _ddof(unbiased, correction), keepdim, sqrt=True)[0]


@lowering(aten.var_mean.correction, static=("correction",))
@opmath
def _var_mean(self, dim=None, *, correction=None, keepdim=False):
    return _moments("var_mean", self, dim, _ddof(None, correction), keepdim)


@lowering(aten.std_mean.correction, static=("correction",))
@opmath
def _std_mean(self, dim=None, *, correction=None, keepdim=False):
    return _moments("std_mean", self, dim, _ddof(None, correction), keepdim, sqrt=True)


def _moments(name, self, dim, ddof, keepdim, sqrt=False):
    """(variance or standard deviation, mean), carried in CPU's accumulation dtype (its
    Welford pass runs float32 in float64) and rounded once."""
    axes = _axes(dim, self.ndim)
    count = math.prod(self.shape[a] for a in axes) if axes is not None else self.size
    x = float_of(self)
    acc = x.astype(cpu_acc(x.dtype))
    if name in ("var", "std") and 0 < x.size <= count and not jnp.iscomplexobj(x):
        # CPU's full reduction (std_var_all_cpu): the mean rounded to the input's dtype, then
        # the squares summed in float64, uncorrected.
        mean = jnp.mean(x, axis=axes, keepdims=True).astype(acc.dtype)
        squares = jnp.sum((acc - mean) ** 2, axis=axes, keepdims=keepdim)
    else:
        mean = jnp.mean(acc, axis=axes, keepdims=True)
        centered = acc - mean
        # The corrected two-pass sum: less the first-order error of the rounded mean, which
        # in float32 (TPU) made a variance of values near 1e5 1e-5 off.
        squares = (jnp.sum(_abs2(centered), axis=axes, keepdims=keepdim)
                   - _abs2(jnp.sum(centered, axis=axes, keepdims=keepdim)) / max(count, 1))
    if count - ddof <= 0:
        warnings.warn(f"{name}(): degrees of freedom is <= 0. Correction should be strictly "
                      "less than the reduction factor (input numel divided by output numel).",
                      UserWarning, stacklevel=2)
    # CPU divides by max(0, N - correction): inf, or NaN where every value is the mean.
    var = squares / max(count - ddof, 0)
    spread = jnp.sqrt(var) if sqrt else var
    if name.endswith("_mean") and not jnp.iscomplexobj(x) and count > 1:
        mean = jnp.where(_welford_meets_inf(x, axes), jnp.nan, mean)
    mean = mean if keepdim else jnp.squeeze(mean, axis=axes)
    return spread.astype(x.real.dtype), mean.astype(x.dtype)


def _welford_meets_inf(x, axes):
    """Where CPU's Welford mean turns NaN: an infinity before the last value in the reduced
    order makes the next step's delta inf - inf (only a last infinity leaves the mean inf)."""
    axes = tuple(range(x.ndim)) if axes is None else axes
    kept = [d for d in range(x.ndim) if d not in axes]
    # (the reduced length spelled out: -1 cannot be inferred beside a kept dimension of 0)
    reduced = math.prod(x.shape[d] for d in axes)
    flat = jnp.transpose(x, kept + list(axes)).reshape([x.shape[d] for d in kept] + [reduced])
    early = jnp.any(~jnp.isfinite(flat[..., :-1]), axis=-1)
    return jnp.expand_dims(early, axes)


def _abs2(x):
    return jnp.real(x) ** 2 + jnp.imag(x) ** 2 if jnp.iscomplexobj(x) else x * x


def _ddof(unbiased, correction):
    if correction is not None:
        return correction
    return 1 if unbiased is None or unbiased else 0


@lowering(aten.logsumexp)
def _logsumexp(self, dim, keepdim=False):
    return jax.nn.logsumexp(float_of(self), axis=_axes(dim, self.ndim), keepdims=keepdim)


@lowering(aten._softmax)
@opmath
def _softmax(self, dim, half_to_float):
    return jax.nn.softmax(self, axis=dim % max(self.ndim, 1) if self.ndim else None)


@lowering(aten._log_softmax)
def _log_softmax(self, dim, half_to_float):
    axis = dim % max(self.ndim, 1) if self.ndim else None
    if self.dtype not in LOW_PRECISION:
        return jax.nn.log_softmax(self, axis=axis)
    x = self.astype(jnp.float32)
    if axis != self.ndim - 1 or self.size == 0:  # (an empty max has no identity)
        return jax.nn.log_softmax(x, axis=axis).astype(self.dtype)
    # CPU's last-dimension kernel: float32 throughout, but the sum of exponentials and its log
    # are kept in the input's dtype (all-float32 differed on 20% of bfloat16 elements).
    def rounded(v):
        return v.astype(self.dtype).astype(jnp.float32)

    shifted = x - lax.stop_gradient(jnp.max(x, axis=axis, keepdims=True))
    log_total = rounded(jnp.log(rounded(jnp.sum(jnp.exp(shifted), axis=axis, keepdims=True))))
    return (shifted - log_total).astype(self.dtype)


@lowering(aten._softmax_backward_data)
@opmath
def _softmax_backward_data(grad_output, output, dim, input_dtype):
    g = grad_output * output
    axis = dim % output.ndim if output.ndim else None  # a 0-d tensor's dim 0/-1 is all of it
    return g - output * jnp.sum(g, axis=axis, keepdims=True)


@lowering(aten._log_softmax_backward_data)
@opmath
def _log_softmax_backward_data(grad_output, output, dim, input_dtype):
    axis = dim % output.ndim if output.ndim else None
    return grad_output - jnp.exp(output) * jnp.sum(grad_output, axis=axis, keepdims=True)


def _masked_softmax_mask(self, mask, mask_type):
    """CPU's masked_softmax_cpu: an (L, L) mask (type 0) or a (B, L) padding mask (type 1) of
    a 4-d input, else (type 2) a mask of the input's shape; True masks."""
    if mask.dtype != jnp.bool_:
        raise RuntimeError("Mask should be a boolean tensor")
    shape = self.shape
    if mask.ndim != 2 or self.ndim != 4:
        mask_type = 2
    if mask_type is None:
        raise RuntimeError("Mask Type should be defined")
    if mask_type not in (0, 1, 2):
        raise RuntimeError("Mask Type should be 0 (src_mask) or 1 (src_key_padding_mask), or 2 "
                           "(default_mask)")
    if mask_type == 1:
        if (shape[0], shape[2]) != mask.shape:
            raise RuntimeError("For mask_type == 1 mask shape should be (B, L)")
        return jnp.broadcast_to(mask.reshape(shape[0], 1, 1, shape[2]), shape)
    if mask_type == 0:
        if mask.shape != (shape[2], shape[2]) or shape[3] != shape[2]:
            raise RuntimeError("For mask_type == 0 mask shape should be (L, L)")
        return jnp.broadcast_to(mask, shape)
    if mask.shape != shape:
        raise RuntimeError("For mask_type == 2 mask shape should match input shape")
    return mask


@lowering(aten._masked_softmax)
@opmath
def _masked_softmax(self, mask, dim=None, mask_type=None):
    mask = _masked_softmax_mask(self, mask, mask_type)
    axis = (self.ndim - 1 if dim is None else dim % max(self.ndim, 1)) if self.ndim else None
    # (a row masked throughout is NaN, as on CPU)
    return jax.nn.softmax(jnp.where(mask, -jnp.inf, self), axis=axis)


@lowering(aten._masked_softmax_backward)
@opmath
def _masked_softmax_backward(grad_output, output, mask, dim=None):
    if mask.shape != grad_output.shape:
        raise RuntimeError("Mask shape should match grad shape")
    axis = output.ndim - 1 if dim is None else dim % max(output.ndim, 1)
    g = grad_output * output
    return jnp.where(mask, 0, g - output * jnp.sum(g, axis=axis, keepdims=True))


def cpu_acc(dtype):
    """The dtype CPU's scans and Welford pass carry their running values in (acc_type):
    float32 for bfloat16/float16, float64 for float32 and complex128 for complex64, where
    XLA's tree-shaped float32 scan left 80% of a 4096-long cumsum a bit off CPU's. TPUs have
    no float64: float32 there."""
    if dtype in LOW_PRECISION:
        return jnp.dtype(jnp.float32)
    if platform() != "tpu":
        return _WIDER.get(dtype, dtype)
    return dtype


def channel_sum(v):
    """Per channel (dim 1) of an (N, C, ...) array, as accurately as CPU's float64 (or
    cascaded) sums and at float32's speed: each row of a channel's elements summed in blocks
    in v's dtype, the blocks' sums in the accumulation dtype (XLA:CPU reduces float64 several
    times slower)."""
    rows = v.reshape(v.shape[0], v.shape[1], math.prod(v.shape[2:]))  # (-1: not if empty)
    return jnp.sum(blocked_sum(rows), axis=0)


def blocked_sum(v, block: int = 256):
    """The last axis summed so (channel_sum), in the accumulation dtype."""
    acc, n = cpu_acc(v.dtype), v.shape[-1]
    size = math.gcd(n, block)
    if acc == v.dtype or size < 16:
        return jnp.sum(v.astype(acc), axis=-1)
    blocks = jnp.sum(v.reshape(*v.shape[:-1], n // size, size), axis=-1)
    return jnp.sum(blocks.astype(acc), axis=-1)


_WIDER = {jnp.dtype(jnp.float32): jnp.dtype(jnp.float64),
          jnp.dtype(jnp.complex64): jnp.dtype(jnp.complex128)}


def _scan(fn, self, dim, dtype):
    out_dtype = _acc_dtype(self, dtype)
    x = astype(self, jnp.dtype(out_dtype))
    if not self.ndim:
        return x
    return fn(x.astype(cpu_acc(out_dtype)), axis=dim % self.ndim).astype(out_dtype)


@lowering(aten.cumsum)
def _cumsum(self, dim, *, dtype=None):
    return _scan(jnp.cumsum, self, dim, dtype)


@lowering(aten.cumprod)
def _cumprod(self, dim, *, dtype=None):
    return _scan(jnp.cumprod, self, dim, dtype)


@lowering(aten.sort.default, aten.sort.stable)
def _sort(self, dim=-1, descending=False, *, stable=None):
    if self.ndim == 0:
        return self, jnp.zeros((), jnp.int64)
    axis = dim % self.ndim
    # Always stable: ties keep their order (descending too), NaN sorts as the largest value.
    idx = jnp.argsort(self, axis=axis, stable=True, descending=descending)
    return jnp.take_along_axis(self, idx, axis=axis), idx.astype(jnp.int64)


@lowering(aten.topk)
def _topk(self, k, dim=-1, largest=True, sorted=True):  # noqa: A002
    if self.ndim == 0:
        return self, jnp.zeros((), jnp.int64)
    axis = dim % self.ndim
    x = jnp.moveaxis(self, axis, -1)
    if jnp.issubdtype(x.dtype, jnp.inexact):
        # lax.top_k orders NaNs by their sign bit, and XLA's own NaNs (0/0, sqrt(-1)) carry
        # it: one NaN, the largest value as PyTorch orders them.
        x = jnp.where(jnp.isnan(x), jnp.nan, x)
        flip = operator.neg
    else:
        flip = operator.invert  # reverses integer order without -x's overflow at the minimum
    vals, idx = lax.top_k(x if largest else flip(x), k)
    vals = vals if largest else flip(vals)
    return jnp.moveaxis(vals, -1, axis), jnp.moveaxis(idx.astype(jnp.int64), -1, axis)


@lowering(aten.linalg_vector_norm, static=("ord",))
def _vector_norm(self, ord=2, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    # Cast first: with dtype=float32 a bfloat16 input's norm is float32's, not rounded back.
    x = float_of(self) if dtype is None else self.astype(to_jax_dtype(dtype))
    return _norm(x, ord, dim, keepdim)


@opmath
def _norm(x, ord, dim, keepdim):  # noqa: A002
    x = jnp.abs(x)
    axes = _axes(dim, x.ndim)
    if ord == float("inf"):
        return jnp.max(x, axis=axes, keepdims=keepdim)
    if ord == float("-inf"):
        return jnp.min(x, axis=axes, keepdims=keepdim)
    if ord == 0:
        return jnp.sum(x != 0, axis=axes, keepdims=keepdim).astype(x.dtype)
    if ord == 1:
        return jnp.sum(x, axis=axes, keepdims=keepdim)
    if ord == 2:
        return jnp.sqrt(jnp.sum(x * x, axis=axes, keepdims=keepdim))
    return jnp.sum(x**ord, axis=axes, keepdims=keepdim) ** (1.0 / ord)


# Scans that carry an index, and order statistics.


def _cum_extreme(self, dim, better):
    """Running max/min with the index of the latest best element; NaN beats everything."""
    if self.ndim == 0:
        return self, jnp.zeros((), jnp.int64)
    axis = dim % self.ndim
    idx = lax.broadcasted_iota(jnp.int64, self.shape, axis)
    is_nan = jnp.isnan(self) if jnp.issubdtype(self.dtype, jnp.inexact) else None

    def combine(a, b):
        (va, ia), (vb, ib) = a, b
        take_b = better(vb, va)
        if is_nan is not None:
            take_b = jnp.isnan(vb) | (~jnp.isnan(va) & take_b)
        return jnp.where(take_b, vb, va), jnp.where(take_b, ib, ia)

    return lax.associative_scan(combine, (self, idx), axis=axis)


@lowering(aten.cummax)
def _cummax(self, dim):
    return _cum_extreme(self, dim, lambda b, a: b >= a)


@lowering(aten.cummin)
def _cummin(self, dim):
    return _cum_extreme(self, dim, lambda b, a: b <= a)


@lowering(aten.logcumsumexp)
@opmath
def _logcumsumexp(self, dim):
    if not jnp.issubdtype(self.dtype, jnp.inexact):  # CPU's kernel has no integer form
        raise NotImplementedError(
            f'"logcumsumexp_out_tpu" not implemented for \'{scalar_type_name(self.dtype)}\'')
    if self.ndim == 0 or self.size == 0:
        return self
    if jnp.iscomplexobj(self):
        # in CPU's order: each step's imaginary part is its larger operand's plus a principal
        # log, so another association lands 2*pi apart on long rows
        def step(total, x):
            total = complex_logaddexp(total, x)
            return total, total

        rows = jnp.moveaxis(self.astype(cpu_acc(self.dtype)), dim % self.ndim, 0)
        _, out = lax.scan(step, rows[0], rows[1:])
        out = jnp.moveaxis(jnp.concatenate([rows[:1], out]), 0, dim % self.ndim)
        return out.astype(self.dtype)
    x = float_of(self)
    return lax.cumlogsumexp(x.astype(cpu_acc(x.dtype)), axis=dim % self.ndim).astype(x.dtype)


def _sorted_along(self, axis):
    """Values sorted ascending along ``axis`` (NaN last) and their original indices."""
    idx = jnp.argsort(self, axis=axis, stable=True)
    return jnp.take_along_axis(self, idx, axis=axis), idx.astype(jnp.int64)


def _pick(values, idx, k, axis, keepdim):
    k = jnp.expand_dims(jnp.asarray(k), axis) if jnp.ndim(k) else jnp.asarray(k).reshape(
        (1,) * values.ndim)
    v = jnp.take_along_axis(values, k, axis=axis)
    i = jnp.take_along_axis(idx, k, axis=axis)
    if not keepdim:
        v, i = jnp.squeeze(v, axis), jnp.squeeze(i, axis)
    return v, i


@lowering(aten.kthvalue)
def _kthvalue(self, k, dim=-1, keepdim=False):
    if self.ndim == 0:
        return self, jnp.zeros((), jnp.int64)
    axis = dim % self.ndim
    values, idx = _sorted_along(self, axis)
    return _pick(values, idx, k - 1, axis, keepdim)


def _median(self, dim, keepdim, ignore_nan):
    if self.ndim == 0:
        return self, jnp.zeros((), jnp.int64)
    axis = dim % self.ndim
    values, idx = _sorted_along(self, axis)
    n = self.shape[axis]
    if jnp.issubdtype(self.dtype, jnp.inexact):
        nans = jnp.sum(jnp.isnan(self), axis=axis)
        if ignore_nan:  # the lower median of the non-NaN values
            k = jnp.maximum((n - nans - 1) // 2, 0)
        else:  # NaN if there is one: NaNs sort last, so the first of them
            k = jnp.where(nans > 0, n - nans, (n - 1) // 2)
    else:
        k = jnp.full(values.shape[:axis] + values.shape[axis + 1:], (n - 1) // 2)
    return _pick(values, idx, k, axis, keepdim)


@lowering(aten.median.dim)
def _median_dim(self, dim, keepdim=False):
    return _median(self, dim, keepdim, ignore_nan=False)


@lowering(aten.nanmedian.dim)
def _nanmedian_dim(self, dim, keepdim=False):
    return _median(self, dim, keepdim, ignore_nan=True)


@lowering(aten.median.default)
def _median_all(self):
    return _median_of_all(self, ignore_nan=False)


@lowering(aten.nanmedian.default)
def _nanmedian_all(self):
    return _median_of_all(self, ignore_nan=True)


def _median_of_all(self, ignore_nan):
    if self.size == 0:
        # CPU's median of nothing: NaN, converted as x86 converts it (an integer's minimum)
        return astype(jnp.full((), jnp.nan, jnp.float32), self.dtype)
    return _median(self.reshape(-1), 0, False, ignore_nan=ignore_nan)[0]


@lowering(aten.mode)
def _mode(self, dim=-1, keepdim=False):
    """The most frequent value (the smallest among ties) and the last index holding it."""
    if self.ndim == 0:
        return self, jnp.zeros((), jnp.int64)
    axis = dim % self.ndim
    x = jnp.moveaxis(self, axis, -1)
    n = x.shape[-1]
    if n == 0:
        shape = x.shape[:-1] + ((1,) if keepdim else ())
        return jnp.zeros(shape, self.dtype), jnp.zeros(shape, jnp.int64)
    same = x[..., :, None] == x[..., None, :]
    counts = jnp.sum(same, axis=-1)
    # Rank by count, then by smaller value: sort values, take the first maximal count.
    values, _ = _sorted_along(x, x.ndim - 1)
    sorted_counts = jnp.sum(values[..., :, None] == x[..., None, :], axis=-1)
    best = jnp.argmax(sorted_counts, axis=-1)
    mode = jnp.take_along_axis(values, best[..., None], axis=-1)
    pos = jnp.arange(n)
    last = jnp.max(jnp.where((x == mode) & (counts > 0), pos, -1), axis=-1).astype(jnp.int64)
    mode = mode[..., 0]
    if keepdim:
        mode, last = jnp.expand_dims(mode, axis), jnp.expand_dims(last, axis)
    return mode, last
