"""Complex values as CPU's kernels give them: C99's edge cases (an infinite part beside a NaN,
the sign of a zero on a branch cut) and the complex kernels of binary ops."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import raises_as_cpu

inf, nan = math.inf, math.nan


def _same_with_zero_signs(actual: torch.Tensor, expected: torch.Tensor) -> None:
    # part by part: a complex number with a NaN part counts as NaN in assert_close
    if actual.is_complex():
        actual, expected = torch.view_as_real(actual), torch.view_as_real(expected)
    torch.testing.assert_close(actual, expected, rtol=1e-6, atol=0, equal_nan=True)
    zeros = expected == 0
    assert torch.equal(torch.signbit(actual[zeros]), torch.signbit(expected[zeros])), (
        actual, expected)


@pytest.mark.parametrize("fn, values", [
    (torch.asinh, [(-0.0, 2.0), (-0.0, -2.0), (0.0, 2.0), (-0.0, 0.5), (-1e-30, 2.0), (nan, -0.0),
                   (nan, 1e30)]),
    (torch.atanh, [(-0.0, 0.5), (-0.0, -0.0), (-0.0, 2.0), (0.3, -0.2), (inf, -0.0), (0.0, nan),
                   (-inf, nan), (2.5, nan), (nan, 0.0), (nan, nan)]),
    (torch.sqrt, [(-0.5, -0.0), (-0.5, 0.0), (-0.0, -0.0), (-2.0, -0.0), (4.0, -1.0),
                  (inf, nan), (-inf, nan), (nan, inf), (nan, -inf)]),
    (torch.asin, [(2.5, -0.0), (-1.0, -0.0), (-0.0, -0.0), (0.0, nan), (1e30, nan)]),
    (torch.acos, [(2.5, -0.0), (2.5, 0.0), (1.0, -0.0), (0.0, nan), (-1e30, nan)]),
    (torch.acosh, [(0.0, -0.0), (-1.0, -0.0), (-inf, -0.0), (0.0, nan), (1e30, nan)]),
    (torch.atan, [(-0.0, 1e30), (-0.0, inf), (1.0, 0.0), (0.0, nan), (nan, 0.0), (nan, -inf),
                  (nan, 2.5)]),
    (torch.abs, [(inf, nan), (nan, -inf), (-inf, 1.0), (3.0, 4.0)]),
    (torch.log, [(inf, nan), (nan, inf), (-inf, nan), (-1.0, -0.0), (0.5, 2.0)]),
    (torch.log2, [(nan, -inf), (2.0, 0.0)]),
    (torch.log10, [(inf, nan), (10.0, 1.0)]),
    (torch.sin, [(-0.0, 1.0), (inf, 0.0), (inf, inf), (nan, -inf), (-0.0, nan), (0.5, 2.0)]),
    (torch.cos, [(0.0, 2.5), (inf, -0.0), (-inf, inf), (nan, 0.0), (-0.0, nan), (0.5, 2.0)]),
    (torch.sinh, [(0.0, 2.5), (-0.0, inf), (inf, -0.0), (-inf, nan), (1.0, -0.0), (0.5, 2.0)]),
    (torch.cosh, [(0.0, -1.0), (-0.0, inf), (-inf, 0.0), (inf, nan), (nan, -0.0), (0.5, 2.0)]),
    (torch.tan, [(-0.0, 1.0), (inf, -0.0), (-inf, -inf), (nan, 0.0), (0.5, 2.0)]),
    (torch.tanh, [(0.0, inf), (-0.0, nan), (1.0, -0.0), (inf, -inf), (nan, -0.0), (0.5, 2.0)]),
    (torch.reciprocal, [(-0.0, 0.0), (inf, inf), (nan, -inf), (0.0, -1.0), (0.5, 2.0)]),
    (torch.rsqrt, [(0.0, inf), (-inf, 1.0), (-1.0, -0.0), (0.5, 2.0)]),
    (torch.sigmoid, [(inf, inf), (-inf, 1.0), (-1e30, 2.5), (0.5, 2.0)]),
    (torch.expm1, [(inf, 0.0), (1.0, -0.0), (nan, 0.0), (-inf, -0.0), (0.5, 2.0)]),
    (torch.exp2, [(inf, 0.0), (inf, -0.0), (inf, 1e-3), (-inf, inf), (0.5, 2.0), (3.0, -1.0)]),
    (torch.exp, [(inf, inf), (inf, nan), (-inf, inf), (-inf, -inf), (-inf, nan), (inf, -0.0),
                 (1.0, -0.0), (nan, -0.0), (nan, inf), (0.5, 2.0)]),
], ids=lambda v: getattr(v, "__name__", ""))
def test_edges_of_complex_functions_are_cpus(fn, values):
    z = torch.tensor([complex(re, im) for re, im in values], dtype=torch.complex64)
    _same_with_zero_signs(fn(z.to("tpu")).cpu(), fn(z))


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_logaddexp_keeps_the_imaginary_parts(dtype):
    # the larger real part is factored out: log(e^a + e^b) of the complex numbers themselves
    a = torch.tensor([1 + 2j, -1 - 3j, 0.5 + 0.1j, complex(inf, 1), complex(-inf, 2),
                      complex(nan, 0), complex(1, nan), 100 + 1j], dtype=dtype)
    b = torch.tensor([2 - 1j, 3 + 4j, 0.5 - 0.1j, complex(1, 1), complex(-inf, 1), 1 + 1j, 0j,
                      -100 + 2j], dtype=dtype)
    torch.testing.assert_close(torch.logaddexp(a.to("tpu"), b.to("tpu")).cpu(),
                               torch.logaddexp(a, b), equal_nan=True, atol=1e-6, rtol=1e-6)


def test_complex_logcumsumexp_on_a_long_row_is_cpus():
    # summed in CPU's order: a tree of logaddexps lands some imaginary parts 2*pi apart
    x = torch.randn(3, 1000, generator=torch.Generator().manual_seed(0),
                    dtype=torch.complex64) * 3
    for t, dim in ((x, 1), (x.T, 0)):
        torch.testing.assert_close(torch.logcumsumexp(t.to("tpu"), dim).cpu(),
                                   torch.logcumsumexp(t, dim), atol=2e-5, rtol=1e-5)


def test_complex_of_parts_that_do_not_broadcast_is_refused_as_cpu():
    raises_as_cpu(lambda d: torch.complex(torch.ones(2, device=d), torch.ones(3, device=d)))


@pytest.mark.parametrize("shapes", [((2,), (3,)), ((1, 3, 2), (3,)), ((3, 1, 2), (2, 1, 2))])
def test_polar_of_parts_that_do_not_broadcast_is_refused_as_cpu(shapes):
    a, b = shapes
    raises_as_cpu(lambda d: torch.polar(torch.ones(a, device=d), torch.ones(b, device=d)))
    raises_as_cpu(lambda d: torch.polar(torch.ones(a, device=d), torch.ones(b, device=d),
                                        out=torch.empty(a, dtype=torch.complex64, device=d)))


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_small_integer_powers_are_products_as_on_cpu(dtype):
    # XLA's complex pow goes through exp and log: (501j) ** 2 had an imaginary part
    z = torch.tensor([501j, -10000j, 1 + 2j, -3 - 0.5j, 1e3 + 1e-3j], dtype=dtype)
    for exponent in (2, 3, -2, -1, 0.5):
        torch.testing.assert_close(torch.pow(z.to("tpu"), exponent).cpu(), torch.pow(z, exponent),
                                   rtol=1e-6, atol=0)
    _same_with_zero_signs(torch.square(z.to("tpu")).cpu(), torch.square(z))


def test_refs_real_and_imag_are_real_views_of_the_base():
    z = torch.tensor([[1 + 2j, 3 - 4j], [5 + 6j, -7j]]).T
    t = z.to("tpu")
    for fn in (torch._refs.real, torch._refs.imag):
        expected, actual = fn(z), fn(t)
        assert (actual.dtype, actual.stride(), actual.storage_offset()) == (
            expected.dtype, expected.stride(), expected.storage_offset())
        torch.testing.assert_close(actual.cpu(), expected)
    torch._refs.imag(t).mul_(10)
    torch._refs.imag(z).mul_(10)
    torch.testing.assert_close(t.cpu(), z)


@pytest.mark.parametrize("op", [lambda z: torch.pow(0, z),
                                lambda z: torch.pow(torch.zeros_like(z), z),
                                lambda z: torch.pow(torch.zeros_like(z), 1 + 1j)],
                         ids=["number_base", "tensor_base", "number_exponent"])
def test_a_complex_zero_to_a_power_is_cpus(op):
    # CPU's cpow(0, y) is cexp(y * clog(0)): 0 for a positive real part, inf + NaN i for a
    # negative one, NaN for 0 ** 0 or an imaginary exponent (XLA's pow: NaN, and 1 for 0 ** 0)
    z = torch.tensor([1 + 1j, 0.5, 0, -1, -1 + 2j, 1e-3j], dtype=torch.complex64)
    expected, actual = op(z), op(z.to("tpu")).cpu()
    torch.testing.assert_close(torch.view_as_real(actual), torch.view_as_real(expected),
                               equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_pow_at_infinity_and_nan_is_cpus(dtype):
    # CPU's cpow multiplies y * clog(x) as C does (Annex G): (inf * 1j) ** (1 + 1j) and
    # (inf + NaN i) ** 2 are inf + NaN i, NaN ** 0 is NaN (XLA's pow: NaN + NaN i, inf + 0i, 1)
    inf, nan = float("inf"), float("nan")
    bases = [complex(inf, 0), complex(-inf, 2), complex(0, inf), complex(inf, inf),
             complex(1, -inf), complex(inf, nan), complex(nan, inf), complex(nan, 0), 2 + 3j]
    exponents = [2, 0.5, 1 + 1j, -1, 0, -2 + 1j, 1j, complex(inf, 0), complex(nan, 0)]
    x = torch.tensor([b for b in bases for _ in exponents], dtype=dtype)
    y = torch.tensor(exponents * len(bases), dtype=dtype)
    for op in (lambda x, y: x ** y, lambda x, y: x ** y[3], lambda x, y: x ** 0.5):
        expected, actual = op(x, y), op(x.to("tpu"), y.to("tpu")).cpu()
        torch.testing.assert_close(torch.view_as_real(actual), torch.view_as_real(expected),
                                   equal_nan=True)
