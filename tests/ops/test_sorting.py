"""Sorting with ties: tpu keeps equal values in index order (CPU's stable sort's order)."""

from __future__ import annotations

import pytest
import torch
from conftest import TPU, assert_same, raises_as_cpu, run_both

pytestmark = pytest.mark.usefixtures("eager_mode")

TIED = torch.tensor([[0.5, 0.2, 0.5, 0.5, 0.2, 0.5, 0.9, 0.5]])


@pytest.mark.parametrize("descending", [False, True])
def test_sort_keeps_ties_in_index_order(descending):
    expected = torch.sort(TIED, descending=descending, stable=True)
    for stable in (False, True):
        assert_same(torch.sort(TIED.to(TPU), descending=descending, stable=stable), expected)


@pytest.mark.parametrize("largest", [False, True])
@pytest.mark.parametrize("k", [1, 3, 6])
def test_topk_takes_the_first_of_equal_values(k, largest):
    # CPU's topk selects among ties in its own order (four equal scores: indices 2 and 3)
    values, indices = torch.topk(TIED.to(TPU), k, largest=largest)
    order = torch.sort(TIED, descending=largest, stable=True)
    assert_same((values, indices), (order.values[:, :k], order.indices[:, :k]))


def _same_with_nans(actual, expected):
    for a, e in zip(actual, expected, strict=True):
        a = a.cpu()
        assert torch.equal(a.isnan(), e.isnan()) and torch.equal(a.nan_to_num(), e.nan_to_num())


@pytest.mark.parametrize("n", [6, 40, 300])
def test_unique_over_a_dim_keeps_each_nan_slice_where_cpus_sort_puts_it(n):
    # CPU std::sorts the slices by a `<` that NaN escapes, then merges equal neighbours: a
    # slice with a NaN is its own, and where it lands is libstdc++'s introsort's doing
    g = torch.Generator().manual_seed(n)
    x = torch.randint(0, 4, (n, 2), generator=g).float()
    x[torch.rand(n, 2, generator=g) < 0.2] = float("nan")
    if n == 6:
        x = torch.tensor([float("nan"), 0, 0, float("nan"), float("nan"), 1])[:, None]
    for t, dim in ((x, 0), (x.T, 1)):
        _same_with_nans(torch.unique(t.to(TPU), dim=dim, return_inverse=True,
                                     return_counts=True),
                        torch.unique(t, dim=dim, return_inverse=True, return_counts=True))


@pytest.mark.parametrize("fn", [torch.unique, torch.unique_consecutive])
@pytest.mark.parametrize("shape,dim", [((0, 3), 0), ((3, 0), 1), ((2, 0, 3), 1)])
def test_unique_over_an_empty_dim_gives_empty_results(fn, shape, dim):
    run_both(lambda x: fn(x, dim=dim, return_inverse=True, return_counts=True),
             torch.zeros(shape))


@pytest.mark.parametrize("fn", [torch.unique, torch.unique_consecutive])
@pytest.mark.parametrize("shape,dim,exc", [
    ((0, 3), 1, RuntimeError), ((3, 0), 0, RuntimeError), ((2, 0, 3), 2, RuntimeError),
    ((0, 0), 1, RuntimeError), ((3, 4), 2, IndexError), ((3, 4), -3, IndexError),
    ((), 0, IndexError), ((), -1, IndexError), ((), 1, IndexError)])
def test_unique_over_a_dim_makes_cpus_checks(fn, shape, dim, exc):
    # CPU's _unique_dim_cpu_template: size(dim) (which takes no dim of a 0-d tensor), then
    # the empty dimensions (only the selected one may be empty)
    raises_as_cpu(lambda device: fn(torch.zeros(shape, device=device), dim=dim,
                                    return_inverse=True, return_counts=True), exc)
