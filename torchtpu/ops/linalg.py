"""Matrix products and linear algebra."""

from __future__ import annotations

import jax.numpy as jnp
import torch
from jax import lax

from ..runtime.platform import platform
from .dtypes import LOW_PRECISION, astype, promote, result_type, to_jax_dtype
from .linalg_factor import lu_for_det, lu_info, potrf
from .registry import lowering

aten = torch.ops.aten

# PyTorch computes fp32 matmuls in full precision on CPU; XLA may otherwise use bf16 passes.
_PRECISION = lax.Precision.HIGHEST


def in_rows(a):
    """``a`` laid out in memory as it reads, when it is a product's left operand on XLA:CPU.

    There a left operand read down its columns (a weight gradient's ``dy^T @ x``, attention's
    ``p^T @ dout``) is multiplied by Eigen at ~2/3 the speed of the YNNPACK kernel that takes
    rows; XLA folds a transpose into the product unless a barrier stands between them. Other
    platforms take either layout at full speed.
    """
    if a.dtype == jnp.float32 and platform() == "cpu":
        return lax.optimization_barrier(a)
    return a


def _mm(a, b):
    if a.ndim > 1 and b.ndim > 1:
        a = in_rows(a)
    if a.dtype in LOW_PRECISION:
        # PyTorch accumulates bf16/fp16 products in fp32 and rounds once.
        out = jnp.matmul(a, b, precision=_PRECISION, preferred_element_type=jnp.float32)
        return out.astype(a.dtype)
    return jnp.matmul(a, b, precision=_PRECISION)


@lowering(aten.mm)
def _mm_rule(self, mat2):
    return _mm(self, mat2)


@lowering(aten.bmm)
def _bmm(self, mat2):
    return _mm(self, mat2)


@lowering(aten._int_mm)
def _int_mm(self, mat2):
    """int8 (or uint8) matrices multiplied with int32 accumulation (CPU's checks are in
    eager/meta_errors.py)."""
    return jnp.matmul(self.astype(jnp.int32), mat2.astype(jnp.int32),
                      preferred_element_type=jnp.int32)


@lowering(aten._weight_int8pack_mm)
def _weight_int8pack_mm(self, mat2, scales):
    """int8 weights (mat2's rows) scaled per output channel (torchao's int8 weight-only
    quantization on CPU): multiplied and scaled in float32, rounded once to self's dtype, as
    CPU's kernel (CPU's checks are in eager/matmul_checks.py)."""
    f32 = jnp.float32
    out = jnp.matmul(self.astype(f32), mat2.astype(f32).T, precision=_PRECISION)
    return (out * scales.astype(f32)).astype(self.dtype)


# (its meta kernel checks cuda's constraints: eager/matmul_checks.py has CPU's)
@lowering(aten._scaled_mm, skip_meta=True)
def _scaled_mm(self, mat2, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None,
               use_fast_accum=False):
    """float8 matrices scaled per tensor (or per row of self and column of mat2), multiplied
    and biased in float32, as CPU's emulation computes them. CPU divides by scale_result only
    when out_dtype names a float8 type (not when it defaults to self's)."""
    def scaled(m, scale):
        return m.astype(jnp.float32) * (scale.reshape(()) if scale.size == 1 else scale)

    out = jnp.matmul(scaled(self, scale_a), scaled(mat2, scale_b), precision=_PRECISION)
    if bias is not None:
        out = out + bias.astype(jnp.float32)
    if scale_result is not None and out_dtype in _SCALED_RESULTS:
        out = out * (1 / scale_result.reshape(()))
    return astype(out, to_jax_dtype(out_dtype) if out_dtype is not None else self.dtype)


_SCALED_RESULTS = (torch.float8_e4m3fn, torch.float8_e5m2)


@lowering(aten.matmul)
def _matmul(self, other):
    return _mm(self, other)


@lowering(aten.dot)
def _dot(self, tensor):
    return jnp.dot(self, tensor, precision=_PRECISION)


@lowering(aten.vdot)
def _vdot(self, other):
    return jnp.dot(jnp.conj(self), other, precision=_PRECISION)


@lowering(aten.mv)
def _mv(self, vec):
    return _mm(self, vec)


@lowering(aten.outer, aten.ger)
def _outer(self, vec2):
    return jnp.outer(self, vec2)


