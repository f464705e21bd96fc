"""Reductions as CPU computes and refuses them, where PyTorch's own reduction tests found us
apart."""

from __future__ import annotations

import warnings

import pytest
import torch
from conftest import assert_same, raises_as_cpu


@pytest.mark.parametrize("op", [torch.all, torch.any])
@pytest.mark.parametrize("keepdim", [False, True])
def test_all_and_any_over_no_dims_reduce_nothing(op, keepdim):
    x = torch.tensor([[1, 0], [2, 3]], dtype=torch.uint8)
    assert_same(op(x.to("tpu"), dim=[], keepdim=keepdim), op(x, dim=[], keepdim=keepdim))
    assert_same(op(x.float().to("tpu"), dim=[]), op(x.float(), dim=[]))


@pytest.mark.parametrize("bad", [
    lambda d: torch.sum(torch.ones(3, 3, 3, device=d), (0, 0)),
    lambda d: torch.std(torch.ones(3, 3, 3, device=d), (2, -1)),
    lambda d: torch.flip(torch.ones(3, 3, device=d), (1, -1)),
    lambda d: torch.argmax(torch.zeros([1] * 65, device=d), 0),
    lambda d: torch.min(torch.zeros([1] * 65, device=d), 0),
    lambda d: torch.histc(torch.ones(3, device=d), bins=4, min=0, max=float("inf")),
    lambda d: torch.histc(torch.ones(3, device=d), bins=4, min=float("nan"), max=3),
    lambda d: torch.histc(torch.ones(3, device=d), bins=4, min=2, max=1),
    lambda d: torch.histc(torch.ones(3, device=d), bins=0, min=float("inf"), max=1),
    lambda d: torch.histc(torch.ones(3, device=d), bins=-1),
])
def test_bad_reductions_are_refused_as_cpu(bad, eager_mode):
    raises_as_cpu(bad)


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, torch.uint8])
def test_logcumsumexp_of_integers_is_refused_as_cpu(dtype):
    raises_as_cpu(lambda d: torch.logcumsumexp(torch.ones(3, dtype=dtype, device=d), 0),
                  NotImplementedError, tpu_kernels=True)


@pytest.mark.parametrize("data", [[1.0, 2.0, float("inf")], [float("inf")], [-float("inf")],
                                  [float("nan")]])
def test_histc_over_data_that_is_not_finite_is_refused(data):
    raises_as_cpu(lambda d: torch.histc(torch.tensor(data, device=d)))
    x = torch.tensor([1.0, 2.0, float("nan"), float("inf")])
    assert_same(torch.histc(x.to("tpu"), bins=4, min=0, max=3), torch.histc(x, 4, 0, 3))


@pytest.mark.parametrize("op", [
    lambda d: torch.searchsorted(_strided(d, [[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]]),
                                 _strided(d, [[2.0, 3.0], [5.0, 0.0], [1.0, 7.0]])),
    lambda d: torch.bucketize(_strided(d, [[2.0, 3.0], [5.0, 0.0], [1.0, 7.0]]),
                              torch.arange(8.0, device=d)[::2]),
])
def test_searchsorted_warns_of_a_non_contiguous_argument_as_cpu(op):
    def caught(device):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            torch.set_warn_always(True)
            try:
                result = op(device)
            finally:
                torch.set_warn_always(False)
        # (CPU's add where in C++ they were raised)
        return result, sorted(str(x.message).split(" (Triggered internally")[0] for x in w
                              if "non-contiguous" in str(x.message))

    (expected, on_cpu), (actual, on_tpu) = caught("cpu"), caught("tpu")
    assert on_tpu == on_cpu and len(on_cpu) == 2
    assert_same(actual, expected)


_ROWS = [[1, 2, 3], [4, 5, 6]]


@pytest.mark.parametrize("bad", [
    lambda d: torch.searchsorted(torch.tensor(_ROWS, device=d), 2),
    lambda d: torch.searchsorted(torch.tensor(_ROWS, device=d), torch.tensor(2, device=d)),
    lambda d: torch.bucketize(torch.tensor([2], device=d), torch.tensor(_ROWS, device=d)),
    lambda d: torch.searchsorted(torch.arange(4, device=d), torch.arange(4, device=d),
                                 side="bad"),
    lambda d: torch.searchsorted(torch.arange(4, device=d), 2, sorter=torch.arange(3, device=d)),
    lambda d: torch.searchsorted(torch.arange(3, device=d), 2,
                                 sorter=torch.arange(3.0, device=d)),
    lambda d: torch.searchsorted(torch.arange(3, device=d), 2,
                                 sorter=torch.tensor([0, 1, 3], device=d)),
    lambda d: torch.searchsorted(torch.arange(3, device=d), 2,
                                 sorter=torch.tensor([-1, 1, 2], device=d)),
])
def test_bad_searchsorted_is_refused_as_cpu(bad):
    raises_as_cpu(bad)


