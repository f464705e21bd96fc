"""Matrix factorisations and solvers: LU, QR, SVD, eigh, Cholesky, triangular solves.

On XLA:CPU these reach LAPACK as PyTorch's CPU kernels do; on TPU XLA's own algorithms.
LAPACK's conventions are kept: 1-based int32 pivots and an int32 ``info`` per matrix.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import torch
from jax import lax

from .registry import lowering

aten = torch.ops.aten

_HIGHEST = lax.Precision.HIGHEST


def _mT(x):  # noqa: N802 (PyTorch's name)
    return jnp.swapaxes(x, -1, -2)


def _mH(x):  # noqa: N802
    return jnp.conj(_mT(x))


def _first_failure(bad):
    """LAPACK's info from a per-pivot failure mask: 1 + the first failing pivot, else 0."""
    if bad.shape[-1] == 0:  # an empty matrix factors trivially
        return jnp.zeros(bad.shape[:-1], jnp.int32)
    return jnp.where(bad.any(-1), jnp.argmax(bad, -1) + 1, 0).astype(jnp.int32)


def lu_info(lu):
    """LAPACK getrf's info per matrix: the first zero on U's diagonal."""
    return _first_failure(jnp.diagonal(lu, axis1=-2, axis2=-1) == 0)


def cholesky_info(lower):
    """LAPACK potrf's info: the order of the first leading minor that is not positive-definite
    (its pivot is NaN or not positive)."""
    return _first_failure(~(jnp.real(jnp.diagonal(lower, axis1=-2, axis2=-1)) > 0))


def potrf(A, upper: bool = False):
    """LAPACK potrf, as CPU calls it: the Cholesky factor of A read from one triangle (the
    lower; the upper for ``upper``), and its info. Where a leading minor is not
    positive-definite, info names its order and the factor is what LAPACK's unblocked potf2
    leaves: the columns factored so far, the failing pivot's value, then A itself."""
    a = _mH(A) if upper else A
    # (jnp.linalg.cholesky averages A with its transpose; LAPACK reads one triangle)
    fast = lax.linalg.cholesky(a, symmetrize_input=False)
    info = cholesky_info(fast)
    if a.shape[-1]:
        fast, info = lax.cond(jnp.any(info != 0), _potf2, lambda a, fast: (fast, info), a, fast)
    return (_mH(fast) if upper else fast), info


def _potf2(a, fast):
    """The unblocked factorisation, column by column, stopping (per matrix) at the first
    pivot that is not positive; matrices that factor keep the blocked result ``fast``."""
    n = a.shape[-1]
    idx = jnp.arange(n)

    def column(j, state):
        low, info = state
        row = jnp.where(idx < j, low[..., j, :], 0)
        done = jnp.where(idx < j, low, 0)
        col = low[..., :, j] - jnp.einsum("...ik,...k->...i", done, jnp.conj(row),
                                          precision=_HIGHEST)
        pivot = jnp.real(col[..., j])
        active = info == 0
        fails = active & ~(pivot > 0)
        root = jnp.sqrt(jnp.where(fails, 1, pivot))[..., None].astype(col.dtype)
        factored = jnp.where(idx > j, col / root, jnp.where(idx == j, root, low[..., :, j]))
        failed = jnp.where(idx == j, col, low[..., :, j])
        new = jnp.where(fails[..., None], failed,
                        jnp.where(active[..., None], factored, low[..., :, j]))
        return low.at[..., :, j].set(new), jnp.where(fails, j + 1, info).astype(jnp.int32)

    low, info = lax.fori_loop(0, n, column, (a, jnp.zeros(a.shape[:-2], jnp.int32)))
    return jnp.where((info == 0)[..., None, None], fast, jnp.tril(low)), info


def _matmul(a, b):
    return jnp.matmul(a, b, precision=_HIGHEST)


def _lu(A):
    """LU with partial pivoting: (LU, 1-based int32 pivots, row permutation)."""
    lu, pivots, perm = lax.linalg.lu(A)
    return lu, pivots.astype(jnp.int32) + 1, perm


def _perm_from_pivots(pivots, m):
    """The row order ``perm`` with A[perm] = L @ U, from LAPACK's 1-based row swaps."""
    batch = pivots.shape[:-1]
    if 0 in pivots.shape:
        return jnp.broadcast_to(jnp.arange(m, dtype=jnp.int32), batch + (m,))
    piv = pivots.reshape(-1, pivots.shape[-1]).astype(jnp.int32) - 1

    def one(p):
        def swap(i, perm):
            j = p[i]
            a, b = perm[i], perm[j]
            return perm.at[i].set(b).at[j].set(a)

        return lax.fori_loop(0, p.shape[0], swap, jnp.arange(m, dtype=jnp.int32))

    return jax.vmap(one)(piv).reshape(batch + (m,))


