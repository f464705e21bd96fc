"""Device memory accounting for torch.tpu.memory_allocated() and friends.

XLA:CPU reports no memory stats, so the tensor layer counts the bytes its storages hold;
where PJRT reports them (GPU, TPU) the allocator's own numbers are used.
"""

from __future__ import annotations

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