def _strided(device, rows):
    return torch.tensor(rows, device=device).t()  # a transpose: not contiguous


@pytest.mark.parametrize("op", [torch.sum, torch.mean])
def test_complex_sums_of_many_elements_keep_float_accuracy(op):
    # XLA:CPU summed a 4-d complex64 array of 2^18 equal values 0.15% off (its real parts
    # alone were exact), as test_conv2d_discontiguous_weight's check of a conv's sum found
    x = torch.full((64, 32, 16, 8), 15.96875, dtype=torch.complex64)
    assert_same(op(x.to("tpu")), op(x), rtol=1e-6, atol=0)
    assert_same(op(x.to("tpu"), (1, 3)), op(x, (1, 3)), rtol=1e-6, atol=0)


@pytest.mark.parametrize("special", [float("nan"), float("inf"), -float("inf")])
def test_complex_mean_of_a_non_finite_real_part_is_nan_in_both_parts_as_cpu(special):
    # CPU divides the complex sum by a complex count: inf+2.5j / (5+0j) is inf+nanj
    x = torch.tensor([1 + 1j, 2 - 1j, special, -3 + 2j, 0.5 + 0.5j], dtype=torch.complex64)
    assert_same(x.to("tpu").mean(), x.mean(), rtol=0, atol=0)
    assert_same(x.view(1, 5).to("tpu").mean(1, keepdim=True), x.view(1, 5).mean(1, keepdim=True),
                rtol=0, atol=0)


@pytest.mark.parametrize("op", [torch.var_mean, torch.std_mean])
@pytest.mark.parametrize("dim", [None, 0, 1, 2, (0, 2)])
def test_var_mean_of_infinities_gives_cpus_welford_mean(op, dim):
    # CPU's Welford pass: an infinity before the last value in the reduced order makes the
    # mean NaN (inf - inf at the next step); one only at the end leaves it inf.
    x = torch.ones(4, 5, 3)
    inf = float("inf")
    x[0, 4, 1], x[3, 2, 2], x[2, 4, 2], x[3, 4, 0] = inf, inf, -1e38, -inf
    expected = op(x) if dim is None else op(x, dim)
    actual = op(x.to("tpu")) if dim is None else op(x.to("tpu"), dim)
    assert_same(actual, expected)


def test_var_mean_beside_an_empty_kept_dimension():
    # The Welford check's reshape inferred the reduced length (-1) beside a kept 0: integer
    # modulo by zero (group_norm of an empty batch reaches it through its decomposition).
    x = torch.randn(0, 3, 2)
    assert_same(torch.var_mean(x.to("tpu"), [2], correction=0),
                torch.var_mean(x, [2], correction=0))
    assert_same(torch.std_mean(x.to("tpu"), [1, 2]), torch.std_mean(x, [1, 2]))


@pytest.mark.parametrize("bad", [
    lambda d: torch.amin(torch.empty(0, device=d), -1),
    lambda d: torch.amax(torch.empty(2, 0, device=d), (0, -1)),
    lambda d: torch.linalg.matrix_norm(torch.empty(0, 0, device=d), -2),
    lambda d: torch.max(torch.empty(2, 0, device=d), -1),
])
def test_an_empty_reduced_dim_is_named_as_cpu_names_it(bad, eager_mode):
    # amax/amin name the dim as given, max.dim and the arg reductions as wrapped
    raises_as_cpu(bad, IndexError)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.float32,
                                   torch.bool, torch.complex64])
def test_median_of_nothing_is_nan_as_cpu_converts_it(dtype):
    # NaN as x86 converts it into an integer: int32's and int64's minimum, uint8's 0; True and
    # NaN + 0i for the dtypes whose median kernel CPU lacks (its empty answer comes first)
    empty = torch.ones(0, dtype=dtype)
    for median in (torch.median, torch.nanmedian):
        assert_same(median(empty.to("tpu")), median(empty))


@pytest.mark.parametrize("op", [lambda x: x.sum(dtype=torch.int64),
                                lambda x: x.prod(dtype=torch.int32),
                                lambda x: x.cumsum(0, dtype=torch.int64)],
                         ids=["sum", "prod", "cumsum"])
def test_a_reductions_integer_dtype_converts_floats_as_cpu(op):
    # NaN and a float past the range convert as x86 converts them (XLA's convert saturates)
    x = torch.tensor([float("nan"), 3e30, -2.5, 2.7])
    assert_same(op(x.to("tpu")), op(x))
