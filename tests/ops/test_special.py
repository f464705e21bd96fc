"""Special functions where the OpInfo sweep's float32 samples say little: float64 accuracy,
and the edges of their domains (PyTorch's reference inputs)."""

from __future__ import annotations

import pytest
import torch
from conftest import raises_as_cpu


def test_trigamma_in_float64_is_float64s():
    # CPU has a double kernel: the float32 one gave relative errors of ~1e-7 (every float64
    # gradient through digamma: Gamma's entropy, StudentT's).
    x = torch.tensor([3.5, -2.5, 0.3, 100.0, 1e-3], dtype=torch.float64)
    torch.testing.assert_close(torch.polygamma(1, x.to("tpu")).cpu(), torch.polygamma(1, x),
                               rtol=1e-13, atol=0)


def test_incomplete_gamma_of_a_large_shape_in_float32():
    # jax's float32 series lost digits as the shape grew (Chi2(5000).cdf(5000): 4e-4 off).
    for shape in (1e2, 1e3, 1e4, 1e5):
        a = torch.full((50,), shape)
        x = shape + torch.linspace(-3, 3, 50) * shape ** 0.5
        for fn in (torch.special.gammainc, torch.special.gammaincc):
            torch.testing.assert_close(fn(a.to("tpu"), x.to("tpu")).cpu(), fn(a, x),
                                       rtol=0, atol=1e-5)


def test_erfinv_near_one_is_cpus():
    # CPU's float results are correctly rounded; jax's float32 series drifted 5e-6 as |x| -> 1.
    x = torch.cat([torch.linspace(-1, -0.999, 2001), torch.linspace(0.999, 1, 2001)])
    torch.testing.assert_close(torch.erfinv(x.to("tpu")).cpu(), torch.erfinv(x))


def test_lgamma_is_cpus_to_an_ulp():
    # XLA's float32 lgamma was 28 ulps off on [3, 10] and 4e-6 off below 0, where CPU's is
    # correctly rounded; mvlgamma sums five such terms (these two samples cancel to ~0.4).
    x = torch.cat([torch.linspace(3, 10, 5001), torch.linspace(-9.99, -0.01, 5001)])
    torch.testing.assert_close(torch.lgamma(x.to("tpu")).cpu(), torch.lgamma(x),
                               rtol=2.5e-7, atol=1e-7)
    x = torch.tensor([-2.8915295600891113, -2.9016060829162598])
    torch.testing.assert_close(torch.mvlgamma(x.to("tpu"), p=5).cpu(), torch.mvlgamma(x, p=5))


@pytest.mark.parametrize("dtype, start", [(torch.float32, 9.0), (torch.float64, 26.0)])
def test_erfcx_where_erfc_underflows(dtype, start):
    # exp(x^2) erfc(x) gave 0 between erfc's underflow and exp's overflow (jax's switch to
    # the asymptotic series came too late); CPU gives about 1 / (x sqrt(pi)).
    x = torch.linspace(start, start + 1, 1001, dtype=dtype)
    torch.testing.assert_close(torch.special.erfcx(x.to("tpu")).cpu(), torch.special.erfcx(x))


def test_log_ndtr_far_below_zero_is_cpus():
    # CPU squares x / sqrt 2 (finite to |x| = 2.6e19 in float32); jax squared x: -inf past
    # 1.8e19.
    x = -torch.logspace(0, 19.4, 2001)
    torch.testing.assert_close(torch.special.log_ndtr(x.to("tpu")).cpu(),
                               torch.special.log_ndtr(x))


_INF, _NAN = float("inf"), float("nan")


@pytest.mark.parametrize("fn, args", [
    # Cephes' order: a pole at non-positive integer q before the NaN checks.
    (torch.special.zeta, ([1.5, _NAN, 1.0, 0.5, 2.0, 2.5, 3.0, 2.0],
                          [-1.0, -_INF, -1.0, 2.0, -1.5, -1.5, _NAN, 0.0])),
    # CPU's algorithm in float64: float32's terms below 1 overflowed and cancelled, jax's series
    # was NaN for a large s, and CPU's tail overflows to NaN where jax's is 0.
    (torch.special.zeta, ([501.0, 501.0, 1e5, 4988429.0, 1e20, 1e20, 1e20, 1e20, 3.0],
                          [-1001.2, -13437.7, 1.0, 501.0, -1001.2, 4988429.0, 1.8, 0.5, _INF])),
    (torch.special.spherical_bessel_j0, ([_INF, -_INF, 0.1, 3.0],)),
    # A degree past int64 is negative, as x86 converts it: 0, not NaN (nor a loop to 2**63).
    (torch.special.chebyshev_polynomial_t, ([2.0, -3.0, 0.3], [1e20, 1e20, 5.0])),
    (torch.special.hermite_polynomial_h, ([2.0, 0.3], [1e20, 5.0])),
], ids=["zeta", "zeta_as_cpu_computes", "spherical_bessel_j0", "chebyshev_t", "hermite_h"])
def test_domain_edges_as_cpu(fn, args):
    cpu = [torch.tensor(a) for a in args]
    torch.testing.assert_close(fn(*(a.to("tpu") for a in cpu)).cpu(), fn(*cpu), equal_nan=True)


@pytest.mark.parametrize("op", [torch.igamma, torch.igammac])
def test_incomplete_gamma_edges_as_cpu(op):
    # calc_igamma's checks: a = 0 with x > 0, x = 0, an infinite a (with finite and infinite
    # x), an infinite x, negative and NaN arguments.
    inf, nan = float("inf"), float("nan")
    a = torch.tensor([0.0, -0.0, 0.0, 0.0, 1.0, 0.0, 2.0, -1.0, inf, 3.0, inf, 0.0, nan, 2.0])
    x = torch.tensor([1e-3, 0.25, 0.0, -1.0, 0.0, inf, inf, 1.0, 1.0, 0.0, inf, nan, 1.0, 1.5])
    torch.testing.assert_close(op(a.to("tpu"), x.to("tpu")).cpu(), op(a, x), equal_nan=True)


@pytest.mark.parametrize("p", [0, -1])
def test_mvlgamma_refuses_a_dimension_below_one(p):
    # (p = 0 summed no terms: 0; a negative p failed in the reference's arange, in its words)
    raises_as_cpu(lambda d: torch.mvlgamma(torch.tensor([2.0], device=d), p))
