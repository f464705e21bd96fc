"""Special functions where the OpInfo sweep's float32 samples say little: float64 accuracy."""

from __future__ import annotations

import torch


def test_trigamma_in_float64_is_float64s():
    # CPU has a double kernel: the float32 one gave relative errors of ~1e-7 (every float64
    # gradient through digamma: Gamma's entropy, StudentT's).
    x = torch.tensor([3.5, -2.5, 0.3, 100.0, 1e-3], dtype=torch.float64)
    torch.testing.assert_close(torch.polygamma(1, x.to("tpu")).cpu(), torch.polygamma(1, x),
                               rtol=1e-13, atol=0)
