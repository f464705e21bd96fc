"""``torch.tpu.Stream`` and ``torch.tpu.Event``, shaped like CUDA's; ``torch.Stream`` and
``torch.Event`` make them for tpu.

XLA runs a device's programs in the order they were dispatched: the device has one queue.
Every stream object therefore names that queue (waiting on another stream or event orders
nothing further), and an event marks the last value queued when it was recorded. A timing
event waits for the device when recorded, so its time is when the device got there.
"""

from __future__ import annotations

import time

import jax
import torch

from . import tensor
from .runtime import execute, platform

_CStream, _CEvent = torch.Stream, torch.Event  # PyTorch's own (install() replaces the names)


def _last_queued():
    """The value the device computes last of everything queued so far (recorded fused ops
    are dispatched first)."""
    execute.flush_pending()
    return tensor.last_value()


class Stream(_CStream):
    """The device's queue. ``torch.tpu.Stream()`` makes another name for it. A torch.Stream,
    so ``tensor.record_stream`` and other APIs typed for streams take it."""

    def __new__(cls, device=None, priority: int = 0, **kwargs):
        return super().__new__(cls, device=torch.device("tpu", 0), priority=priority)

    def __init__(self, device=None, priority: int = 0, **kwargs):
        self.priority = priority

    def synchronize(self) -> None:
        jax.block_until_ready(_last_queued())

    def query(self) -> bool:
        last = _last_queued()
        return last is None or last.is_ready()

    def wait_stream(self, stream: Stream) -> None:
        """Nothing to order: both name the one queue."""

    def wait_event(self, event: Event) -> None:
        """Nothing to order: the event was recorded on the one queue."""

    def record_event(self, event: Event | None = None) -> Event:
        event = Event() if event is None else event
        event.record(self)
        return event

    # Every tpu stream has the one queue's ids, so PyTorch's comparison of ids finds them
    # equal to each other and to torch.accelerator.current_stream(). Only streams are
    # compared: torch 2.13's C++ read a non-stream as one (``stream != None`` was False).
    def __eq__(self, other) -> bool:
        return _CStream.__eq__(self, other) if isinstance(other, _CStream) else NotImplemented

    def __ne__(self, other) -> bool:
        return _CStream.__ne__(self, other) if isinstance(other, _CStream) else NotImplemented

    __hash__ = _CStream.__hash__

    def __repr__(self) -> str:
        return f"<torch.tpu.Stream device={self.device} priority={self.priority}>"


class Event(_CEvent):
    """A point in the device's queue; with ``enable_timing``, the time the device reached it.
    A torch.Event, as cuda's is: generic code hands it to ``torch.Stream.wait_event`` (FSDP2),
    whose C++ reads it as one."""

    def __new__(cls, enable_timing: bool = False, blocking: bool = False,
                interprocess: bool = False):
        return super().__new__(cls, device=torch.device("tpu", 0), enable_timing=enable_timing,
                               blocking=blocking, interprocess=interprocess)

    def __init__(self, enable_timing: bool = False, blocking: bool = False,
                 interprocess: bool = False):
        self.enable_timing = enable_timing
        self._marked = None
        self._recorded = False
        self._time: float | None = None

    def record(self, stream: Stream | None = None) -> None:
        self._marked = _last_queued()
        self._recorded = True
        if self.enable_timing:
            if self._marked is not None:
                jax.block_until_ready(self._marked)
            self._time = time.perf_counter()

    def query(self) -> bool:
        return self._marked is None or self._marked.is_ready()

    def synchronize(self) -> None:
        if self._marked is not None:
            jax.block_until_ready(self._marked)

    def wait(self, stream: Stream | None = None) -> None:
        """Nothing to order: the device runs its queue in order."""

    def elapsed_time(self, end_event: Event) -> float:
        """Milliseconds from this event to ``end_event``. (Its errors are ValueErrors, as
        cuda's and PyTorch's generic events' are.)"""
        if not (self.enable_timing and end_event.enable_timing):
            raise ValueError("Both events must be created with argument 'enable_timing=True'.")
        if not (self._recorded and end_event._recorded):
            raise ValueError("Both events must be recorded before calculating elapsed time.")
        return (end_event._time - self._time) * 1e3

    def __repr__(self) -> str:
        return f"<torch.tpu.Event recorded={self._recorded}>"


def current_stream(device=None) -> Stream:
    return Stream()


def default_stream(device=None) -> Stream:
    return Stream()


def set_stream(stream: Stream) -> None:
    """Every stream is the device's one queue."""


class StreamContext:
    """``with torch.tpu.StreamContext(s):``, as on cuda (every stream is the one queue)."""

    def __init__(self, stream: Stream | None):
        self.stream = stream

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc) -> None:
        return None


def stream(stream: Stream | None) -> StreamContext:
    return StreamContext(stream)


def _on_tpu(device) -> bool:
    """Whether ``torch.Stream(device)`` / ``torch.Event(device)`` names tpu: by name, or by
    leaving it to the current accelerator (no device, or only an index)."""
    if device is None or isinstance(device, int):
        return platform.tpu_is_the_accelerator()
    return torch.device(device).type == "tpu"


class _GenericType(type(_CStream)):
    """``torch.Stream`` and ``torch.Event``'s class: for tpu they make torch.tpu's (which
    synchronize, time and wait; PyTorch's C++ asks device hooks a Python backend cannot
    register, and raised "Backend doesn't support synchronizing events"), PyTorch's own
    otherwise. Every stream or event is an instance of them, as of PyTorch's."""

    def __call__(cls, device=None, **kwargs):
        if cls not in (GenericStream, GenericEvent):  # a user's subclass: made as it says
            return super().__call__(device, **kwargs)
        # (one rebuilt from its ids; or in a graph Dynamo captures: it knows PyTorch's own)
        rebuilt = device is None and "device_type" in kwargs
        if not rebuilt and not torch.compiler.is_compiling() and _on_tpu(device):
            return cls._tpu_class(**kwargs)
        base = cls._torch_class
        return base(**kwargs) if device is None else base(device, **kwargs)

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, cls._torch_class)

    def __subclasscheck__(cls, sub) -> bool:
        return issubclass(sub, cls._torch_class)


class GenericStream(_CStream, metaclass=_GenericType):
    __doc__ = _CStream.__doc__
    _torch_class, _tpu_class = _CStream, Stream


class GenericEvent(_CEvent, metaclass=_GenericType):
    __doc__ = _CEvent.__doc__
    _torch_class, _tpu_class = _CEvent, Event


def install() -> None:
    """Make ``torch.Stream`` and ``torch.Event`` the classes above."""
    for generic, name in ((GenericStream, "Stream"), (GenericEvent, "Event")):
        generic.__module__, generic.__qualname__, generic.__name__ = "torch", name, name
        setattr(torch, name, generic)
