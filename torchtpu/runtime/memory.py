"""Device memory accounting for torch.tpu.memory_allocated() and friends.

XLA:CPU reports no memory stats, so the tensor layer counts the bytes its storages hold;
where PJRT reports them (GPU, TPU) the allocator's own numbers are used.
"""

from __future__ import annotations

import jax
import torch

from .platform import init

_SMALL = 1 << 20  # cuda's caching allocator serves requests up to 1 MiB from its small pool


class _Pool:
    """One pool's counters for ``torch.cuda.memory_stats()``: the bytes and storages held now
    and at the peak, and the totals allocated and freed since
    ``reset_accumulated_memory_stats``."""

    __slots__ = ("bytes", "bytes_peak", "bytes_allocated", "bytes_freed",
                 "count", "count_peak", "count_allocated", "count_freed")

    def __init__(self):
        for name in self.__slots__:
            setattr(self, name, 0)


# The pool a cuda allocation of each size would come from, and all of them.
_all, _small, _large = _Pool(), _Pool(), _Pool()
_POOLS = {"all": _all, "small_pool": _small, "large_pool": _large}


def add(nbytes: int) -> None:
    # (every storage made passes here: inline, no method calls)
    for p in (_all, _small if nbytes <= _SMALL else _large):
        p.bytes += nbytes
        p.bytes_allocated += nbytes
        p.count += 1
        p.count_allocated += 1
        if p.bytes > p.bytes_peak:
            p.bytes_peak = p.bytes
        if p.count > p.count_peak:
            p.count_peak = p.count


def sub(nbytes: int) -> None:
    for p in (_all, _small if nbytes <= _SMALL else _large):
        p.bytes -= nbytes
        p.bytes_freed += nbytes
        p.count -= 1
        p.count_freed += 1


def _device_stats() -> dict | None:
    try:
        return init().memory_stats()
    except Exception:  # backends without stats raise or return None
        return None


def memory_allocated() -> int:
    stats = _device_stats()
    return stats["bytes_in_use"] if stats and "bytes_in_use" in stats else _all.bytes


def max_memory_allocated() -> int:
    stats = _device_stats()
    if stats and "peak_bytes_in_use" in stats:
        return stats["peak_bytes_in_use"]
    return _all.bytes_peak


def reset_peak_memory_stats() -> None:
    for p in _POOLS.values():
        p.bytes_peak, p.count_peak = p.bytes, p.count


def reset_accumulated_memory_stats() -> None:
    for p in _POOLS.values():
        p.bytes_allocated = p.bytes_freed = p.count_allocated = p.count_freed = 0


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
    metrics = {"current": "", "peak": "_peak", "allocated": "_allocated", "freed": "_freed"}
    for kind, counter in (("allocation", "count"), ("active", "count"), ("segment", "count"),
                          ("allocated_bytes", "bytes"), ("active_bytes", "bytes"),
                          ("requested_bytes", "bytes"), ("reserved_bytes", "bytes")):
        for pool, p in _POOLS.items():
            for metric, suffix in metrics.items():
                stats[f"{kind}.{pool}.{metric}"] = getattr(p, counter + suffix)
    stats["allocated_bytes.all.current"] = memory_allocated()
    stats["allocated_bytes.all.peak"] = max_memory_allocated()
    stats["reserved_bytes.all.current"] = memory_reserved()
    stats["reserved_bytes.all.peak"] = max_memory_reserved()
    stats.update(num_alloc_retries=0, num_ooms=0, num_sync_all_streams=0,
                 num_device_alloc=_all.count_allocated, num_device_free=_all.count_freed)
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
