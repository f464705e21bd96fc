"""Why torch.compile compiled again: ``explain_recompile()``.

The backend records every graph Dynamo hands it: the compile id (frame, n-th compile of
that frame), its inputs' shapes, dtypes and strides, and the guard failures Dynamo logged
for the frame. A recompile is then explained by the guards that failed and by the inputs
whose shape, dtype or layout differ from the frame's previous compile.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from . import counters as metrics


@dataclass
class CompileRecord:
    compile_id: str
    frame: int
    attempt: int
    inputs: dict[str, str]
    reasons: list[str] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)


RECORDS: list[CompileRecord] = []
NOTES: list[str] = []
_seen_failures: dict[object, int] = {}


def _describe(x) -> str:
    if isinstance(x, torch.Tensor):
        grad = ", requires_grad" if x.requires_grad else ""
        dtype = str(x.dtype).removeprefix("torch.")
        return f"{dtype}{list(x.shape)} stride={list(x.stride())}{grad}"
    return f"{type(x).__name__} {x}"


def _new_guard_failures() -> list[str]:
    try:
        from torch._dynamo.utils import guard_failures
    except ImportError:
        return []
    found = []
    for code, reasons in list(guard_failures.items()):
        start = _seen_failures.get(code, 0)
        for r in reasons[start:]:
            where = f"{getattr(code, 'co_name', code)} ({getattr(code, 'co_filename', '?')}:" \
                    f"{getattr(code, 'co_firstlineno', '?')})"
            found.append(f"{where}: {r}")
        _seen_failures[code] = len(reasons)
    return found


def record_compile(gm, example_inputs) -> CompileRecord:
    """Called by the backend for each Dynamo graph; counts and explains recompiles."""
    from torch._guards import CompileContext

    cid = CompileContext.current_compile_id()
    frame = getattr(cid, "frame_id", None)
    attempt = getattr(cid, "frame_compile_id", None) or 0
    names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    inputs = {n: _describe(x) for n, x in zip(names, example_inputs, strict=False)}
    record = CompileRecord(str(cid), frame if frame is not None else -1, attempt, inputs)
    record.reasons = _new_guard_failures()
    if attempt > 0:
        metrics.count("graph", "recompile")
        previous = [r for r in RECORDS if r.frame == record.frame]
        if previous:
            before = previous[-1].inputs
            for name, now in inputs.items():
                was = before.get(name)
                if was is None:
                    record.changes.append(f"new input {name}: {now}")
                elif was != now:
                    record.changes.append(f"input {name}: {was} -> {now}")
            record.changes += [f"input {n} no longer passed" for n in before if n not in inputs]
    RECORDS.append(record)
    return record


def note(message: str) -> None:
    """Something a user tuning performance should know (a graph that runs eagerly, ...)."""
    NOTES.append(message)


def explain_recompile() -> str:
    """Every recompile so far: which guard failed, which input's shape/dtype/stride changed."""
    lines = []
    for r in RECORDS:
        if r.attempt == 0:
            continue
        lines.append(f"recompile {r.compile_id}:")
        lines += [f"  guard failed: {x}" for x in r.reasons]
        lines += [f"  {x}" for x in r.changes]
        if not r.reasons and not r.changes:
            lines.append("  (no guard failure or input change recorded)")
    lines += _limit_hits()
    lines += [f"note: {n}" for n in NOTES]
    return "\n".join(lines) if lines else "No recompiles."


def _limit_hits() -> list[str]:
    """Frames Dynamo stopped compiling: past its recompile limit they run eagerly, uncompiled,
    and no graph reaches the backend to be recorded."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return []
    hits = sum(n for key, n in counters["unimplemented"].items()
               if key.startswith("Dynamo recompile limit exceeded"))
    if not hits:
        return []
    limit = torch._dynamo.config.recompile_limit
    lines = [f"recompile limit ({limit}) reached by {hits} function(s): their later calls run "
             f"uncompiled (raise torch._dynamo.config.recompile_limit, or make the varying "
             f"input dynamic)"]
    return lines + [f"  guard failed, not recompiled: {x}" for x in _new_guard_failures()]


def reset() -> None:
    RECORDS.clear()
    NOTES.clear()
    _seen_failures.clear()
