"""``torch.tpu``: the device module, shaped like ``torch.cuda``."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import jax
import torch

from .eager.modes import get_eager_mode, set_eager_mode
from .ops import random as _random
from .runtime import execute, memory, platform
from .streams import (
    Event,
    Stream,
    current_stream,
    default_stream,
    set_stream,
    stream,
)


def is_available() -> bool:
    try:
        platform.init()
        return True
    except RuntimeError:
        return False


def is_initialized() -> bool:
    return True


# torch.utils.checkpoint and fork_rng save a device's RNG state only if its module says so.
_initialized = True


def _is_in_bad_fork() -> bool:
    return False


def device_count() -> int:
    return platform.device_count()


def current_device() -> int:
    return 0


def set_device(device) -> None:
    index = torch.device(device).index if not isinstance(device, int) else device
    if index not in (None, 0):
        raise RuntimeError(
            f"torchtpu drives one device per process; got device {device}. "
            "Launch one process per device (torchrun) instead."
        )


@contextlib.contextmanager
def device(device):  # noqa: F811 (torch.cuda.device is a context manager too)
    set_device(device)
    yield


def synchronize(device=None) -> None:
    """Wait until every queued op on the device has finished."""
    from . import tensor

    execute.flush_pending()
    last = execute.concrete(tensor.last_value)
    if last is not None:
        jax.block_until_ready(last)


def manual_seed(seed: int) -> None:
    _random.manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    _random.manual_seed(seed)


def seed() -> None:
    _random.manual_seed(torch.initial_seed())


def initial_seed() -> int:
    return _random.initial_seed()


def get_rng_state(device=None) -> torch.Tensor:
    return _random.get_state()


def set_rng_state(new_state: torch.Tensor, device=None) -> None:
    _random.set_state(new_state)


def get_device_name(device=None) -> str:
    return platform.init().device_kind


@dataclass(frozen=True)
class DeviceProperties:
    name: str
    platform: str
    total_memory: int


def get_device_properties(device=None) -> DeviceProperties:
    dev = platform.init()
    try:
        stats = dev.memory_stats() or {}
    except Exception:
        stats = {}
    total = stats.get("bytes_limit")
    if total is None:  # XLA:CPU: the host's memory is the device's
        import os

        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return DeviceProperties(dev.device_kind, dev.platform, int(total))


def memory_allocated(device=None) -> int:
    return memory.memory_allocated()


def max_memory_allocated(device=None) -> int:
    return memory.max_memory_allocated()


def reset_peak_memory_stats(device=None) -> None:
    memory.reset_peak_memory_stats()


def reset_max_memory_allocated(device=None) -> None:
    memory.reset_peak_memory_stats()


def memory_reserved(device=None) -> int:
    return memory.memory_reserved()


def max_memory_reserved(device=None) -> int:
    return memory.max_memory_reserved()


def mem_get_info(device=None) -> tuple[int, int]:
    return memory.mem_get_info()


def memory_stats(device=None) -> dict[str, int]:
    return memory.memory_stats()


def memory_summary(device=None, abbreviated: bool = False) -> str:
    return memory.memory_summary()


def empty_cache() -> None:
    """Nothing to release: XLA returns freed buffers to its allocator itself."""


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.bfloat16, torch.float16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


__all__ = [
    "Event", "Stream", "current_device", "current_stream", "default_stream", "device",
    "device_count", "empty_cache", "get_amp_supported_dtype", "get_device_name",
    "get_device_properties", "get_eager_mode", "get_rng_state", "initial_seed",
    "is_available", "is_bf16_supported", "is_initialized", "manual_seed", "manual_seed_all",
    "max_memory_allocated", "max_memory_reserved", "mem_get_info", "memory_allocated",
    "memory_reserved", "memory_stats", "memory_summary", "reset_max_memory_allocated",
    "reset_peak_memory_stats", "seed", "set_device", "set_eager_mode", "set_rng_state",
    "set_stream", "stream", "synchronize",
]
