"""Fractional max pooling given the same random samples as CPU: same windows, same maxima,
same indices (the OpInfo sweep draws its own samples, so it compares distributions only)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import TPU, assert_same


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("nd,size,kernel,out", [
    (2, (9, 9), (3, 3), (2, 2)),
    (2, (9, 10), (2, 1), (5, 6)),
    (2, (7, 6), (1, 2), (7, 1)),
    (3, (5, 10, 9), (2, 1, 2), (3, 6, 4)),
    (3, (6, 6, 6), (3, 3, 3), (1, 2, 3)),
])
def test_same_samples_same_windows(dtype, nd, size, kernel, out):
    g = torch.Generator().manual_seed(sum(size) + len(kernel))
    x = torch.randn(2, 3, *size, generator=g).to(dtype)
    x[0, 0].view(-1)[::7] = float("nan")  # NaN wins a window, as on CPU
    x[1] = x[1].round()  # ties: the first largest wins
    u = torch.rand(2, 3, nd, generator=g).to(dtype)
    op = torch.ops.aten.fractional_max_pool2d if nd == 2 else torch.ops.aten.fractional_max_pool3d
    expected = op(x, kernel, out, u)
    actual = op(x.to(TPU), kernel, out, u.to(TPU))
    assert_same(actual, expected, rtol=0, atol=0)


def test_unbatched_input():
    x, u = torch.randn(3, 9, 9), torch.rand(1, 3, 2)
    f = torch.nn.functional.fractional_max_pool2d
    expected = f(x, 3, output_size=4, return_indices=True, _random_samples=u)
    actual = f(x.to(TPU), 3, output_size=4, return_indices=True, _random_samples=u.to(TPU))
    assert_same(actual, expected, rtol=0, atol=0)


@pytest.mark.parametrize("x", [torch.randn(1, 3, 9, 9), torch.randn(3, 9, 9)],
                         ids=["batch of one", "unbatched"])
def test_more_sample_rows_than_the_batch(x):
    # PyTorch's own module tests pass two rows of samples for one plane set: CPU reads the
    # first.
    u = torch.rand(2, 3, 2)
    f = torch.nn.functional.fractional_max_pool2d
    expected = f(x, 3, output_size=4, _random_samples=u)
    assert_same(f(x.to(TPU), 3, output_size=4, _random_samples=u.to(TPU)), expected,
                rtol=0, atol=0)


@pytest.mark.parametrize("nd, output_size", [(2, (0, 1)), (3, (0, 1, 1)), (3, (2, 0, 3))])
def test_an_empty_output_size_gives_an_empty_result(nd, output_size):
    x, u = torch.rand((2, 3) + (8,) * nd), torch.rand(2, 3, nd)
    op = getattr(torch.nn.functional, f"fractional_max_pool{nd}d")
    expected = op(x, 2, output_size=output_size, return_indices=True, _random_samples=u)
    actual = op(x.to(TPU), 2, output_size=output_size, return_indices=True,
                _random_samples=u.to(TPU))
    assert_same(actual, expected, rtol=0, atol=0)


@pytest.mark.parametrize("fn, kernel, shape", [
    (F.fractional_max_pool2d, 0, (1, 2, 7, 7)), (F.fractional_max_pool2d, (0, 2), (2, 7, 7)),
    (F.fractional_max_pool3d, 0, (1, 2, 5, 6, 7))])
def test_an_empty_window_gives_cpus_minus_infinity_at_its_start(fn, kernel, shape):
    # CPU does not refuse a zero kernel: its empty windows give -inf and their start as the
    # index; the rule failed in argmax of an empty sequence
    x = torch.randn(shape)
    samples = torch.rand(1, 2, 2 if fn is F.fractional_max_pool2d else 3)
    expected = fn(x, kernel, output_size=3, _random_samples=samples, return_indices=True)
    actual = fn(x.to(TPU), kernel, output_size=3, _random_samples=samples.to(TPU),
                return_indices=True)
    assert torch.equal(actual[0].cpu(), expected[0])
    assert torch.equal(actual[1].cpu(), expected[1])