def _permutation_matrix(perm, dtype):
    """P with A = P @ L @ U, given A[perm] = L @ U."""
    return _mT(jax.nn.one_hot(perm, perm.shape[-1], dtype=dtype))


def _unpack(lu):
    m, n = lu.shape[-2:]
    k = min(m, n)
    lower = jnp.tril(lu[..., :, :k], -1) + jnp.eye(m, k, dtype=lu.dtype)
    upper = jnp.triu(lu[..., :k, :])
    return lower, upper


@lowering(aten.linalg_lu_factor_ex)
def _linalg_lu_factor_ex(A, *, pivot=True, check_errors=False):
    lu, pivots, _ = _lu(A)
    return lu, pivots, lu_info(lu)


@lowering(aten.linalg_lu)
def _linalg_lu(A, *, pivot=True):
    lu, _, perm = _lu(A)
    lower, upper = _unpack(lu)
    return _permutation_matrix(perm, A.dtype), lower, upper


@lowering(aten.lu_unpack)
def _lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):  # noqa: N803
    m = LU_data.shape[-2]
    # What is not asked for comes back empty, as on CPU (lu_solve's backward asks for L, U only).
    empty = jnp.zeros((0,), LU_data.dtype)
    lower, upper = _unpack(LU_data) if unpack_data else (empty, empty)
    if not unpack_pivots:
        return empty, lower, upper
    perm = _perm_from_pivots(LU_pivots, m)
    return _permutation_matrix(perm, LU_data.dtype), lower, upper


def _lu_solve(lu, perm, B, adjoint):
    """Solve A X = B (or A^H X = B) for A = P L U, given A[perm] = L U."""
    if not adjoint:
        x = jnp.take_along_axis(B, perm[..., None], axis=-2)
        x = lax.linalg.triangular_solve(lu, x, left_side=True, lower=True, unit_diagonal=True)
        return lax.linalg.triangular_solve(lu, x, left_side=True, lower=False)
    x = lax.linalg.triangular_solve(lu, B, left_side=True, lower=False, transpose_a=True,
                                    conjugate_a=True)
    x = lax.linalg.triangular_solve(lu, x, left_side=True, lower=True, transpose_a=True,
                                    conjugate_a=True, unit_diagonal=True)
    inverse = jnp.argsort(perm, axis=-1)
    return jnp.take_along_axis(x, inverse[..., None], axis=-2)


def _broadcast_batch(A, B):
    batch = jnp.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    return (jnp.broadcast_to(A, batch + A.shape[-2:]), jnp.broadcast_to(B, batch + B.shape[-2:]))


@lowering(aten.linalg_lu_solve)
def _linalg_lu_solve(LU, pivots, B, *, left=True, adjoint=False):  # noqa: N803
    perm = _perm_from_pivots(pivots, LU.shape[-1])
    if not left:  # X A = B  <=>  A^H X^H = B^H
        return _mH(_linalg_lu_solve(LU, pivots, _mH(B), left=True, adjoint=not adjoint))
    batch = jnp.broadcast_shapes(LU.shape[:-2], B.shape[:-2])
    LU = jnp.broadcast_to(LU, batch + LU.shape[-2:])  # noqa: N806
    perm = jnp.broadcast_to(perm, batch + perm.shape[-1:])
    B = jnp.broadcast_to(B, batch + B.shape[-2:])  # noqa: N806
    return _lu_solve(LU, perm, B, adjoint)


@lowering(aten._linalg_solve_ex)
def _linalg_solve_ex(A, B, *, left=True, check_errors=False):
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and B.shape == A.shape[:-1])
    b = B[..., None] if vector else B
    lu, pivots, perm = _lu(A)
    if left:
        a, b2 = _broadcast_batch(lu, b)
        p = jnp.broadcast_to(perm, a.shape[:-1])
        x = _lu_solve(a, p, b2, adjoint=False)
    else:
        a, b2 = _broadcast_batch(lu, _mT(b))
        p = jnp.broadcast_to(perm, a.shape[:-1])
        # X A = B  <=>  A^T X^T = B^T, and A^T is conj(A)^H (conj(A)'s LU: conj(a), same p)
        x = _mT(_lu_solve(jnp.conj(a), p, b2, adjoint=True))
    return (x[..., 0] if vector else x), lu, pivots, lu_info(lu)


