"""LDL^T factorisation with Bunch-Kaufman pivoting, in LAPACK's sytrf format, and its solve.

The factor is LAPACK's ?sytf2 (lower), step for step: the same pivot choices (1x1 or 2x2
blocks), the same interchanges (applied to the trailing matrix only, so L's earlier columns
keep their rows), the same updates, and 1-based int32 pivots, negative for 2x2 blocks. The
solve is ?sytrs (lower). Matrices are small loops of masked updates, vmapped over batches.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import torch
from jax import lax

from .registry import lowering

aten = torch.ops.aten


def _sytf2(a):
    """One matrix (n x n, lower triangle read): (LD, 1-based pivots, info)."""
    n = a.shape[0]
    dt = a.dtype
    alpha = (np.sqrt(np.asarray(17, dt)) + np.asarray(1, dt)) / np.asarray(8, dt)
    idx = jnp.arange(n)
    a = jnp.tril(a)

    def step(state):
        a, piv, k, info = state
        col = _cabs1(a[:, k])
        absakk = col[k]
        below = idx > k
        imax = jnp.argmax(jnp.where(below, col, -1))  # i?amax: the first largest
        colmax = jnp.where(k < n - 1, col[imax], 0)
        zero = (jnp.maximum(absakk, colmax) == 0) | jnp.isnan(absakk)
        # Largest off-diagonal entry in row/column imax of the trailing matrix.
        row_imax = _cabs1(a[imax, :])  # columns k .. imax - 1 (row imax)
        col_imax = _cabs1(a[:, imax])  # rows imax + 1 .. n - 1 (column imax)
        rowmax = jnp.maximum(jnp.max(jnp.where((idx >= k) & (idx < imax), row_imax, 0)),
                             jnp.max(jnp.where(idx > imax, col_imax, 0)))
        keep_k = (absakk >= alpha * colmax) | (absakk >= alpha * colmax * (colmax / rowmax))
        take_imax = _cabs1(a[imax, imax]) >= alpha * rowmax
        kstep = jnp.where(zero | keep_k | take_imax, 1, 2)
        kp = jnp.where(zero | keep_k, k, imax)
        kk = k + kstep - 1
        # Interchange kk and kp in the trailing matrix (symmetric, stored lower).
        trailing = (idx[:, None] >= k) & (idx[None, :] >= k)
        full = jnp.where(trailing, a + a.T - jnp.diag(jnp.diag(a)), 0)
        perm = jnp.where(idx == kk, kp, jnp.where(idx == kp, kk, idx))
        swapped = full[perm][:, perm]
        lower = idx[:, None] >= idx[None, :]
        a = jnp.where(trailing & lower & ~zero, swapped, a)
        a = jnp.where(zero, a, jnp.where(kstep == 1, _update1(a, k, idx), _update2(a, k, idx)))
        piv = jnp.where(kstep == 1, piv.at[k].set(kp + 1),
                        piv.at[k].set(-(kp + 1)).at[jnp.minimum(k + 1, n - 1)].set(-(kp + 1)))
        info = jnp.where(zero & (info == 0), k + 1, info)
        return a, piv, k + kstep, info

    state = (a, jnp.zeros((n,), jnp.int32), jnp.int32(0), jnp.int32(0))
    a, piv, _, info = lax.while_loop(lambda s: s[2] < n, step, state)
    return a, piv, info


def _cabs1(z):
    """LAPACK's magnitude for complex pivoting (icamax, csytf2): |re| + |im|."""
    return jnp.abs(z.real) + jnp.abs(z.imag) if jnp.iscomplexobj(z) else jnp.abs(z)


def _refuse_complex_hermitian(a, hermitian):
    # LAPACK's ?hetrf conjugates in every update and pivots on the real diagonal: not this
    # symmetric factorisation.
    if hermitian and jnp.iscomplexobj(a):
        raise NotImplementedError(
            "torchtpu: linalg.ldl_factor / ldl_solve with hermitian=True of a complex matrix is "
            "not supported on tpu (the symmetric hermitian=False form is); factor it on the "
            "CPU")


def _update1(a, k, idx):
    """A 1x1 pivot: A22 -= x x^T / d, and the column becomes x / d."""
    d11 = 1 / a[k, k]
    x = jnp.where(idx > k, a[:, k], 0)
    rest = (idx[:, None] > k) & (idx[None, :] > k) & (idx[:, None] >= idx[None, :])
    a = jnp.where(rest, a + x[:, None] * (-d11 * x)[None, :], a)
    return jnp.where((idx[:, None] > k) & (idx[None, :] == k), (d11 * x)[:, None], a)


