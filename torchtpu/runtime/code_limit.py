"""Keeping compiled programs under the process's memory-map limit and the machine's memory.

XLA:CPU maps each executable's code into memory maps of its own (about six a program), and
Linux allows a process ``vm.max_map_count`` of them (65530 by default). JAX's caches keep
thousands of executables (one jitted function's stopped growing near 4,000: 24,000 maps;
strict eager has hundreds of functions) and fused eager its programs besides, so a process
that compiles program after program (shapes that never repeat, a sweep over many models)
can reach the limit, and every later compile fails: "LLVM compilation error: Cannot
allocate memory".

Each program also holds host memory (about half a megabyte on XLA:CPU): a sweep of a few
thousand shapes holds gigabytes, enough that two such processes on a small machine are killed
for memory before they reach the map limit.

So every few hundred compiles the maps are counted, and the compiled programs are let go at
the next op when the maps pass half the limit, or when the machine runs short of memory after
this process grew by a gigabyte: each recompiles (or loads from the persistent cache) when it
next runs, and the freed memory goes back to the system. A steady training loop compiles
nothing and never gets here.
"""

from __future__ import annotations

import ctypes
import gc
import os
import warnings
from collections.abc import Callable

import jax

_CHECK_EVERY = 256
_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
_SHORT = 0.25  # of the machine's memory left available: short of memory
_GROWN = 1 << 30  # bytes this process grew by since programs were last let go

due = False  # read on each op: past the limit, the programs go before the next one runs
_compiles = 0
_releasers: list[Callable[[], None]] = []
shed_count = 0


def _limit() -> int | None:
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            return int(f.read())
    except (OSError, ValueError):  # not Linux: no such limit to keep under
        return None


_LIMIT = _limit()


def maps_in_use() -> int:
    with open(f"/proc/{os.getpid()}/maps", "rb") as f:
        return sum(1 for _ in f)


def resident_bytes() -> int:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def memory_available() -> tuple[int, int] | None:
    """(bytes available, bytes in all) to this process: the machine's, or its cgroup's."""
    try:
        with open("/proc/meminfo") as f:
            info = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in f}
        available, total = info["MemAvailable"], info["MemTotal"]
    except (OSError, KeyError, ValueError, IndexError):
        return None
    try:  # a container's limit (cgroup v2) is the one that kills the process
        with open("/sys/fs/cgroup/memory.max") as f, open("/sys/fs/cgroup/memory.current") as g:
            cap, used = int(f.read()), int(g.read())  # "max" (no cap) raises ValueError
        available, total = min(available, cap - used), min(total, cap)
    except (OSError, ValueError):
        pass
    return available, total


_resident_at_release = resident_bytes() if _LIMIT is not None else 0


def _short_of_memory() -> bool:
    memory = memory_available()
    return (memory is not None and memory[0] < _SHORT * memory[1]
            and resident_bytes() - _resident_at_release > _GROWN)


def _on_compile(event: str, _duration: float, **_) -> None:
    global _compiles, due
    if event != _COMPILE_EVENT:
        return
    _compiles += 1
    # (counting the maps reads a file of tens of thousands of lines: not on every compile)
    if _compiles % _CHECK_EVERY == 0 and (maps_in_use() > _LIMIT // 2 or _short_of_memory()):
        due = True


def on_release(release: Callable[[], None]) -> None:
    """``release()`` lets go of programs a cache of ours holds, when they must go."""
    _releasers.append(release)


def release_programs() -> None:
    """Let go of every compiled program: ours and JAX's caches (they recompile when next run).
    Called between ops, never while JAX compiles or traces."""
    global due, shed_count, _resident_at_release
    due = False
    shed_count += 1
    for release in _releasers:
        release()
    jax.clear_caches()
    gc.collect()
    _return_freed_memory()
    _resident_at_release = resident_bytes()
    if shed_count == 1:
        warnings.warn(
            f"torchtpu: this process has compiled so many distinct programs that they near "
            f"the system's limit on memory maps (vm.max_map_count = {_LIMIT}) or leave the "
            f"machine short of memory; the compiled programs are let go and recompile as "
            f"they are next used. Shapes that "
            f"change at every step cause this: torch.compile's options={{'buckets': ...}} "
            f"pads a varying dimension to a few sizes.", stacklevel=3)


def _return_freed_memory() -> None:
    # glibc keeps what the programs freed for this process's later mallocs; hand it back
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


if _LIMIT is not None:
    jax.monitoring.register_event_duration_secs_listener(_on_compile)
