"""torch.func transforms (vmap, vjp, jvp and their compositions) on tpu against CPU."""

from __future__ import annotations

import pytest
import torch
from conftest import TPU, assert_same
from torch.func import vmap


@pytest.mark.parametrize("fn", [
    lambda s: torch.linspace(s, 5.0, 4, device=s.device),
    lambda s: torch.linspace(0, s, 3, device=s.device),
    lambda s: torch.linspace(s, 2 + 1j, 3, device=s.device),
    lambda s: torch.linspace(s, 5, 3, dtype=torch.float16, device=s.device),
    lambda s: torch.logspace(0.0, s, 4, base=2.0, device=s.device),
    lambda s: torch.logspace(s, 3, 4, device=s.device),
], ids=["linspace_tensor_scalar", "linspace_scalar_tensor", "linspace_complex_end",
        "linspace_dtype", "logspace_scalar_tensor", "logspace_tensor_scalar"])
def test_vmap_over_a_range_with_one_python_number_end(fn):
    # functorch's rule made the number a wrapped number on tpu, which a Python kernel cannot
    # receive (an internal assert); values and dtypes (float64 from a float end) are CPU's.
    s = torch.tensor([1.0, 2.0])
    assert_same(vmap(fn)(s.to(TPU)), vmap(fn)(s))
