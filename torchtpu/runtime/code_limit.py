"""Keeping compiled programs under the process's memory-map limit.

XLA:CPU maps each executable's code into memory maps of its own (about six a program), and
Linux allows a process ``vm.max_map_count`` of them (65530 by default). JAX's caches keep
thousands of executables (one jitted function's stopped growing near 4,000: 24,000 maps;
strict eager has hundreds of functions) and fused eager its programs besides, so a process
that compiles program after program (shapes that never repeat, a sweep over many models)
can reach the limit, and every later compile fails: "LLVM compilation error: Cannot
allocate memory".

So every few hundred compiles the maps are counted, and past half the limit the compiled
programs are let go at the next op: each recompiles (or loads from the persistent cache)
when it next runs. A steady training loop compiles nothing and never gets here.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable

import jax

_CHECK_EVERY = 256
_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"

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


def _on_compile(event: str, _duration: float, **_) -> None:
    global _compiles, due
    if event != _COMPILE_EVENT:
        return
    _compiles += 1
    # (counting the maps reads a file of tens of thousands of lines: not on every compile)
    if _compiles % _CHECK_EVERY == 0 and maps_in_use() > _LIMIT // 2:
        due = True


def on_release(release: Callable[[], None]) -> None:
    """``release()`` lets go of programs a cache of ours holds, when they must go."""
    _releasers.append(release)


def release_programs() -> None:
    """Let go of every compiled program: ours and JAX's caches (they recompile when next run).
    Called between ops, never while JAX compiles or traces."""
    global due, shed_count
    due = False
    shed_count += 1
    for release in _releasers:
        release()
    jax.clear_caches()
    if shed_count == 1:
        warnings.warn(
            f"torchtpu: this process has compiled so many distinct programs that their code "
            f"nears the system's limit on memory maps (vm.max_map_count = {_LIMIT}); the "
            f"compiled programs are let go and recompile as they are next used. Shapes that "
            f"change at every step cause this: torch.compile's options={{'buckets': ...}} "
            f"pads a varying dimension to a few sizes.", stacklevel=3)


if _LIMIT is not None:
    jax.monitoring.register_event_duration_secs_listener(_on_compile)