def _update2(a, k, idx):
    """A 2x2 pivot in rows/columns k, k + 1."""
    n = a.shape[0]
    k1 = jnp.minimum(k + 1, n - 1)
    d21 = a[k1, k]
    d11 = a[k1, k1] / d21
    d22 = a[k, k] / d21
    t = 1 / (d11 * d22 - 1)
    d21 = t / d21
    ck, ck1 = a[:, k], a[:, k1]
    wk = d21 * (d11 * ck - ck1)
    wkp1 = d21 * (d22 * ck1 - ck)
    rows = idx > k + 1
    rest = rows[:, None] & rows[None, :] & (idx[:, None] >= idx[None, :])
    a = jnp.where(rest, a - ck[:, None] * wk[None, :] - ck1[:, None] * wkp1[None, :], a)
    a = jnp.where(rows[:, None] & (idx[None, :] == k), wk[:, None], a)
    return jnp.where(rows[:, None] & (idx[None, :] == k1), wkp1[:, None], a)


@lowering(aten.linalg_ldl_factor_ex, static=("hermitian", "check_errors"))
def _linalg_ldl_factor_ex(self, *, hermitian=False, check_errors=False):
    _refuse_complex_hermitian(self, hermitian)
    batch, n = self.shape[:-2], self.shape[-1]
    if n == 0 or 0 in batch:
        return (self, jnp.zeros(self.shape[:-1], jnp.int32),
                jnp.zeros(batch, jnp.int32))
    ld, piv, info = jax.vmap(_sytf2)(self.reshape((-1, n, n)))
    return (ld.reshape(self.shape), piv.reshape(self.shape[:-1]), info.reshape(batch))


def _swap_rows(b, i, j):
    bi, bj = b[i], b[j]
    return b.at[i].set(bj).at[j].set(bi)


def _sytrs(ld, piv, b):
    """Solve with one factor (n x n), pivots (n,), right-hand sides (n, m)."""
    n = ld.shape[0]
    idx = jnp.arange(n)

    def forward(state):  # L D X = B, from the first block down
        b, k = state
        one = piv[k] > 0
        kp = jnp.where(one, piv[k], -piv[k]) - 1
        k1 = jnp.minimum(k + 1, n - 1)
        b = jnp.where(one, _swap_rows(b, k, kp), _swap_rows(b, k1, kp))
        below1 = jnp.where(idx > k, ld[:, k], 0)
        b1 = b - below1[:, None] * b[k][None, :]
        b1 = b1.at[k].multiply(1 / ld[k, k])
        below2 = idx > k + 1
        b2 = b - jnp.where(below2, ld[:, k], 0)[:, None] * b[k][None, :]
        b2 = b2 - jnp.where(below2, ld[:, k1], 0)[:, None] * b2[k1][None, :]
        akm1k = ld[k1, k]
        akm1 = ld[k, k] / akm1k
        ak = ld[k1, k1] / akm1k
        denom = akm1 * ak - 1
        bkm1, bk = b2[k] / akm1k, b2[k1] / akm1k
        b2 = b2.at[k].set((ak * bkm1 - bk) / denom).at[k1].set((akm1 * bk - bkm1) / denom)
        return jnp.where(one, b1, b2), k + jnp.where(one, 1, 2)

    def backward(state):  # L^T X = B, from the last block up
        b, k = state
        one = piv[k] > 0
        below = jnp.where(idx > k, 1, 0).astype(ld.dtype)
        b = b.at[k].add(-jnp.sum((ld[:, k] * below)[:, None] * b, axis=0))
        km1 = jnp.maximum(k - 1, 0)
        b_two = b.at[km1].add(-jnp.sum((ld[:, km1] * below)[:, None] * b, axis=0))
        b = jnp.where(one, b, b_two)
        kp = jnp.where(one, piv[k], -piv[k]) - 1
        return _swap_rows(b, k, kp), k - jnp.where(one, 1, 2)

    b, _ = lax.while_loop(lambda s: s[1] < n, forward, (b, jnp.int32(0)))
    b, _ = lax.while_loop(lambda s: s[1] >= 0, backward, (b, jnp.int32(n - 1)))
    return b


@lowering(aten.linalg_ldl_solve, static=("hermitian",))
def _linalg_ldl_solve(LD, pivots, B, *, hermitian=False):  # noqa: N803
    _refuse_complex_hermitian(LD, hermitian)
    n = LD.shape[-1]
    batch = jnp.broadcast_shapes(LD.shape[:-2], pivots.shape[:-1], B.shape[:-2])
    if n == 0 or 0 in batch or B.shape[-1] == 0:
        return jnp.zeros(batch + B.shape[-2:], B.dtype)
    ld = jnp.broadcast_to(LD, batch + LD.shape[-2:]).reshape((-1, n, n))
    piv = jnp.broadcast_to(pivots, batch + pivots.shape[-1:]).reshape((-1, n))
    b = jnp.broadcast_to(B, batch + B.shape[-2:]).reshape((-1,) + B.shape[-2:])
    return jax.vmap(_sytrs)(ld, piv.astype(jnp.int32), b).reshape(batch + B.shape[-2:])
