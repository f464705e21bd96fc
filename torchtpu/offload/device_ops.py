"""Streams, events, host/device buffers and copies, one implementation per device type.

The engine is written only against `DeviceOps`, so adding a device (the `tpu` backend) means
adding one class here. Every host<->device transfer goes through `copy_h2d` / `copy_d2h`, and
every engine-owned device buffer through `empty_device`, so tests can instrument both.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

# listener(kind, tag, nbytes): kind is "h2d", "d2h", "alloc"; tag is whatever the caller passed
Listener = Callable[[str, Any, int], None]


class _WallEvent:
    """An event for synchronous devices: recording is completion, so a timestamp is enough."""

    __slots__ = ("t",)

    def __init__(self) -> None:
        self.t = 0.0


class DeviceOps:
    """Synchronous reference implementation, valid for any device PyTorch can copy to.

    Streams are no-ops and copies complete before they return. On `cpu` the "device" is host
    memory too, yet transfers still run through here, so the engine's path is the same as on
    an accelerator.
    """

    def __init__(self, device: torch.device | str) -> None:
        self.device = torch.device(device)
        self.listeners: list[Listener] = []
        self._allocated = 0
        self._peak = 0

    # -- instrumentation ----------------------------------------------------------------
    def _notify(self, kind: str, tag: Any, nbytes: int) -> None:
        for listener in self.listeners:
            listener(kind, tag, nbytes)

    # -- memory -------------------------------------------------------------------------
    def empty_host(self, numel: int, dtype: torch.dtype) -> torch.Tensor:
        """Host buffer that can be the source/target of an asynchronous copy."""
        return torch.empty(numel, dtype=dtype)

    def empty_device(self, numel: int, dtype: torch.dtype, tag: Any = None) -> torch.Tensor:
        t = torch.empty(numel, dtype=dtype, device=self.device)
        nbytes = t.numel() * t.element_size()
        self._allocated += nbytes
        self._peak = max(self._peak, self._allocated)
        self._notify("alloc", tag, nbytes)
        return t

    def peak_bytes(self) -> int:
        """Peak device bytes; here only buffers made by `empty_device` are counted."""
        return self._peak

    def reset_peak(self) -> None:
        self._peak = self._allocated

    def available_bytes(self) -> int | None:
        """Free device memory, or None when unknown (the caller must supply a budget)."""
        if self.device.type == "cpu":
            from torchtpu.offload.preflight import host_available_bytes

            return host_available_bytes()
        return None

    # -- streams and events -------------------------------------------------------------
    def new_stream(self) -> Any:
        return None

    def use_stream(self, stream: Any) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def new_event(self) -> Any:
        return _WallEvent()

    def record(self, event: Any, stream: Any = None) -> None:
        event.t = time.perf_counter()

    def wait(self, event: Any, stream: Any = None) -> None:
        """Make `stream` (None: the compute stream) wait for `event` without blocking the host."""

    def host_wait(self, event: Any) -> None:
        """Block the calling host thread until `event` has completed."""

    def elapsed_s(self, start: Any, end: Any) -> float:
        return end.t - start.t

    def synchronize(self) -> None:
        pass

    # -- transfers ----------------------------------------------------------------------
    def copy_h2d(self, dst: torch.Tensor, src: torch.Tensor, stream: Any = None,
                 tag: Any = None) -> None:
        self._notify("h2d", tag, src.numel() * src.element_size())
        with self.use_stream(stream):
            dst.copy_(src, non_blocking=True)

    def copy_d2h(self, dst: torch.Tensor, src: torch.Tensor, stream: Any = None,
                 tag: Any = None) -> None:
        self._notify("d2h", tag, src.numel() * src.element_size())
        with self.use_stream(stream):
            dst.copy_(src, non_blocking=True)

    # -- randomness (recompute in backward must replay forward's dropout) ---------------
    def rng_state(self) -> torch.Tensor:
        return torch.get_rng_state()

    def set_rng_state(self, state: torch.Tensor) -> None:
        torch.set_rng_state(state)

    @contextlib.contextmanager
    def fork_rng(self, state: torch.Tensor) -> Iterator[None]:
        saved = self.rng_state()
        self.set_rng_state(state)
        try:
            yield
        finally:
            self.set_rng_state(saved)


class CudaOps(DeviceOps):
    """Pinned host memory, copy streams and events: copies overlap compute."""

    def __init__(self, device: torch.device | str) -> None:
        if torch._C._get_privateuse1_backend_name() == "tpu":
            raise RuntimeError(
                "offload on cuda: this process registered the 'tpu' device, and PyTorch's "
                "autograd engine then takes 'tpu' as the accelerator, so CUDA backward fails "
                "(an internal assert in torch's engine). Start the process with "
                "TORCHTPU_REGISTER_DEVICE=0 to train on cuda.")
        super().__init__(device)
        if self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())

    def empty_host(self, numel: int, dtype: torch.dtype) -> torch.Tensor:
        return torch.empty(numel, dtype=dtype, pin_memory=True)

    def peak_bytes(self) -> int:
        return torch.cuda.max_memory_allocated(self.device)

    def reset_peak(self) -> None:
        torch.cuda.reset_peak_memory_stats(self.device)

    def available_bytes(self) -> int | None:
        free, _total = torch.cuda.mem_get_info(self.device)
        # the caching allocator's free blocks are ours to reuse
        reserved = torch.cuda.memory_reserved(self.device) - torch.cuda.memory_allocated(
            self.device)
        return free + reserved

    def new_stream(self) -> Any:
        return torch.cuda.Stream(self.device)

    def use_stream(self, stream: Any) -> contextlib.AbstractContextManager:
        return torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()

    def new_event(self) -> Any:
        return torch.cuda.Event(enable_timing=True)

    def record(self, event: Any, stream: Any = None) -> None:
        event.record(stream if stream is not None else torch.cuda.current_stream(self.device))

    def wait(self, event: Any, stream: Any = None) -> None:
        (stream if stream is not None else torch.cuda.current_stream(self.device)).wait_event(
            event)

    def host_wait(self, event: Any) -> None:
        event.synchronize()

    def elapsed_s(self, start: Any, end: Any) -> float:
        return start.elapsed_time(end) / 1e3

    def synchronize(self) -> None:
        torch.cuda.synchronize(self.device)

    def copy_h2d(self, dst: torch.Tensor, src: torch.Tensor, stream: Any = None,
                 tag: Any = None) -> None:
        super().copy_h2d(dst, src, stream, tag)
        if stream is not None:
            # dst may be a fresh allocation from the compute stream's pool
            dst.record_stream(stream)

    def copy_d2h(self, dst: torch.Tensor, src: torch.Tensor, stream: Any = None,
                 tag: Any = None) -> None:
        super().copy_d2h(dst, src, stream, tag)
        if stream is not None:
            # the caller may drop src at once; keep its memory until this copy has run
            src.record_stream(stream)

    def rng_state(self) -> torch.Tensor:
        return torch.cuda.get_rng_state(self.device)

    def set_rng_state(self, state: torch.Tensor) -> None:
        torch.cuda.set_rng_state(state, self.device)


_FACTORIES: dict[str, Callable[[torch.device], DeviceOps]] = {
    "cpu": DeviceOps,
    "cuda": CudaOps,
    # until the tpu backend has asynchronous transfers, the synchronous path is correct
    "tpu": DeviceOps,
}


def register_device_ops(device_type: str, factory: Callable[[torch.device], DeviceOps]) -> None:
    """Plug in a device type (e.g. the tpu backend's asynchronous transfer layer)."""
    _FACTORIES[device_type] = factory


def device_ops_for(device: torch.device | str) -> DeviceOps:
    device = torch.device(device)
    if device.type == "tpu" and device.index is None:
        device = torch.device("tpu", 0)  # autograd asserts on an index-less tpu device
    if device.type not in _FACTORIES:
        raise ValueError(f"offload: no DeviceOps for device type {device.type!r}; "
                         f"known: {sorted(_FACTORIES)} (see register_device_ops)")
    return _FACTORIES[device.type](device)
