"""Linear algebra values the OpInfo sweep's real dtypes do not reach: complex inputs."""

from __future__ import annotations

import torch


def test_vdot_and_vecdot_conjugate_their_first_argument():
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randn(3, 4, dtype=torch.complex64, generator=g) for _ in range(2))
    for op in (lambda x, y: torch.vdot(x[0], y[0]), torch.linalg.vecdot):
        torch.testing.assert_close(op(a.to("tpu"), b.to("tpu")).cpu(), op(a, b))