def _scaled_add(input_, product, beta, alpha):
    if not jnp.issubdtype(product.dtype, jnp.inexact):
        # Integer (and bool) tensors take the scalars in their own dtype: 0.6 becomes 0.
        alpha, beta = (jnp.asarray(v).astype(product.dtype) if isinstance(v, float)
                       or hasattr(v, "dtype") else v for v in (alpha, beta))
    if not (isinstance(alpha, int) and alpha == 1):
        product = product * alpha
    if isinstance(beta, int) and beta == 0:
        return jnp.broadcast_to(product, product.shape)  # beta=0 ignores NaN in input
    if isinstance(beta, int) and beta == 1:
        return input_ + product
    # (a traced beta, as eager rules see it: 0 must still ignore the input's NaNs)
    scaled = input_ * beta + product
    return jnp.where(beta == 0, jnp.broadcast_to(product, scaled.shape), scaled)


def _add_product(self, a, b, beta, alpha):
    """beta * self + alpha * (a @ b); bfloat16/float16 in float32, rounded once, as on CPU."""
    if a.dtype not in LOW_PRECISION:
        return _scaled_add(self, _mm(a, b), beta, alpha)
    product = jnp.matmul(a, b, precision=_PRECISION, preferred_element_type=jnp.float32)
    return _scaled_add(self.astype(jnp.float32), product, beta, alpha).astype(a.dtype)


@lowering(aten.addmm)
def _addmm(self, mat1, mat2, *, beta=1, alpha=1):
    return _add_product(self, mat1, mat2, beta, alpha)


@lowering(aten.baddbmm)
def _baddbmm(self, batch1, batch2, *, beta=1, alpha=1):
    return _add_product(self, batch1, batch2, beta, alpha)


@lowering(aten.addmv)
def _addmv(self, mat, vec, *, beta=1, alpha=1):
    return _add_product(self, mat, vec, beta, alpha)


@lowering(aten.addbmm)
def _addbmm(self, batch1, batch2, *, beta=1, alpha=1):
    if batch1.dtype not in LOW_PRECISION or batch1.shape[0] == 0:
        return _scaled_add(self, jnp.sum(_mm(batch1, batch2), axis=0), beta, alpha)
    # PyTorch's CPU kernel is one addmm_ per batch, each accumulating in float32 and rounding
    # the running result to bfloat16/float16: the same sequence of roundings here.
    dtype = batch1.dtype

    def product(a, b):
        return jnp.matmul(a, b, precision=_PRECISION, preferred_element_type=jnp.float32)

    first = _scaled_add(jnp.asarray(self, jnp.float32), product(batch1[0], batch2[0]),
                        beta, alpha).astype(dtype)

    def step(acc, ab):
        p = product(*ab)
        p = p if isinstance(alpha, int) and alpha == 1 else p * alpha
        return (acc.astype(jnp.float32) + p).astype(dtype), None

    out, _ = lax.scan(step, first, (batch1[1:], batch2[1:]))
    return out


@lowering(aten.linalg_cross)
def _cross(self, other, *, dim=-1):
    a, b = promote(self, other)
    return jnp.cross(a, b, axis=dim)


@lowering(aten.triu)
def _triu(self, diagonal=0):
    return jnp.triu(self, diagonal)


@lowering(aten.tril)
def _tril(self, diagonal=0):
    return jnp.tril(self, diagonal)


@lowering(aten._linalg_det)
def _det(A):
    return jnp.linalg.det(A), *lu_for_det(A)


@lowering(aten.linalg_inv_ex)
def _inv_ex(A, *, check_errors=False):
    return jnp.linalg.inv(A), lu_info(lax.linalg.lu(A)[0])


@lowering(aten.linalg_cholesky_ex)
def _cholesky_ex(self, *, upper=False, check_errors=False):
    return potrf(self, upper)


def _group_ids(offs, n):
    """Group of each of n positions, from cumulative group end offsets."""
    return jnp.searchsorted(offs, jnp.arange(n), side="right")


@lowering(aten._grouped_mm, skip_meta=True)  # the meta kernel only admits bf16 (CUDA's rule)
def _grouped_mm(self, mat2, offs=None, bias=None, out_dtype=None):
    """Mixture-of-experts matmul: rows (or the contraction) split into groups by ``offs``."""
    a, b = self, mat2
    if offs is None:
        out = _mm(a, b)  # batched: one matrix pair per group
    elif a.ndim == 2 and b.ndim == 3:  # tokens sorted by expert @ per-expert weights
        gid = jnp.minimum(_group_ids(offs, a.shape[0]), b.shape[0] - 1)
        every = jnp.einsum("nk,gkm->gnm", a, b, precision=_PRECISION)
        out = jnp.take_along_axis(every, gid[None, :, None], axis=0)[0]
        out = jnp.where((jnp.arange(a.shape[0]) < offs[-1])[:, None], out, 0)
    elif a.ndim == 2 and b.ndim == 2:  # the contraction is grouped: per-group weight grads
        gid = _group_ids(offs, a.shape[1])
        masks = gid[None, :] == jnp.arange(offs.shape[0])[:, None]
        out = jnp.einsum("kn,gn,nm->gkm", a, masks.astype(a.dtype), b, precision=_PRECISION)
    else:  # 3D @ 2D: columns of the result grouped
        gid = jnp.minimum(_group_ids(offs, b.shape[1]), a.shape[0] - 1)
        every = jnp.einsum("gnk,km->gnm", a, b, precision=_PRECISION)
        out = jnp.take_along_axis(every, gid[None, None, :], axis=0)[0]
    if bias is not None:
        out = out + bias
    return out if out_dtype is None else out.astype(to_jax_dtype(out_dtype))


