"""``torch.accelerator``'s functions that need C++ device hooks a Python backend cannot
register (they raised "Backend doesn't support synchronizing all streams" or an allocator
INTERNAL ASSERT, or a segfault): with 'tpu' the process's accelerator, torch.tpu's answer them. And
``save_on_cpu(pin_memory=True, device_type="tpu")``, whose pinned host tensors need such a
hook (a pinned allocator), saves to plain host memory. And the legacy
``torch.autograd.profiler.profile(use_device="tpu")`` records through Kineto, as
``torch.profiler`` does: its default marker-only mode needs C++ profiler stubs, and warned at
every op ("PrivateUse1 used in profiler but not enabled")."""

from __future__ import annotations

import functools

from . import device_module
from .runtime import platform


def _capability() -> dict:
    """``torch.accelerator.get_device_capability()``: the dtypes a tpu tensor can hold."""
    from .ops.dtypes import TORCH_TO_JAX

    return {"supported_dtypes": set(TORCH_TO_JAX)}


def _empty_host_cache() -> None:
    """Nothing to release: tpu's host copies are plain host memory, never a pinned cache.
    (PyTorch's own call read the host-allocator slot no Python backend can fill: a
    segfault once a tensor had been on tpu.)"""


# torch.accelerator's name -> what answers it for tpu
_ROUTES = {
    **{name: getattr(device_module, name) for name in (
        "synchronize", "empty_cache", "memory_allocated", "max_memory_allocated",
        "memory_reserved", "max_memory_reserved", "memory_stats", "reset_peak_memory_stats",
        "reset_accumulated_memory_stats")},
    "get_memory_info": device_module.mem_get_info,
    "get_device_capability": _capability,
    "empty_host_cache": _empty_host_cache,
}


def install() -> None:
    import torch.accelerator.memory  # its functions, under their own module's names too

    for name, ours in _ROUTES.items():
        original = getattr(torch.accelerator, name, None)
        if original is not None and not hasattr(original, "_tpu_route"):
            routed = _routed(original, ours)
            setattr(torch.accelerator, name, routed)
            if getattr(torch.accelerator.memory, name, None) is original:
                setattr(torch.accelerator.memory, name, routed)
    for owner, name in ((torch.accelerator, "set_device_index"),
                        (torch.accelerator.device_index, "__enter__")):
        original = getattr(owner, name)
        if not hasattr(original, "_tpu_route"):
            setattr(owner, name, _index_checked(original))
    save_on_cpu = torch.autograd.graph.save_on_cpu
    if not hasattr(save_on_cpu.__init__, "_tpu_route"):
        save_on_cpu.__init__ = _unpinned_for_tpu(save_on_cpu.__init__)
    profile = torch.autograd.profiler.profile
    if not hasattr(profile.__init__, "_tpu_route"):
        profile.__init__ = _kineto_for_tpu(profile.__init__)


def _unpinned_for_tpu(init):
    # XLA copies from any host memory: a plain copy is what pinning would give (as
    # DataLoader(pin_memory=True) gets). HF's activation offload passes the accelerator.
    @functools.wraps(init)
    def __init__(self, pin_memory: bool = False, device_type: str = "cuda") -> None:
        init(self, pin_memory and device_type != "tpu", device_type)

    __init__._tpu_route = True
    return __init__


def _kineto_for_tpu(init):
    @functools.wraps(init)
    def __init__(self, *args, **kwargs) -> None:
        if kwargs.get("use_device") == "tpu":
            kwargs["use_kineto"] = True
        init(self, *args, **kwargs)

    __init__._tpu_route = True
    return __init__


def _index_checked(original):
    """Selecting a device index refuses one past ``device_count()``, as ``torch.tpu.set_device``
    and cuda (an invalid ordinal) do: it was taken, and everything stayed on tpu:0."""

    @functools.wraps(original)
    def call(*args):
        index = args[-1].idx if original.__name__ == "__enter__" else args[0]
        negative = isinstance(index, int) and index < 0  # selects nothing (PyTorch's rule)
        if platform.tpu_is_the_accelerator() and not negative:
            platform.check_device_index(index)
        return original(*args)

    call._tpu_route = True
    return call


def _routed(original, ours):
    @functools.wraps(original)
    def call(*args, **kwargs):
        if platform.tpu_is_the_accelerator():
            return ours()  # one device per process: its index says nothing more
        return original(*args, **kwargs)

    call._tpu_route = True
    return call
