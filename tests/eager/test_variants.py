"""In-place, method and out= forms of an op give what its function form gives, as on CPU."""

from __future__ import annotations

import torch
from conftest import TPU, assert_same


def test_an_inplace_op_whose_function_takes_its_arguments_in_another_order():
    # polygamma_(self, n) is polygamma(n, self).
    def run(device):
        x, y = torch.arange(1.0, 5.0, device=device), torch.arange(1.0, 5.0, device=device)
        return x.polygamma_(1), x, y.polygamma_(n=2)

    assert_same(run(TPU), run("cpu"))