@lowering(aten.linalg_solve_triangular)
def _linalg_solve_triangular(self, B, *, upper, left=True, unitriangular=False):
    a, b = _broadcast_batch(self, B)
    b = b.astype(a.dtype)  # CPU copies B into a result of A's dtype, whatever B's
    return lax.linalg.triangular_solve(a, b, left_side=left, lower=not upper,
                                       unit_diagonal=unitriangular)


@lowering(aten.triangular_solve)
def _triangular_solve(self, A, upper=True, transpose=False, unitriangular=False):
    b, a = _broadcast_batch(self, A)
    x = lax.linalg.triangular_solve(a, b, left_side=True, lower=not upper,
                                    transpose_a=transpose, unit_diagonal=unitriangular)
    return x, a


@lowering(aten.cholesky_solve)
def _cholesky_solve(self, input2, upper=False):
    b, c = _broadcast_batch(self, input2)
    lower = _mH(c) if upper else c
    y = lax.linalg.triangular_solve(lower, b, left_side=True, lower=True)
    return lax.linalg.triangular_solve(lower, y, left_side=True, lower=True, transpose_a=True,
                                       conjugate_a=True)


@lowering(aten.cholesky_inverse)
def _cholesky_inverse(self, upper=False):
    eye = jnp.broadcast_to(jnp.eye(self.shape[-1], dtype=self.dtype), self.shape)
    return _cholesky_solve(eye, self, upper)


@lowering(aten.linalg_qr, static=("mode",))
def _linalg_qr(A, mode="reduced"):
    if mode == "r":
        r = jnp.linalg.qr(A, mode="r")
        return jnp.zeros((0,), A.dtype), r
    q, r = jnp.linalg.qr(A, mode=mode)
    return q, r


@lowering(aten._linalg_svd, static=("full_matrices", "compute_uv", "driver"))
def _linalg_svd(A, full_matrices=False, compute_uv=True, *, driver=None):
    if driver is not None:  # CPU's refusal: a cuSOLVER choice, meaningless elsewhere
        raise RuntimeError("torch.linalg.svd: keyword argument `driver=` is only supported on "
                           "CUDA inputs with cuSOLVER backend.")
    if not compute_uv:
        s = jnp.linalg.svd(A, compute_uv=False)
        empty = jnp.zeros((0,), A.dtype)
        return empty, s, empty
    u, s, vh = jnp.linalg.svd(A, full_matrices=full_matrices)
    return u, s, vh


@lowering(aten._linalg_eigh, static=("UPLO", "compute_v"))
def _linalg_eigh(A, UPLO="L", compute_v=True):  # noqa: N803
    # CPU takes either case ("u"); jax only upper
    w, v = jnp.linalg.eigh(A, UPLO=UPLO.upper(), symmetrize_input=False)
    return w, (v if compute_v else jnp.zeros((0,), A.dtype))


@lowering(aten.linalg_eig)
def _linalg_eig(self):
    w, v = jnp.linalg.eig(self)
    return w, v


@lowering(aten._linalg_eigvals)
def _linalg_eigvals(self):
    return jnp.linalg.eigvals(self)


def lu_for_det(A):
    """The LU factors _linalg_det and _linalg_slogdet return: CPU factors a real matrix's
    transpose (a C-contiguous A is F-contiguous transposed; det(A^T) = det(A)), and its
    backward solves with them accordingly. A non-contiguous real A reaches the rule already
    transposed (eager/dispatch.py), as CPU then factors A itself."""
    return _lu(A if jnp.iscomplexobj(A) else _mT(A))[:2]


@lowering(aten._linalg_slogdet)
def _linalg_slogdet(A):
    # CPU's formula from its LU: the sign is the product of sgn(U_ii) (0 for a real NaN, where
    # jnp.linalg.slogdet's sign stayed 1) with the pivots' parity
    lu, pivots = lu_for_det(A)
    d = jnp.diagonal(lu, axis1=-2, axis2=-1)
    a = jnp.abs(d)
    if jnp.iscomplexobj(d):
        sgn = jnp.where(a == 0, 0, d / jnp.where(a == 0, 1, a))
    else:
        sgn = jnp.where(jnp.isnan(d), 0, jnp.sign(d))
    swaps = jnp.sum(pivots != jnp.arange(1, pivots.shape[-1] + 1, dtype=pivots.dtype), axis=-1)
    parity = jnp.where(swaps % 2 == 1, -1, 1).astype(d.dtype)
    return jnp.prod(sgn, axis=-1) * parity, jnp.sum(jnp.log(a), axis=-1), lu, pivots


