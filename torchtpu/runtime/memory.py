"""Device memory accounting for torch.tpu.memory_allocated() and friends.

XLA:CPU reports no memory stats, so the tensor layer counts the bytes its storages hold;
where PJRT reports them (GPU, TPU) the allocator's own numbers are used.
"""

from __future__ import annotations

import jax
import torch

from .platform import init

_SMALL = 1 << 20  # cuda's caching allocator serves requests up to 1 MiB from its small pool
_POOLS = ("all", "small_pool", "large_pool")


class _Stat:
    """One of ``torch.cuda.memory_stats()``'s counters: current, peak, and the totals
    allocated and freed since ``reset_accumulated_memory_stats``."""

    __slots__ = ("current", "peak", "allocated", "freed")

    def __init__(self):
        self.current = self.peak = self.allocated = self.freed = 0

    def add(self, n: int) -> None:
        self.current += n
        self.allocated += n
        if self.current > self.peak:
            self.peak = self.current

    def sub(self, n: int) -> None:
        self.current -= n
        self.freed += n


# Bytes and storages held by tpu tensors, per pool (the pool a cuda allocation of that size
# would come from).
_bytes = {pool: _Stat() for pool in _POOLS}
_counts = {pool: _Stat() for pool in _POOLS}


def add(nbytes: int) -> None:
    pool = "small_pool" if nbytes <= _SMALL else "large_pool"
    _bytes["all"].add(nbytes)
    _bytes[pool].add(nbytes)
    _counts["all"].add(1)
    _counts[pool].add(1)


def sub(nbytes: int) -> None:
    pool = "small_pool" if nbytes <= _SMALL else "large_pool"
    _bytes["all"].sub(nbytes)
    _bytes[pool].sub(nbytes)
    _counts["all"].sub(1)
    _counts[pool].sub(1)


def _device_stats() -> dict | None:
    try:
        return init().memory_stats()
    except Exception:  # backends without stats raise or return None
        return None


def memory_allocated() -> int:
    stats = _device_stats()
    return stats["bytes_in_use"] if stats and "bytes_in_use" in stats else _bytes["all"].current


def max_memory_allocated() -> int:
    stats = _device_stats()
    if stats and "peak_bytes_in_use" in stats:
        return stats["peak_bytes_in_use"]
    return _bytes["all"].peak


def reset_peak_memory_stats() -> None:
    for stat in (*_bytes.values(), *_counts.values()):
        stat.peak = stat.current


def reset_accumulated_memory_stats() -> None:
    for stat in (*_bytes.values(), *_counts.values()):
        stat.allocated = stat.freed = 0


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
    """``torch.cuda.memory_stats()``'s counters, from the bytes and storages tpu tensors hold
    (XLA's allocator keeps no pools or segments apart from them: reserved, active and
    requested bytes are the allocated ones). Where PJRT reports the device's own use (GPU,
    TPU), the current and peak of all allocated and reserved bytes are its numbers."""
    stats: dict[str, int] = {}
    for kind, table in (("allocation", _counts), ("active", _counts), ("segment", _counts),
                        ("allocated_bytes", _bytes), ("active_bytes", _bytes),
                        ("requested_bytes", _bytes), ("reserved_bytes", _bytes)):
        for pool, stat in table.items():
            for metric in _Stat.__slots__:
                stats[f"{kind}.{pool}.{metric}"] = getattr(stat, metric)
    stats["allocated_bytes.all.current"] = memory_allocated()
    stats["allocated_bytes.all.peak"] = max_memory_allocated()
    stats["reserved_bytes.all.current"] = memory_reserved()
    stats["reserved_bytes.all.peak"] = max_memory_reserved()
    stats.update(num_alloc_retries=0, num_ooms=0, num_sync_all_streams=0,
                 num_device_alloc=_counts["all"].allocated, num_device_free=_counts["all"].freed)
    return dict(sorted(stats.items()))


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
