"""Device memory (torch.tpu's and torch.accelerator's counters, out-of-memory errors) and the
torch.accelerator functions that PyTorch's C++ would ask of device hooks a Python backend
cannot register."""

from __future__ import annotations

import gc

import pytest
import torch


def test_memory_stats_track_allocations():
    torch.tpu.synchronize()
    before = torch.tpu.memory_allocated()
    torch.tpu.reset_peak_memory_stats()
    x = torch.zeros(1024, 1024, device="tpu")  # 4 MiB
    assert torch.tpu.memory_allocated() >= before + 4 * 2**20
    peak = torch.tpu.max_memory_allocated()
    assert peak >= before + 4 * 2**20
    del x
    assert torch.tpu.memory_allocated() < before + 4 * 2**20
    assert torch.tpu.max_memory_allocated() == peak


def test_memory_reserved_free_and_stats_as_cuda_names_them():
    x = torch.zeros(1024, 1024, device="tpu")  # 4 MiB
    stats = torch.tpu.memory_stats()
    assert stats["allocated_bytes.all.current"] == torch.tpu.memory_allocated() >= 4 * 2**20
    assert torch.tpu.memory_reserved() >= torch.tpu.memory_allocated()
    assert torch.tpu.max_memory_reserved() >= torch.tpu.memory_reserved()
    free, total = torch.tpu.mem_get_info()
    assert 0 < free <= total
    assert "allocated_bytes.all.current" in torch.tpu.memory_summary()
    del x


def test_an_allocation_too_large_raises_torchs_out_of_memory_error():
    # Code catches torch.OutOfMemoryError (cuda's) to retry with a smaller batch; shape
    # inference must not build the tensor on the CPU first.
    with pytest.raises(torch.OutOfMemoryError, match="tpu out of memory"):
        torch.empty(2**40, device="tpu")
    assert torch.ones(2, device="tpu").sum().item() == 2


def test_torch_accelerator_functions_answer_for_tpu():
    # Device-generic code (transformers' test utilities synchronize so) calls these; their
    # C++ hooks cannot be registered by a Python backend, so torch.tpu's answer.
    x = torch.ones(1000, device="tpu") * 2
    torch.accelerator.synchronize()
    assert torch.accelerator.memory_allocated() == torch.tpu.memory_allocated() > 0
    assert torch.accelerator.get_memory_info() == torch.tpu.mem_get_info()
    torch.accelerator.reset_peak_memory_stats()
    torch.accelerator.empty_cache()
    assert isinstance(torch.accelerator.memory_stats(), dict)
    assert x.sum().item() == 2000
    # the same functions by their own module (an allocator INTERNAL ASSERT there)
    assert torch.accelerator.memory.memory_allocated() == torch.tpu.memory_allocated()
    torch.accelerator.memory.reset_peak_memory_stats()
    assert {torch.float32, torch.bfloat16, torch.int64, torch.bool} <= (
        torch.accelerator.get_device_capability()["supported_dtypes"])


def test_memory_stats_count_as_cudas_caching_allocator_names_them():
    # Every counter torch.cuda.memory_stats() has for bytes, per pool (up to 1 MiB: small),
    # with the totals allocated and freed since reset_accumulated_memory_stats.
    pools, metrics = ("all", "small_pool", "large_pool"), ("peak", "current", "allocated", "freed")
    stats = torch.accelerator.memory_stats()
    for kind in ("allocated_bytes", "reserved_bytes", "active_bytes", "requested_bytes"):
        assert all(f"{kind}.{p}.{m}" in stats for p in pools for m in metrics), kind
    torch.accelerator.reset_accumulated_memory_stats()
    before = torch.accelerator.memory_stats()
    assert before["active_bytes.all.allocated"] == before["active_bytes.all.freed"] == 0
    small, large = torch.empty(256, device="tpu"), torch.empty(2**19, device="tpu")  # 1 KiB, 2 MiB
    stats = torch.accelerator.memory_stats()
    assert stats["active_bytes.all.current"] == before["active_bytes.all.current"] + 1024 + 2**21
    small_before = before["active_bytes.small_pool.current"]
    assert stats["active_bytes.small_pool.current"] == small_before + 1024
    assert stats["allocation.large_pool.current"] == before["allocation.large_pool.current"] + 1
    assert stats["active_bytes.all.freed"] == 0
    del small, large
    gc.collect()
    stats = torch.accelerator.memory_stats()
    assert stats["active_bytes.all.current"] == before["active_bytes.all.current"]
    assert stats["active_bytes.all.freed"] == stats["active_bytes.all.allocated"] == 1024 + 2**21
    assert stats["active_bytes.large_pool.peak"] >= 2**21
    torch.accelerator.reset_peak_memory_stats()
    assert torch.accelerator.memory_stats()["active_bytes.large_pool.peak"] == (
        stats["active_bytes.large_pool.current"])


def test_empty_host_cache_has_nothing_to_release():
    # PyTorch's own call read the host-allocator slot a Python backend cannot fill: it
    # segfaulted once a tensor had been on tpu.
    x = torch.ones(3, device="tpu")
    torch.accelerator.empty_host_cache()
    assert x.sum().item() == 3


def test_torch_accelerator_refuses_a_device_index_that_does_not_exist():
    # As torch.tpu.set_device and cuda (an invalid ordinal); it was taken, tensors on tpu:0.
    with pytest.raises(RuntimeError, match="invalid device index 1"):
        torch.accelerator.set_device_index(1)
    with pytest.raises(RuntimeError, match="invalid device index 3"):
        with torch.accelerator.device_index(3):
            pass
    torch.accelerator.set_device_index(0)
    torch.accelerator.set_device_index(-1)  # negative: selects nothing
    with torch.accelerator.device_index(0), torch.accelerator.device_index(None):
        assert torch.accelerator.current_device_index() == 0
