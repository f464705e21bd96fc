"""Pooling at its edges, compared with CPU bit for bit (the OpInfo sweep covers the rest)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import TPU


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_adaptive_avg_pool3d_sums_and_divides_in_cpus_order(dtype):
    # CPU's 3-d kernel sums a window element by element in the input's dtype, then divides by
    # its depth, height and width in turn; tpu averaged in float32 in one division (float16
    # was off by up to 1e-3 in a third of the outputs, float32 and float64 by an ulp)
    x = torch.randn(2, 3, 9, 7, 6, generator=torch.Generator().manual_seed(0)).to(dtype)
    for size in [(4, 3, 5), (9, 2, 6)]:
        expected = F.adaptive_avg_pool3d(x, size)
        assert torch.equal(F.adaptive_avg_pool3d(x.to(TPU), size).cpu(), expected)
    assert torch.equal(F.adaptive_avg_pool3d(x[0].to(TPU), (4, 3, 5)).cpu(),
                       F.adaptive_avg_pool3d(x[0], (4, 3, 5)))