def _cdist(x1, x2, p):
    diff = jnp.abs(x1[..., :, None, :] - x2[..., None, :, :])
    if p == 0:
        return jnp.sum(diff != 0, axis=-1).astype(x1.dtype)
    if p == float("inf"):
        return jnp.max(diff, axis=-1)
    if p == 2:
        # sqrt'(0) is infinite: keep the gradient of coincident points at zero, as PyTorch does.
        sq = jnp.sum(diff * diff, axis=-1)
        safe = jnp.where(sq > 0, sq, 1)
        return jnp.where(sq > 0, jnp.sqrt(safe), 0)
    return jnp.sum(diff**p, axis=-1) ** (1.0 / p)


@lowering(aten._cdist_forward)
def _cdist_forward(x1, x2, p, compute_mode):
    return _cdist(x1, x2, p)


@lowering(aten._cdist_backward)
def _cdist_backward(grad, x1, x2, p, cdist):
    if x1.size == 0 or x2.size == 0 or grad.size == 0:
        return jnp.zeros_like(x1)  # unbroadcast, as on CPU
    # Otherwise the gradient of x1 broadcast to the common batch shape (autograd sums it).
    batch = jnp.broadcast_shapes(x1.shape[:-2], x2.shape[:-2])
    x1 = jnp.broadcast_to(x1, batch + x1.shape[-2:])
    x2 = jnp.broadcast_to(x2, batch + x2.shape[-2:])
    diff = x1[..., :, None, :] - x2[..., None, :, :]
    return jnp.sum(_cdist_pair_gradient(diff, grad[..., None], cdist[..., None], p), axis=-2)


def _cdist_pair_gradient(diff, grad, dist, p):
    """CPU's kernel's gradient of each pair's distance: 0 where the distance is 0 (and, for
    p < 1, where a coordinate's difference is), sign(0) = 0 for p = 1 and infinity."""
    if p == 0:
        return jnp.zeros_like(diff)
    sign = jnp.sign(diff)
    if p == 1:
        return grad * sign
    if p == float("inf"):
        return grad * sign * (1 - jnp.minimum(1, jnp.ceil(jnp.abs(jnp.abs(diff) - dist))))
    if p < 2:
        out = sign * jnp.abs(diff) ** (p - 1) * grad / dist ** (p - 1)
        out = jnp.where((diff == 0) & (p < 1), 0, out)
    elif p == 2:
        out = grad * diff / dist
    else:
        out = diff * jnp.abs(diff) ** (p - 2) * grad / dist ** (p - 1)
    return jnp.where(dist == 0, 0, out)


@lowering(aten.addr)
def _addr(self, vec1, vec2, *, beta=1, alpha=1):
    # CPU's kernel: beta * self + alpha * vec1 * vec2 elementwise in the result dtype (each
    # operation rounded, the scalars cast to it); beta == 0 ignores self (its NaNs too).
    dt = result_type(self, vec1, vec2)
    s, v1, v2 = (x.astype(dt) for x in (self, vec1, vec2))
    a, b = jnp.asarray(alpha).astype(dt), jnp.asarray(beta).astype(dt)
    v1, v2 = v1[:, None], v2[None, :]
    if dt == jnp.bool_:
        prod = a & v1 & v2
        return jnp.broadcast_to((b & s) | prod, prod.shape)
    prod = a * v1 * v2
    return jnp.where(b == 0, prod, b * s + prod)


@lowering(aten._compute_linear_combination)
def _compute_linear_combination(input, coefficients):  # noqa: A002
    """matrix_exp's helper on CPU/cuda: out[i] = sum_j coefficients[i, j] * input[j]."""
    if input.ndim == 0 or input.size == 0:
        raise RuntimeError("Empty tensor not supported")
    return jnp.tensordot(coefficients.astype(input.dtype), input, axes=1, precision=_PRECISION)
