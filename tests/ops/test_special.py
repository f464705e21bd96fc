"""Special functions where the OpInfo sweep's float32 samples say little: float64 accuracy."""

from __future__ import annotations

import torch


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
