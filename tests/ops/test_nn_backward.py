"""Backward ATen ops called directly, on CPU and on tpu, over the arguments OpInfo samples
leave out: scale factors, align_corners, padding and interpolation modes, pooling options.

Called directly, not through autograd: an error inside a C++ backward formula would abort
the process, here it fails one test.
"""

from __future__ import annotations

import pytest
import torch
from conftest import TPU, assert_same

aten = torch.ops.aten
TOL = dict(rtol=1e-4, atol=1e-4)


def _randn(*shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def _both(op, *args, **kwargs):
    """``op`` on CPU and on tpu copies of the same arguments."""
    on_tpu = [a.to(TPU) if isinstance(a, torch.Tensor) else a for a in args]
    return op(*on_tpu, **kwargs), op(*args, **kwargs)


POOL = [
    # kernel, stride, padding, ceil_mode, count_include_pad, divisor_override
    ((3, 3), (2, 2), (1, 1), False, True, None),
    ((3, 3), (2, 2), (1, 1), True, True, None),
    ((3, 2), (2, 1), (1, 0), True, False, None),
    ((2, 2), (3, 3), (0, 0), True, False, None),
    ((3, 3), (2, 2), (1, 1), False, False, 5),
    ((2, 3), (1, 2), (1, 1), True, True, 2),
]


@pytest.mark.parametrize("cfg", POOL, ids=str)
@pytest.mark.parametrize("nd", [2, 3])
def test_avg_pool_backward(nd, cfg):
    kernel, stride, padding, ceil_mode, count_include_pad, divisor = cfg
    if nd == 3:
        kernel, stride, padding = (2,) + kernel, (1,) + stride, (1,) + padding
    forward = aten.avg_pool2d if nd == 2 else aten.avg_pool3d
    backward = aten.avg_pool2d_backward if nd == 2 else aten.avg_pool3d_backward
    x = _randn(2, 3, *([7] * nd))
    args = (kernel, stride, padding, ceil_mode, count_include_pad, divisor)
    grad = _randn(*forward(x, *args).shape, seed=1)
    actual, expected = _both(backward, grad, x, *args)
    assert_same(actual, expected, **TOL)


@pytest.mark.parametrize("shapes", [((2, 1, 3, 4), (5, 2, 4)), ((3, 4), (0, 2, 4)),
                                    ((0, 2, 4), (3, 4))], ids=str)
@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 2.0, 3.0, float("inf")])
def test_cdist_backward_broadcasts(p, shapes):
    x1, x2 = _randn(*shapes[0]), _randn(*shapes[1], seed=1)
    dist = torch.cdist(x1, x2, p)
    grad = _randn(*dist.shape, seed=2)
    actual, expected = _both(aten._cdist_backward, grad, x1, x2, p, dist)
    assert_same(actual, expected, **TOL)


@pytest.mark.parametrize("unpack_data,unpack_pivots", [(True, False), (False, True),
                                                       (False, False)])
def test_lu_unpack_leaves_out_what_is_not_asked(unpack_data, unpack_pivots):
    lu, pivots = torch.linalg.lu_factor(_randn(2, 3, 3))
    actual, expected = _both(aten.lu_unpack, lu, pivots, unpack_data, unpack_pivots)
    assert_same(actual, expected, **TOL)


@pytest.mark.parametrize("accumulate", [False, True])
def test_put(accumulate):
    x = _randn(3, 4)
    # Negative positions count from the end; accumulating, a repeated one adds twice.
    index = torch.tensor([[0, -1], [5, 11 if accumulate else 7]])
    source = _randn(2, 2, seed=1)
    actual, expected = _both(aten.put, x, index, source, accumulate)
    assert_same(actual, expected)
