"""Device memory accounting for torch.tpu.memory_allocated() and friends.

XLA:CPU reports no memory stats, so the tensor layer counts the bytes its storages hold;
where PJRT reports them (GPU, TPU) the allocator's own numbers are used.
"""

from __future__ import annotations

import jax
import torch

from .platform import init

allocated = 0
peak = 0


def add(nbytes: int) -> None:
    global allocated, peak
    allocated += nbytes
    if allocated > peak:
        peak = allocated


def sub(nbytes: int) -> None:
    global allocated
    allocated -= nbytes


def _device_stats() -> dict | None:
    try:
        return init().memory_stats()
    except Exception:  # backends without stats raise or return None
        return None


def memory_allocated() -> int:
    stats = _device_stats()
    return stats["bytes_in_use"] if stats and "bytes_in_use" in stats else allocated


def max_memory_allocated() -> int:
    stats = _device_stats()
    return stats["peak_bytes_in_use"] if stats and "peak_bytes_in_use" in stats else peak


def reset_peak_memory_stats() -> None:
    global peak
    peak = allocated


def memory_reserved() -> int:
    """Bytes the allocator holds; XLA:CPU holds no more than its tensors'."""
    stats = _device_stats()
    if stats and "bytes_reserved" in stats:
        return stats["bytes_reserved"]
    return memory_allocated()


def max_memory_reserved() -> int:
    stats = _device_stats()
    if stats and "peak_bytes_reserved" in stats:
        return stats["peak_bytes_reserved"]
    return max(max_memory_allocated(), memory_reserved())


def mem_get_info() -> tuple[int, int]:
    """(free, total) bytes: the device's, or on XLA:CPU the host's."""
    stats = _device_stats()
    if stats and "bytes_limit" in stats:
        return stats["bytes_limit"] - stats.get("bytes_in_use", 0), stats["bytes_limit"]
    import os

    page = os.sysconf("SC_PAGE_SIZE")
    return page * os.sysconf("SC_AVPHYS_PAGES"), page * os.sysconf("SC_PHYS_PAGES")


def memory_stats() -> dict[str, int]:
    """The counters of ``torch.cuda.memory_stats()`` that XLA has (bytes, all pools)."""
    return {
        "allocated_bytes.all.current": memory_allocated(),
        "allocated_bytes.all.peak": max_memory_allocated(),
        "reserved_bytes.all.current": memory_reserved(),
        "reserved_bytes.all.peak": max_memory_reserved(),
    }


def memory_summary() -> str:
    stats = memory_stats()
    rows = [f"  {name:32} {value / 2**20:12.1f} MiB" for name, value in stats.items()]
    return "\n".join(["torchtpu memory summary (device 0)", *rows])


def raise_as_torch(error: Exception):
    """Raise XLA's RESOURCE_EXHAUSTED as torch.OutOfMemoryError (what code catches on cuda to
    retry with a smaller batch), any other error as it is."""
    if isinstance(error, jax.errors.JaxRuntimeError) and "RESOURCE_EXHAUSTED" in str(error):
        raise torch.OutOfMemoryError(f"tpu out of memory. {error}") from error
    raise error
