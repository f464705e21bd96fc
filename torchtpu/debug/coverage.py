"""Op coverage: which ATen overloads lower directly, which decompose, and OpInfo pass rates.

``python -m torchtpu.debug.coverage`` prints the report; ``--json`` prints it for machines.
The pass rates come from the last OpInfo sweep (``pytest tests/ops``), which records each
outcome in a results file (``TORCHTPU_COVERAGE_RESULTS``, default under ~/.cache/torchtpu).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from collections import defaultdict
from pathlib import Path

from .. import config

_PENDING: dict[str, dict] = {}


def results_path() -> Path:
    """One file per checkout: sweeps of other checkouts (worktrees) must not mix into it."""
    where = config.get("coverage_results")
    if where:
        return Path(where)
    checkout = hashlib.sha1(str(Path(__file__).resolve().parents[2]).encode()).hexdigest()[:10]
    return Path.home() / ".cache" / "torchtpu" / f"opinfo_results-{checkout}.json"


def record(outcome: dict) -> None:
    """Remember one OpInfo test outcome (op, variant, dtype, test, mode, outcome, reason)."""
    key = "|".join(str(outcome[k]) for k in ("op", "variant", "dtype", "test", "mode"))
    _PENDING[key] = outcome
    if len(_PENDING) >= 200:  # a sweep that dies (a crash in a kernel) keeps what it learnt
        save_results()


def save_results() -> None:
    """Merge the outcomes recorded so far into the results file (a partial run keeps the rest)."""
    if not _PENDING:
        return
    path = results_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    results = load_results()
    results.update(_PENDING)
    _PENDING.clear()
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"results": results}, sort_keys=True))
    os.replace(tmp, path)


def load_results() -> dict[str, dict]:
    path = results_path()
    try:
        return json.loads(path.read_text())["results"]
    except (OSError, ValueError, KeyError):
        return {}


def rule_counts() -> dict:
    """How ATen overloads are handled: a direct rule, a decomposition, or neither."""
    import torch

    from ..ops.decomps import DECOMPOSITIONS
    from ..ops.registry import LOWERINGS

    aten = [o for o in LOWERINGS if o.namespace == "aten"]
    decomposed = [o for o in DECOMPOSITIONS if o not in LOWERINGS and o.namespace == "aten"]
    core = set()
    for name in torch._C._dispatch_get_all_op_names():
        if not name.startswith("aten::"):
            continue
        base, _, overload = name[len("aten::"):].partition(".")
        packet = getattr(torch.ops.aten, base, None)
        op = getattr(packet, overload or "default", None) if packet is not None else None
        if op is not None and torch.Tag.core in op.tags:
            core.add(op)
    return {
        "direct_rules": len(aten),
        "decompositions": len(decomposed),
        "core_aten": len(core),
        "core_aten_with_rule": len(core & set(LOWERINGS)),
        "core_aten_decomposed": len((core - set(LOWERINGS)) & set(DECOMPOSITIONS)),
        "core_aten_missing": sorted(str(o) for o in core - set(LOWERINGS) - set(DECOMPOSITIONS)),
    }


def summarize(results: dict[str, dict]) -> dict:
    """Per (test, dtype): OpInfos passing in every mode, failing, and the failures by reason."""
    per_op: dict[tuple, dict] = {}
    for r in results.values():
        key = (r["test"], r["dtype"], r["op"], r["variant"])
        state = per_op.setdefault(key, {"outcomes": set(), "reasons": set(), "full": True})
        state["outcomes"].add(r["outcome"])
        state["full"] &= bool(r.get("full"))
        if r.get("reason"):
            state["reasons"].add(r["reason"])
    rates: dict[str, dict] = defaultdict(dict)
    counts: dict[tuple, dict] = defaultdict(lambda: defaultdict(int))
    by_reason: dict[str, list] = defaultdict(list)
    for (test, dtype, op, variant), s in sorted(per_op.items()):
        o = s["outcomes"]
        verdict = ("fail" if "fail" in o else "xfail" if "xfail" in o
                   else "pass" if "pass" in o else "skip")
        c = counts[(test, dtype)]
        c[verdict] += 1
        c["all_samples"] += s["full"]
        if verdict in ("fail", "xfail"):
            name = op + (f".{variant}" if variant else "")
            for reason in sorted(s["reasons"]) or ["(no reason recorded)"]:
                by_reason[reason].append(f"{name} {test} {dtype}" + (
                    "" if verdict == "xfail" else " [unexpected]"))
    for (test, dtype), c in sorted(counts.items()):
        ran = c["pass"] + c["fail"] + c["xfail"]
        rates[test][dtype] = {
            "pass": c["pass"], "expected_fail": c["xfail"], "unexpected_fail": c["fail"],
            "skip": c["skip"], "rate": round(c["pass"] / ran, 4) if ran else None,
            "ops_run_on_all_samples": c["all_samples"],
        }
    return {"rates": dict(rates), "failures_by_reason": dict(sorted(
        by_reason.items(), key=lambda kv: (-len(kv[1]), kv[0])))}


def report() -> dict:
    results = load_results()
    return {"rules": rule_counts(), "results_file": str(results_path()),
            "opinfo": summarize(results) if results else None}


def _print(rep: dict) -> None:
    r = rep["rules"]
    print(f"ATen overloads with a direct lowering rule: {r['direct_rules']}")
    print(f"ATen overloads through torch._decomp decompositions: {r['decompositions']}")
    print(f"Core ATen: {r['core_aten']} overloads, {r['core_aten_with_rule']} with a rule, "
          f"{r['core_aten_decomposed']} decomposed, {len(r['core_aten_missing'])} neither")
    op = rep["opinfo"]
    if op is None:
        print(f"\nNo OpInfo results at {rep['results_file']}: run `pytest tests/ops` "
              "(or `pytest -m slow tests/ops` for every sample) first.")
        return
    print(f"\nOpInfo pass rate per dtype (from {rep['results_file']}):")
    for test, per_dtype in op["rates"].items():
        for dtype, c in per_dtype.items():
            rate = "n/a" if c["rate"] is None else f"{100 * c['rate']:.1f}%"
            print(f"  {test:8} {dtype:9} {rate:>7}  pass {c['pass']}, expected fail "
                  f"{c['expected_fail']}, unexpected fail {c['unexpected_fail']}, skip "
                  f"{c['skip']}; all samples run for {c['ops_run_on_all_samples']}")
    print("\nFailing ops by reason:")
    for reason, ops in op["failures_by_reason"].items():
        print(f"  {reason} ({len(ops)})")
        for name in ops:
            print(f"      {name}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m torchtpu.debug.coverage",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    rep = report()
    if args.json:
        print(json.dumps(rep, indent=1))
    else:
        _print(rep)


if __name__ == "__main__":
    main()
