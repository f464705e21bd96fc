"""``torch.tpu``: the device module, shaped like ``torch.cuda``."""

from __future__ import annotations

import os
import sys
import types
from dataclasses import dataclass

import jax
import torch

from . import device_amp as amp
from . import tensor_types
from .eager.modes import get_eager_mode, set_eager_mode
from .ops import random as _random
from .runtime import execute, memory, platform
from .streams import (
    Event,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    set_stream,
    stream,
)
from .tensor import TpuTensor  # noqa: F401  (pickle finds the class here: tensor.py)


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
    platform.check_device_index(device)


def _index(device) -> int:
    if device is None:
        return -1
    if isinstance(device, int):
        return device
    device = torch.device(device)
    return 0 if device.index is None else device.index


class device:  # noqa: N801 (torch.cuda.device's name)
    """Context manager selecting a device, as ``torch.cuda.device``: only tpu:0 exists, and
    None or -1 (a CPU tensor's ``get_device()``) select nothing."""

    def __init__(self, device):
        self.idx = _index(device)
        if self.idx != -1:
            set_device(self.idx)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None


class device_of(device):  # noqa: N801
    """The device of a tensor (nothing for a CPU tensor), as ``torch.cuda.device_of``."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.device.type == "tpu" else -1)


def synchronize(device=None) -> None:
    """Wait until every queued op on the device has finished."""
    from . import tensor
    from .eager import deferred_checks

    execute.flush_pending()
    last = tensor.last_value()
    if last is not None:
        jax.block_until_ready(last)
    deferred_checks.raise_failed(wait=True)  # a compiled program's failed check


def manual_seed(seed: int) -> None:
    _random.manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    _random.manual_seed(seed)


def seed() -> None:
    """Seed with a random number, as ``torch.cuda.seed``."""
    _random.manual_seed(int.from_bytes(os.urandom(8), "little"))


def seed_all() -> None:
    seed()  # one device


def init() -> None:
    """``torch.cuda.init``: the device is ready once torchtpu is imported."""
    platform.init()


def initial_seed() -> int:
    return _random.initial_seed()


def get_rng_state(device=None) -> torch.Tensor:
    """The device's random stream (seed and counter) as a CPU ByteTensor, as cuda's is."""
    return _random.get_state().view(torch.uint8)


def set_rng_state(new_state: torch.Tensor, device=None) -> None:
    state = new_state.detach().cpu().contiguous()
    if state.dtype == torch.uint8 and state.numel() == 16:
        state = state.view(torch.int64)
    if state.dtype != torch.int64 or state.numel() != 2:  # (int64[2]: this module's old form)
        raise RuntimeError(
            f"torch.tpu.set_rng_state: expected the 16-byte ByteTensor torch.tpu.get_rng_state "
            f"gives, got {str(state.dtype).removeprefix('torch.')}{list(new_state.shape)}")
    _random.set_state(state)


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state()]


def set_rng_state_all(new_states) -> None:
    for state in new_states:
        set_rng_state(state)


OutOfMemoryError = torch.OutOfMemoryError
_lazy_init = init  # called by code written for torch.cuda's internals


def _submodule(name: str, members: dict) -> types.ModuleType:
    module = types.ModuleType(f"torch.tpu.{name}")
    module.__dict__.update(members)
    return module


# torch.cuda.random, as libraries read a device's RNG (transformers' Trainer checkpoints)
random = _submodule("random", {f.__name__: f for f in (
    get_rng_state, set_rng_state, get_rng_state_all, set_rng_state_all, manual_seed,
    manual_seed_all, seed, seed_all, initial_seed)})


def install_submodules() -> None:
    """``from torch.tpu.amp import autocast`` and ``import torch.tpu.random``, as for cuda."""
    sys.modules.setdefault("torch.tpu.amp", amp)
    sys.modules.setdefault("torch.tpu.random", random)
    tensor_types.install(sys.modules[__name__])


def is_current_stream_capturing() -> bool:
    return False


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


def reset_accumulated_memory_stats(device=None) -> None:
    memory.reset_accumulated_memory_stats()


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


def ipc_collect() -> None:
    """Nothing to collect: tpu memory is never shared between processes."""


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.bfloat16, torch.float16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


# Queries whose answer never changes in a process: torch.compile folds them to constants,
# as Dynamo folds torch.cuda's (what torch.compiler.assume_constant_result marks, without
# importing Dynamo here).
for _query in (is_available, is_initialized, device_count, current_device, get_device_name,
               get_amp_supported_dtype, is_bf16_supported):
    _query._dynamo_marked_constant = True

__all__ = [
    "Event", "OutOfMemoryError", "Stream", "StreamContext", "amp", "current_device",
    "current_stream", "default_stream", "device", "device_of", "get_rng_state_all",
    "init", "ipc_collect", "is_current_stream_capturing", "random",
    "reset_accumulated_memory_stats", "seed_all", "set_rng_state_all",
    "device_count", "empty_cache", "get_amp_supported_dtype", "get_device_name",
    "get_device_properties", "get_eager_mode", "get_rng_state", "initial_seed",
    "is_available", "is_bf16_supported", "is_initialized", "manual_seed", "manual_seed_all",
    "max_memory_allocated", "max_memory_reserved", "mem_get_info", "memory_allocated",
    "memory_reserved", "memory_stats", "memory_summary", "reset_max_memory_allocated",
    "reset_peak_memory_stats", "seed", "set_device", "set_eager_mode", "set_rng_state",
    "set_stream", "stream", "synchronize",
]
