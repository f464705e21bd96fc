"""Householder QR in LAPACK's compact form (geqrf, orgqr, ormqr) and least squares.

LAPACK's conventions are kept: R above the diagonal, the reflectors' vectors below it with an
implicit unit head, and their scalar factors tau. On XLA:CPU jax reaches LAPACK as PyTorch's
CPU kernels do.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import torch
from jax import lax

from ..runtime.execute import executable
from .dtypes import scalar_type_name
from .linalg_factor import _mH, _mT
from .registry import lowering

aten = torch.ops.aten
_HIGHEST = lax.Precision.HIGHEST


@lowering(aten.geqrf)
def _geqrf(self):
    if self.ndim < 2:
        raise RuntimeError("torch.geqrf: input must have at least 2 dimensions.")
    # numpy's "raw" QR is LAPACK's geqrf, with the factor in Fortran (transposed) order.
    h, tau = jnp.linalg.qr(self, mode="raw")
    return _mT(h), tau


def _householder_product(a, tau):
    """Q's first n columns from k = len(tau) reflectors stored in a (m x n, m >= n)."""
    if a.shape[-1] == 0 or a.shape[-2] == 0:
        return jnp.zeros(a.shape, a.dtype)
    return lax.linalg.householder_product(a, tau)


@lowering(aten.linalg_householder_product)
def _linalg_householder_product(self, tau):
    batch = jnp.broadcast_shapes(self.shape[:-2], tau.shape[:-1])
    a = jnp.broadcast_to(self, batch + self.shape[-2:])
    return _householder_product(a, jnp.broadcast_to(tau, batch + tau.shape[-1:]))


@lowering(aten.ormqr)
def _ormqr(self, input2, input3, left=True, transpose=False):
    """Q @ C (or Q^H, or from the right), Q the full m x m product of the reflectors."""
    m, k = self.shape[-2], input2.shape[-1]
    batch = jnp.broadcast_shapes(self.shape[:-2], input2.shape[:-1], input3.shape[:-2])
    # Reflectors past the k-th are the identity (tau = 0): Q is square.
    a = jnp.zeros(batch + (m, m), self.dtype).at[..., :, :k].set(self[..., :, :k])
    tau = jnp.zeros(batch + (m,), self.dtype).at[..., :k].set(input2)
    q = _householder_product(a, tau) if m else jnp.zeros(batch + (0, 0), self.dtype)
    q = _mH(q) if transpose else q
    c = jnp.broadcast_to(input3, batch + input3.shape[-2:])
    return jnp.matmul(q, c, precision=_HIGHEST) if left else jnp.matmul(c, q, precision=_HIGHEST)


# Least squares. The four LAPACK drivers give the same solution for full-rank problems; they
# differ in what else they report: gels nothing, gelsy the rank, gelss and gelsd the rank and
# the singular values, and gels, gelss and gelsd (tall, full-rank problems) the residuals.
_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def _lstsq_checks(a, b, driver, rcond):
    if a.ndim < 2:
        raise RuntimeError("torch.linalg.lstsq: input must have at least 2 dimensions.")
    if b.ndim < 1:
        raise RuntimeError("torch.linalg.lstsq: other must have at least 1 dimension.")
    if a.dtype != b.dtype:
        raise RuntimeError("torch.linalg.lstsq: Expected input and other to have the same "
                           f"dtype, but got input's dtype {scalar_type_name(a.dtype)} and "
                           f"other's dtype {scalar_type_name(b.dtype)}")
    if a.dtype not in (jnp.float32, jnp.float64, jnp.complex64, jnp.complex128):
        # CPU's default rcond asks for the dtype's epsilon before its kernel's dtype check
        if rcond is None:
            raise RuntimeError("This function doesn't handle types other than float and double")
        raise NotImplementedError(
            f'"linalg_lstsq_cpu" not implemented for \'{scalar_type_name(a.dtype)}\'')
    diff = a.ndim - b.ndim
    if not 0 <= diff <= 1:
        raise RuntimeError("torch.linalg.lstsq: input.dim() must be greater or equal to "
                           "other.dim() and (input.dim() - other.dim()) <= 1")
    vector = diff == 1
    rows = b.shape[-1] if vector else b.shape[-2]
    if a.shape[-2] != rows:
        which = "other.size(-1)" if vector else "other.size(-2)"
        raise RuntimeError(f"torch.linalg.lstsq: input.size(-2) should match {which}")
    if driver not in _DRIVERS:
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of "
                           "(gels, gelsy, gelsd, gelss)")
    return vector


@executable(static_argnums=(3,))
def _lstsq_jit(a, b, rcond, driver):
    m, n = a.shape[-2:]
    batch = jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = jnp.broadcast_to(a, batch + a.shape[-2:])
    b = jnp.broadcast_to(b, batch + b.shape[-2:])
    u, s, vh = jnp.linalg.svd(a, full_matrices=False)
    smax = jnp.max(s, axis=-1, keepdims=True, initial=0.0)
    keep = s > rcond * smax
    inv = jnp.where(keep, 1 / jnp.where(keep, s, 1), 0).astype(a.dtype)
    x = jnp.matmul(_mH(vh) * inv[..., None, :],
                   jnp.matmul(_mH(u), b, precision=_HIGHEST), precision=_HIGHEST)
    rank = jnp.sum(keep, axis=-1).astype(jnp.int64)
    if driver == "gels":  # a QR solve assumes full rank: no threshold
        x = _lstsq_full_rank(a, b) if m and n else x
    residual = jnp.sum(jnp.abs(jnp.matmul(a, x, precision=_HIGHEST) - b) ** 2, axis=-2)
    return x, residual, rank, s


def _lstsq_full_rank(a, b):
    m, n = a.shape[-2:]
    if m >= n:
        q, r = jnp.linalg.qr(a)
        y = jnp.matmul(_mH(q), b, precision=_HIGHEST)
        return lax.linalg.triangular_solve(r, y, left_side=True, lower=False)
    q, r = jnp.linalg.qr(_mH(a))  # minimum-norm solution of an underdetermined system
    y = lax.linalg.triangular_solve(r, b, left_side=True, lower=False, transpose_a=True,
                                    conjugate_a=True)
    return jnp.matmul(q, y, precision=_HIGHEST)


@lowering(aten.linalg_lstsq, eager=True)
def _linalg_lstsq(self, b, rcond=None, *, driver=None):
    driver = driver or "gelsy"
    vector = _lstsq_checks(self, b, driver, rcond)
    b2 = b[..., None] if vector else b
    m, n = self.shape[-2:]
    real = np.finfo(self.dtype).dtype
    if rcond is None or rcond < 0:
        rcond = float(np.finfo(real).eps) * max(m, n)
    x, residual, rank, s = _lstsq_jit(self, b2, jnp.asarray(rcond, real), driver)
    batch = x.shape[:-2]
    empty_int, empty_real = jnp.zeros((0,), jnp.int64), jnp.zeros((0,), real)
    full_rank = driver in ("gelss", "gelsd") and bool(jnp.all(rank == n))
    residuals = residual if m > n and (driver == "gels" or full_rank) else empty_real
    rank = empty_int if driver == "gels" else rank.reshape(batch)
    sv = s if driver in ("gelss", "gelsd") else empty_real
    return (x[..., 0] if vector else x), residuals, rank, sv
