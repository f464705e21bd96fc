"""Sorting with ties: tpu keeps equal values in index order (CPU's stable sort's order)."""

from __future__ import annotations

import pytest
import torch
from conftest import TPU, assert_same

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
