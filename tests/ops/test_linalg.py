"""Linear algebra values the OpInfo sweep's real dtypes do not reach (complex inputs), and
the operand layout XLA:CPU's products are given."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import pytest
import torch
from conftest import TPU, raises_as_cpu

from torchtpu.ops import linalg
from torchtpu.runtime.platform import platform


def test_vdot_and_vecdot_conjugate_their_first_argument():
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randn(3, 4, dtype=torch.complex64, generator=g) for _ in range(2))
    for op in (lambda x, y: torch.vdot(x[0], y[0]), torch.linalg.vecdot):
        torch.testing.assert_close(op(a.to("tpu"), b.to("tpu")).cpu(), op(a, b))


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("A", [
    torch.tensor([[4.0, 100.0], [2.0, 5.0]]),  # one triangle is read: A is not symmetric
    torch.tensor([[1.0, 2.0], [2.0, 1.0]]),  # the leading minor of order 2 fails
    torch.stack([torch.eye(3) * 2, -torch.eye(3), torch.diag(torch.tensor([1.0, 2.0, -1.0]))]),
    torch.diag(torch.tensor([1.0, 2.0, 3.0, -1.0, 5.0])) + 0.1,
])
def test_cholesky_reads_one_triangle_and_reports_the_failing_minor(A, upper):
    # LAPACK's info and what its potf2 leaves where it stops; jnp.linalg.cholesky averaged A
    # with its transpose and set a failed factor to NaN (info always 1).
    torch.testing.assert_close(
        [t.cpu() for t in torch.linalg.cholesky_ex(A.to("tpu"), upper=upper)],
        list(torch.linalg.cholesky_ex(A, upper=upper)))


def test_deprecated_cholesky_raises_as_linalg_cholesky():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # CPU's deprecation notice
        raises_as_cpu(lambda d: torch.cholesky(torch.tensor([[1.0, 2.0], [2.0, 1.0]], device=d)),
                      torch.linalg.LinAlgError)


_SINGULAR = torch.zeros(3, 3)


@pytest.mark.parametrize("mode", ["strict", "fused"])
@pytest.mark.parametrize("bad", [
    lambda d: torch.linalg.cholesky_ex(torch.tensor([[1.0, 2.0], [2.0, 1.0]], device=d),
                                       check_errors=True),
    lambda d: torch.linalg.cholesky_ex(torch.stack([torch.eye(2), -torch.eye(2)]).to(d),
                                       check_errors=True),
    lambda d: torch.linalg.inv_ex(_SINGULAR.to(d), check_errors=True),
    lambda d: torch.linalg.lu_factor_ex(_SINGULAR.to(d), check_errors=True),
    lambda d: torch.linalg.solve_ex(_SINGULAR.to(d), torch.ones(3, 1, device=d),
                                    check_errors=True),
    # (a factor with a zero on its diagonal, which LAPACK's potri refuses)
    lambda d: torch.cholesky_inverse(torch.stack([torch.eye(2), torch.tensor(
        [[1.0, 0.0], [1.0, 0.0]])]).to(d)),
], ids=["cholesky", "cholesky_batch", "inv", "lu_factor", "solve", "cholesky_inverse"])
def test_ex_ops_raise_with_check_errors_as_cpu(bad, mode):
    import torchtpu

    with torchtpu.set_eager_mode(mode):
        raises_as_cpu(bad)


def test_complex_symmetric_ldl_pivots_as_lapack():
    # csytf2 pivots on |re| + |im|, not the modulus: other pivots, other factors.
    g = torch.Generator().manual_seed(0)
    A = torch.randn(5, 6, 6, dtype=torch.complex64, generator=g)
    A = A + A.mT
    b = torch.randn(5, 6, 2, dtype=torch.complex64, generator=g)
    factor, pivots = torch.linalg.ldl_factor(A.to("tpu"))
    expected = torch.linalg.ldl_factor(A)
    assert torch.equal(pivots.cpu(), expected[1])
    torch.testing.assert_close(factor.cpu(), expected[0])
    torch.testing.assert_close(torch.linalg.ldl_solve(factor, pivots, b.to("tpu")).cpu(),
                               torch.linalg.ldl_solve(*expected, b), rtol=1e-4, atol=1e-5)
    with pytest.raises(NotImplementedError, match="hermitian=True of a complex matrix"):
        torch.linalg.ldl_factor((A + A.mH).to("tpu"), hermitian=True)


@pytest.mark.skipif(platform() != "cpu", reason="an XLA:CPU kernel choice")
@pytest.mark.parametrize("shapes", [((64, 32), (64, 16)), ((4, 64, 32), (4, 64, 16))])
def test_a_left_operand_read_down_its_columns_is_laid_out_in_rows_on_xla_cpu(shapes):
    # A weight gradient's dy^T @ x: XLA:CPU would fold the transpose into the product and run
    # it on Eigen, ~2/3 the speed of the YNNPACK kernel that takes the operand in rows.
    a, b = (jnp.ones(s, jnp.float32) for s in shapes)
    product = jax.jit(lambda a, b: linalg._mm(jnp.swapaxes(a, -1, -2), b))
    text = product.lower(a, b).compile().as_text()
    assert f"lhs_contracting_dims={{{len(shapes[0]) - 2}}}" not in text
    assert f"lhs_contracting_dims={{{len(shapes[0]) - 1}}}" in text


@pytest.mark.parametrize("dtypes", [(torch.float64, torch.float32), (torch.float32, torch.float64)])
def test_solve_triangular_solves_in_the_matrixs_dtype(dtypes):
    # CPU copies B into a result of A's dtype.
    a = torch.randn(4, 4, dtype=dtypes[0]).triu() + 4 * torch.eye(4, dtype=dtypes[0])
    b = torch.randn(4, 2, dtype=dtypes[1])
    cpu = torch.linalg.solve_triangular(a, b, upper=True)
    tpu = torch.linalg.solve_triangular(a.to("tpu"), b.to("tpu"), upper=True)
    assert tpu.dtype == cpu.dtype == dtypes[0]
    torch.testing.assert_close(tpu.cpu(), cpu)


@pytest.mark.parametrize("solve", [
    lambda a, b: torch.linalg.solve(a, b), lambda a, b: torch.triangular_solve(b, a),
    lambda a, b: torch.cholesky_solve(b, a),
    lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b),
    lambda a, b: torch.linalg.lstsq(a, b),
], ids=["solve", "triangular_solve", "cholesky_solve", "lu_solve", "lstsq"])
def test_solvers_name_mixed_dtypes_as_cpu(solve):
    a = torch.eye(3, dtype=torch.float64)
    raises_as_cpu(lambda d: solve(a.to(d), torch.ones(3, 2, device=d)))


@pytest.mark.parametrize("op", ["addr", "addmm", "addmv", "baddbmm", "addbmm"])
@pytest.mark.parametrize("kw", [{"beta": 2.0}, {"alpha": 1.5}, {"beta": True}, {"alpha": True},
                                {"beta": 1j}])
@pytest.mark.parametrize("dtype", [torch.int64, torch.float32])
def test_blas_beta_and_alpha_are_checked_as_cpu(op, kw, dtype):
    # addr's check_addr_scalar, then the conversion of each to the result's dtype.
    def call(device):
        m = torch.ones(3, 3, dtype=dtype, device=device)
        v = torch.ones(3, dtype=dtype, device=device)
        b = torch.ones(2, 3, 3, dtype=dtype, device=device)
        args = {"addr": (m, v, v), "addmm": (m, m, m), "addmv": (v, m, v),
                "baddbmm": (b, b, b), "addbmm": (m, b, b)}[op]
        return getattr(torch, op)(*args, **kw)

    try:
        expected = call("cpu")
    except RuntimeError:
        raises_as_cpu(call)
    else:
        torch.testing.assert_close(call("tpu").cpu(), expected)


def test_eig_out_dtypes_are_checked_in_its_words():
    a = torch.tensor([[3.0, -2.0], [4.0, -1.0]])
    for dtypes in [(torch.float32, torch.complex64), (torch.complex128, torch.float32),
                   (torch.int32, torch.int32)]:
        raises_as_cpu(lambda d, dtypes=dtypes: torch.linalg.eig(
            a.to(d), out=tuple(torch.empty(0, dtype=t, device=d) for t in dtypes)))
    # a complex128 out takes complex64 eigenpairs (a safe cast), as on CPU
    outs = tuple(torch.empty(0, dtype=torch.complex128, device="tpu") for _ in range(2))
    torch.linalg.eig(a.to("tpu"), out=outs)
    assert [t.dtype for t in outs] == [torch.complex128] * 2


@pytest.mark.parametrize("op", [torch.dot, torch.vdot])
def test_dot_checks_dims_before_dtypes(op):
    raises_as_cpu(lambda d: op(torch.ones(1, 1, device=d), torch.ones(3, dtype=torch.float64,
                                                                        device=d)))


def test_householder_product_names_taus_dtype_as_cpu():
    raises_as_cpu(lambda d: torch.linalg.householder_product(
        torch.ones(3, 3, device=d), torch.ones(3, dtype=torch.int32, device=d)))


@pytest.mark.parametrize("dtype", [torch.complex64, torch.float32])
def test_solve_from_the_right_of_a_complex_matrix(dtype):
    # X A = B is A^T X^T = B^T: a transpose, not a conjugate transpose.
    g = torch.Generator().manual_seed(0)
    A = torch.randn(2, 4, 4, dtype=dtype, generator=g) + 4 * torch.eye(4, dtype=dtype)
    B = torch.randn(2, 3, 4, dtype=dtype, generator=g)
    torch.testing.assert_close(torch.linalg.solve(A.to("tpu"), B.to("tpu"), left=False).cpu(),
                               torch.linalg.solve(A, B, left=False))


@pytest.mark.parametrize("beta", [0, 0.0])
@pytest.mark.parametrize("op", ["addmm", "addmv", "baddbmm", "addbmm"])
def test_a_zero_beta_ignores_nans_in_the_input(op, beta):
    # Eager rules see beta traced: a check of its value in Python never fired.
    def call(device):
        m = torch.ones(3, 3, device=device)
        b = torch.ones(2, 3, 3, device=device)
        nan = {"addmm": m, "addmv": m[0], "baddbmm": b, "addbmm": m}[op] * math.nan
        args = {"addmm": (m, m), "addmv": (m, m[0]), "baddbmm": (b, b), "addbmm": (b, b)}[op]
        return getattr(torch, op)(nan, *args, beta=beta, alpha=1.5)

    torch.testing.assert_close(call("tpu").cpu(), call("cpu"))


@pytest.mark.parametrize("kwargs", [
    {}, {"atol": 0.5}, {"tol": 0.5}, {"hermitian": True},
    {"atol": torch.tensor(0.5), "rtol": torch.tensor(0.1)}, {"tol": torch.tensor(0.5)},
], ids=["default", "atol", "tol", "hermitian", "tensor_tolerances", "tensor_tol"])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_matrix_rank_writes_its_out(kwargs, dtype):
    # Its composite hands a tensor subclass's rank to a new tensor, never to the out.
    a = torch.randn(3, 5, 5, generator=torch.Generator().manual_seed(0))
    a[0, :, :2] = 0

    def run(device):
        out = torch.full((3,), 7, dtype=dtype, device=device)
        kw = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
        assert torch.linalg.matrix_rank(a.to(device), out=out, **kw) is out
        return out

    assert torch.equal(run(TPU).cpu(), run("cpu"))


def test_matrix_rank_refuses_an_out_it_cannot_cast_to():
    with pytest.raises(RuntimeError, match="safely castable from Long dtype, but got result "
                                           "with dtype Bool"):
        torch.linalg.matrix_rank(torch.eye(3, device=TPU),
                                 out=torch.empty(0, dtype=torch.bool, device=TPU))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("norm", [6.0, 9.0, 1e6])
def test_matrix_exp_of_a_large_norm_is_as_accurate_as_cpus(dtype, norm):
    # jax's expm scales a matrix past its Pade bound to within twice it (a float32 norm of 6
    # came out ~100x further from exact than CPU's), and gives NaN past 16 squarings
    g = torch.Generator().manual_seed(0)
    m = torch.randn(3, 5, 5, dtype=torch.float64, generator=g)
    x = m - m.mT if norm > 10 else m.abs() / 5  # a rotation's generator: exp stays finite
    x = x / x.abs().sum(-2).amax(-1)[..., None, None] * norm
    exact = torch.linalg.matrix_exp(x)
    cpu = torch.linalg.matrix_exp(x.to(dtype)).double()
    tpu = torch.linalg.matrix_exp(x.to(dtype).to("tpu")).cpu().double()
    assert tpu.isfinite().all()
    # float64's exact is CPU's own; squarings amplify rounding by up to the norm
    ulp = torch.finfo(dtype).eps * norm * exact.abs().max()
    assert (tpu - exact).abs().max() <= 10 * (cpu - exact).abs().max() + 8 * ulp


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
def test_compute_linear_combination_adds_into_its_out_as_cpu(dtype):
    g = torch.Generator().manual_seed(0)
    x = torch.rand(3, 4, 4, dtype=dtype, generator=g)
    coefficients = torch.rand(5, 3, generator=g)
    expected = torch._compute_linear_combination(x, coefficients)
    got = torch._compute_linear_combination(x.to("tpu"), coefficients.to("tpu"))
    torch.testing.assert_close(got.cpu(), expected)
    out = torch.ones(5, 4, 4, dtype=dtype, device="tpu")
    torch._compute_linear_combination(x.to("tpu"), coefficients.to("tpu"), out=out)
    torch.testing.assert_close(out.cpu(), expected + 1)
    raises_as_cpu(lambda d: torch._compute_linear_combination(
        torch.rand([], dtype=dtype, device=d), torch.rand(2, 2, device=d)))


@pytest.mark.parametrize("uplo", ["u", "l"])
def test_eigh_takes_a_lower_case_uplo_as_cpu(uplo):
    A = torch.randn(2, 3, 3, generator=torch.Generator().manual_seed(0))  # not symmetric
    w, v = torch.linalg.eigh(A.to("tpu"), UPLO=uplo)
    expected_w, expected_v = torch.linalg.eigh(A, UPLO=uplo)
    torch.testing.assert_close(w.cpu(), expected_w)
    torch.testing.assert_close(v.cpu().abs(), expected_v.abs())
    torch.testing.assert_close(torch.linalg.eigvalsh(A.to("tpu"), uplo).cpu(), expected_w)


_NAN = torch.full((3, 3), float("nan"))
_BATCH_NAN = torch.stack([torch.eye(3), _NAN])


@pytest.mark.parametrize("mode", ["strict", "fused"])
@pytest.mark.parametrize("bad", [
    lambda d: torch.linalg.svd(_NAN.to(d))[1],
    lambda d: torch.linalg.svdvals(_BATCH_NAN.to(d)),
    lambda d: torch.linalg.matrix_norm(_BATCH_NAN.to(d), 2),
    lambda d: torch.linalg.pinv(_BATCH_NAN.to(d)),
    lambda d: torch.linalg.eig(torch.tensor([[1.0, float("inf")], [0.0, 1.0]], device=d))[0],
], ids=["svd", "svdvals_batch", "norm2", "pinv", "eig_inf"])
def test_factorisations_refuse_non_finite_matrices_as_lapack(bad, mode):
    # XLA's svd and eig return NaN factors; CPU's LAPACK refuses the matrix (fused eager at
    # the sync point that reads the result)
    import torchtpu

    with torchtpu.set_eager_mode(mode):
        raises_as_cpu(lambda d: bad(d).cpu())


def _m(dtype, *shape):
    """A 3 x 3 identity, or ones of ``shape``."""
    if shape:
        return lambda d: torch.ones(shape, dtype=dtype, device=d)
    return lambda d: torch.eye(3, dtype=dtype, device=d)


_F64, _C128 = torch.float64, torch.complex128


@pytest.mark.parametrize("bad", [
    # the meta kernels' wording and dtype names (torch.int32), not CPU's (Int)
    *(lambda d, f=f: f(_m(_F64, 3)(d)) for f in (
        torch.linalg.det, torch.linalg.inv_ex, torch.linalg.eigh, torch.linalg.matrix_exp,
        torch.linalg.cholesky, torch.linalg.slogdet)),
    lambda d: torch.linalg.inv(_m(torch.int32)(d)),
    lambda d: torch.linalg.inv_ex(_m(torch.int64)(d)),
    lambda d: torch.linalg.slogdet(_m(torch.float16)(d)),
    lambda d: torch.linalg.vector_norm(_m(_F64)(d), dtype=torch.float32),
    lambda d: torch.linalg.vector_norm(torch.ones(2, 0, dtype=_C128, device=d), ord=-1, dim=1),
    lambda d: torch.geqrf(_m(_F64, 3)(d)),
    *(lambda d, x=x: torch.linalg.eigvals(x(d)) for x in (_m(torch.int32), _m(torch.float16))),
    lambda d: torch.linalg.svdvals(_m(_C128)(d), driver="gesvd"),
    lambda d: torch.linalg.lstsq(_m(torch.int32)(d), _m(torch.int32)(d)),
    lambda d: torch.linalg.lstsq(_m(torch.float16)(d), _m(torch.float16)(d), rcond=0.1),
    # LAPACK kernels not built for these dtypes
    *(lambda d, f=f, dt=dt: f(_m(dt)(d)) for f, dts in (
        (torch.linalg.det, (torch.float16, torch.bfloat16)),
        (torch.linalg.cholesky, (torch.float16,)),
        (lambda a: torch.linalg.solve(a, a), (torch.bfloat16,)),
        (torch.linalg.eigvalsh, (torch.int32, torch.bool, torch.float16)),
        (torch.linalg.eig, (torch.int64, torch.bool, torch.bfloat16)),
        (lambda a: torch.linalg.solve_triangular(a, a, upper=True),
         (torch.int32, torch.float16)),
        (lambda a: torch.linalg.householder_product(a, a[0]), (torch.int32, torch.bfloat16)),
    ) for dt in dts),
])
def test_linalg_refuses_as_cpu(bad):
    raises_as_cpu(bad, Exception)


@pytest.mark.parametrize("p", [-1, math.inf])
def test_vector_norm_of_an_empty_tensor_over_a_negative_nonempty_dim(p):
    # the dimension reduced has 3 elements, though the tensor has none
    x = torch.zeros(0, 2, 3, dtype=torch.float64)
    for dim in (-1, (-2, -1)):
        torch.testing.assert_close(
            torch.linalg.vector_norm(x.to("tpu"), ord=p, dim=dim).cpu(),
            torch.linalg.vector_norm(x, ord=p, dim=dim))
    raises_as_cpu(lambda d: torch.linalg.vector_norm(x.to(d), ord=p, dim=-3))


def test_slogdet_sign_of_a_nan_pivot_is_cpus():
    a = torch.eye(3, dtype=torch.float64).index_put_((torch.tensor(0), torch.tensor(0)),
                                                      torch.tensor(math.nan, dtype=torch.float64))
    swapped = torch.eye(3, dtype=torch.float64)[[1, 0, 2]]
    for x in (a, a.T.contiguous() * -2, torch.stack([a, swapped]), swapped.to(torch.complex128)):
        torch.testing.assert_close([t.cpu() for t in torch.linalg.slogdet(x.to("tpu"))],
                                   list(torch.linalg.slogdet(x)), equal_nan=True)


@pytest.mark.parametrize("bad", [
    lambda d: torch.linalg.eigvals(torch.ones(3, device=d)),
    lambda d: torch.linalg.eigvals(torch.ones(2, 3, device=d)),
    lambda d: torch.linalg.eigvals(torch.eye(3, dtype=torch.int32, device=d)),
    # a gradient may be asked for: eig's refusal of a non-finite matrix
    lambda d: torch.linalg.eigvals(torch.tensor([[1.0, math.inf], [0.0, 1.0]], device=d,
                                                requires_grad=True)),
], ids=["1d", "not_square", "int", "inf_requiring_grad"])
def test_eigvals_refuses_as_cpu(bad):
    raises_as_cpu(bad)


def test_eigvals_without_a_gradient_skips_eigs_checks_and_vectors():
    # CPU's eigvals of a tensor that needs no gradient never runs linalg_eig (nor its
    # refusal of infs and NaNs); PyTorch sent every subclass through it
    a = torch.tensor([[0.0, -1.0], [1.0, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(torch.linalg.eigvals(a.to("tpu")).cpu(), torch.linalg.eigvals(a))
    torch.linalg.eigvals(torch.tensor([[1.0, math.inf], [0.0, 1.0]], device="tpu")).cpu()
    x = torch.randn(4, 4, generator=torch.Generator().manual_seed(0), requires_grad=True)
    xt = x.detach().to("tpu").requires_grad_()
    torch.linalg.eigvals(x).real.sum().backward()
    torch.linalg.eigvals(xt).real.sum().backward()
    torch.testing.assert_close(xt.grad.cpu(), x.grad, rtol=1e-4, atol=1e-5)
