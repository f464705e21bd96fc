"""Convolutions at their edges, compared with CPU (the OpInfo sweep covers the common cases)."""

from __future__ import annotations

import pytest
import torch
from conftest import TPU, assert_same

_aten = torch.ops.aten


@pytest.mark.parametrize("batch", [2, 0])
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_zero_input_channels_give_zero_output_channels(nd, batch):
    # CPU's empty-input path: no input channels leave none in the output, whatever the
    # weight's count; the gradients are zeros of their inputs' shapes
    x = torch.randn((batch, 0) + (7,) * nd, requires_grad=True)
    w = torch.randn((12, 0) + (3,) * nd, requires_grad=True)
    b = torch.randn(12, requires_grad=True)
    args = ((1,) * nd, (0,) * nd, (1,) * nd, False, (0,) * nd, 1)
    xt, wt, bt = (t.detach().to(TPU).requires_grad_() for t in (x, w, b))
    expected, actual = _aten.convolution(x, w, b, *args), _aten.convolution(xt, wt, bt, *args)
    assert_same(actual, expected)
    expected.sum().backward()
    actual.sum().backward()
    assert_same((xt.grad, wt.grad, bt.grad), (x.grad, w.grad, b.grad))


def test_conv_module_with_no_input_channels():
    m = torch.nn.Conv2d(0, 33, 3, stride=2)
    x = torch.randn(2, 0, 50, 100)
    assert_same(m.to(TPU)(x.to(TPU)), m.cpu()(x))
