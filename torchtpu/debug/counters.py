"""Counters the runtime keeps: compiles per op, CPU fallbacks per op, draws on the host from
an explicit generator ('host_draw'), transfers; for torch.compile, graph events ('graph') and
compiled-program cache lookups ('cache')."""

from __future__ import annotations

from collections import Counter

COUNTERS: dict[str, Counter] = {
    kind: Counter()
    for kind in ("compile", "cache_hit", "execute", "fallback", "host_draw", "transfer", "graph",
                 "cache")
}


def count(kind: str, op, n: int = 1) -> None:
    COUNTERS[kind][str(op)] += n


def metrics() -> dict[str, dict[str, int]]:
    """A snapshot: {'compile': {op: n}, 'fallback': {op: n}, 'transfer': {...}}."""
    return {kind: dict(c) for kind, c in COUNTERS.items()}


def reset_metrics() -> None:
    for c in COUNTERS.values():
        c.clear()


def report() -> str:
    """A human-readable summary, fallbacks first (they are what a user should fix)."""
    lines = []
    for kind in ("fallback", "compile", "cache_hit", "execute", "transfer", "graph", "cache"):
        c = COUNTERS[kind]
        lines.append(f"{kind}: {sum(c.values())} total")
        lines.extend(f"  {op}: {n}" for op, n in c.most_common())
    return "\n".join(lines)
