"""``torch.use_deterministic_algorithms(True)`` on tpu: what CPU does under it."""

from __future__ import annotations

import pytest
import torch
from conftest import TPU, assert_same


@pytest.fixture
def deterministic():
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.complex64, torch.int64,
                                   torch.uint8, torch.bool])
def test_uninitialized_memory_is_filled_as_cpus(deterministic, dtype):
    # torch.utils.deterministic.fill_uninitialized_memory: NaN, an integer's largest value,
    # True; what an unwritten element then reads shows.
    made = [
        lambda d: torch.empty(2, 3, dtype=dtype, device=d),
        lambda d: torch.empty(1, 2, 2, 3, dtype=dtype, device=d,
                              memory_format=torch.channels_last),
        lambda d: torch.empty_strided((2, 3), (1, 2), dtype=dtype, device=d),
        lambda d: torch.empty_like(torch.zeros(2, 3, dtype=dtype, device=d)),
        lambda d: torch.zeros(1, dtype=dtype, device=d).new_empty(2, 3),
        lambda d: torch.zeros(1, dtype=dtype, device=d).new_empty_strided((2, 3), (1, 2)),
    ]
    for make in made:
        cpu, tpu = make("cpu"), make(TPU)
        assert tpu.stride() == cpu.stride()
        assert_same(tpu, cpu)
    torch.utils.deterministic.fill_uninitialized_memory = False
    try:
        assert torch.empty(2, device=TPU).tolist() == [0.0, 0.0]  # XLA's zeros, not filled
    finally:
        torch.utils.deterministic.fill_uninitialized_memory = True



def test_factories_that_copy_in_fill_nothing_they_write(deterministic):
    # torch.tensor(..., device="tpu") makes its empty tensor through a PrivateUse1 kernel with
    # the Python key excluded: filling it there raised "Could not run 'aten::fill_.Scalar'".
    for values in ([1.5, -2.0], [3, 1], [True, False]):
        assert_same(torch.tensor(values, device=TPU), torch.tensor(values))
    out = torch.index_add(torch.zeros(3, device=TPU), 0, torch.tensor([0, 0], device=TPU),
                          torch.ones(2, device=TPU))
    assert out.tolist() == [2.0, 0.0, 0.0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.complex64, torch.int32,
                                   torch.bool])
def test_resize_fills_the_memory_it_adds_as_cpus(deterministic, dtype):
    # CPU fills the storage's new elements only: one the tensor shrank past keeps its value.
    def run(device):
        grown = torch.ones(2, 2, dtype=dtype, device=device)
        grown.resize_(3, 3)
        again = torch.ones(2, dtype=dtype, device=device)
        again.resize_(1)
        again.resize_(5)
        return grown, again

    assert_same(run(TPU), run("cpu"))
    torch.utils.deterministic.fill_uninitialized_memory = False
    try:
        assert torch.ones(1, device=TPU).resize_(2).tolist() == [1.0, 0.0]
    finally:
        torch.utils.deterministic.fill_uninitialized_memory = True