# jax's expm's largest Pade degree holds to these 1-norms.
_EXPM_MAX_NORM = {jnp.dtype(jnp.float32): 3.925724783138660,
                  jnp.dtype(jnp.float64): 5.371920351148152}


def _expm(A):
    """expm, scaled here until each matrix is within its Pade approximant's norm: jax's expm
    scales by 2**floor(log2(norm / bound)), which leaves a norm up to twice the bound (a
    float32 norm of 6 came out ~400 ulps from exact, CPU's 1), and gives NaN past 16
    squarings, where CPU (scaling and squaring as well) has no limit."""
    norm = jnp.max(jnp.sum(jnp.abs(A), axis=-2), axis=-1)
    bound = _EXPM_MAX_NORM[jnp.dtype(norm.dtype)]
    s = jnp.ceil(jnp.log2(norm / bound))
    s = jnp.where(jnp.isfinite(s), jnp.clip(s, 0, 2048), 0).astype(jnp.int32)
    scale = jnp.ldexp(jnp.ones((), norm.dtype), -s)[..., None, None]
    R = jax.scipy.linalg.expm(A * scale.astype(A.dtype))

    def square(i, r):
        return jnp.where((i < s)[..., None, None], _matmul(r, r), r)

    return lax.fori_loop(0, jnp.max(s, initial=0), square, R)


@lowering(aten.linalg_matrix_exp)
def _linalg_matrix_exp(self):
    if self.dtype in (jnp.bfloat16, jnp.float16):  # expm has no low-precision form
        return _expm(self.astype(jnp.float32)).astype(self.dtype)
    return _expm(self)


@lowering(aten.linalg_pinv.atol_rtol_tensor, static=("hermitian",))
def _linalg_pinv(self, *, atol=None, rtol=None, hermitian=False):
    m, n = self.shape[-2:]
    if hermitian:
        w, v = jnp.linalg.eigh(self, symmetrize_input=False)
        s, u, vh = jnp.abs(w), v * jnp.sign(w)[..., None, :], _mH(v)
    else:
        u, s, vh = jnp.linalg.svd(self, full_matrices=False)
    smax = jnp.max(s, axis=-1, keepdims=True, initial=0.0)
    real = s.dtype
    if rtol is None:
        eps = jnp.finfo(real).eps * max(m, n)
        rtol = jnp.where(atol is not None and jnp.any(jnp.asarray(atol) > 0), 0.0, eps) \
            if atol is not None else eps
    atol = 0.0 if atol is None else atol
    atol, rtol = jnp.asarray(atol, real), jnp.asarray(rtol, real)
    cutoff = jnp.maximum(atol[..., None] if atol.ndim else atol,
                         (rtol[..., None] if rtol.ndim else rtol) * smax)
    inv = jnp.where(s > cutoff, 1 / jnp.where(s > cutoff, s, 1), 0).astype(u.dtype)
    return _matmul(_mH(vh) * inv[..., None, :], _mH(u))


@lowering(aten._linalg_check_errors, eager=True)
def _linalg_check_errors(info, api_name, *, is_matrix):
    """CPU's error for the first nonzero LAPACK info (a host sync, as on cuda)."""
    info = np.asarray(info).reshape(-1)
    bad = np.flatnonzero(info)
    if not bad.size:
        return
    code = int(info[bad[0]])
    where = "" if is_matrix else f"(Batch element {bad[0]}): "
    if "lu_factor" in api_name:
        raise RuntimeError(
            f"{api_name}: {where}U[{code},{code}] is zero and using it on lu_solve would result "
            "in a division by zero. If you still want to perform the factorization, consider "
            "calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")
    if "inv" in api_name:
        why = (f"The diagonal element {code} is zero, the inversion could not be completed "
               "because the input matrix is singular.")
    elif "solve" in api_name:
        why = "The solver failed because the input matrix is singular."
    elif "cholesky" in api_name:
        why = ("The factorization could not be completed because the input is not "
               f"positive-definite (the leading minor of order {code} is not positive-definite).")
    else:
        why = ("The factorization could not be completed because the input is not full rank "
               "or not positive-definite.")
    raise torch.linalg.LinAlgError(f"{api_name}: {where}{why}")
