"""minGPT training step: PyTorch CPU (eager, inductor) beside the tpu device (eager, compiled).

Each row runs in its own process: first-step time (tracing and compiling included) and the
steady-state step time (median). The two warm rows start a new process on the compile cache
the `tpu compile` (or `tpu fused`) row left behind, to show a warm start. Prints ratios;
never asserts speed.

    python benchmarks/train_step.py [--steps 10] [--rows cpu,inductor,...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROWS = {
    "cpu": "PyTorch CPU eager",
    "inductor": "torch.compile inductor (CPU)",
    "strict": "tpu strict eager",
    "fused": "tpu fused eager",
    "compile": "tpu torch.compile",
    "warm": "tpu torch.compile, warm cache, new process",
    "warm_fused": "tpu fused eager, warm cache, new process",
}
# A warm row runs on the cache its cold row left behind.
WARMS = {"warm": "compile", "warm_fused": "fused"}


def _model_and_batch(device: str):
    import torch

    from torchtpu.models.gpt import GPT, GPTConfig

    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=1024, block_size=128, n_layer=4, n_head=4, n_embd=256)
    model = GPT(cfg).to(device)
    capturable = device != "cpu"  # step counters on the device, as torch.compile does on cuda
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, capturable=capturable)
    idx = torch.randint(0, 1024, (8, 128)).to(device)
    targets = torch.randint(0, 1024, (8, 128)).to(device)
    return model, opt, idx, targets


def _step_fn(model, opt):
    def step(idx, targets):
        _, loss = model(idx, targets)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    return step


def run_row(row: str, steps: int) -> dict | None:
    """In this process: time one configuration. None if it is not available here."""
    import torch

    device = "cpu"
    if row in ("strict", "fused", "compile", "warm", "warm_fused"):
        import torchtpu
        import torchtpu.compile
        from torchtpu.runtime import compile_cache

        compile_cache.setup()  # idempotent once torchtpu/__init__.py does it
        torchtpu.compile.register()
        device = "tpu:0"
        if row in ("fused", "warm_fused"):
            try:
                torchtpu.set_eager_mode("fused")
            except ValueError:
                return None
    model, opt, idx, targets = _model_and_batch(device)
    step = _step_fn(model, opt)
    if row == "inductor":
        step = torch.compile(step, backend="inductor")
    elif row in ("compile", "warm"):
        step = torch.compile(step, backend="tpu")
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        step(idx, targets).item()  # .item() waits for the step, on every row alike
        times.append(time.perf_counter() - t)
    result = {"first": times[0], "steady": statistics.median(times[2:] or times[1:])}
    if device != "cpu":
        import torchtpu

        m = torchtpu.metrics()
        result["persistent_hits"] = m["cache"].get("persistent_hit", 0)
        result["persistent_misses"] = m["cache"].get("persistent_miss", 0)
    return result


def _child(row: str, steps: int, cache_dir: str) -> dict | None:
    # Inductor's own cache too, so its first step is a cold one as ours are.
    env = dict(os.environ, TORCHTPU_CACHE_DIR=cache_dir,
               TORCHINDUCTOR_CACHE_DIR=os.path.join(cache_dir, "inductor"),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run(
        [sys.executable, __file__, "--child", row, "--steps", str(steps)],
        env=env, capture_output=True, text=True,
    )
    if out.returncode != 0:
        print(f"[{row}] failed:\n{out.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rows", default=",".join(ROWS))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_row(args.child, args.steps)))
        return
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        for row in args.rows.split(","):
            # Every row starts on an empty cache, but a warm row on its cold row's.
            own = os.path.join(scratch, WARMS.get(row, row))
            results[row] = _child(row, args.steps, own)
            print(f"  {ROWS[row]}: {results[row]}", file=sys.stderr)
    base = results.get("cpu") or {}
    print(f"\nminGPT 4x256, seq 128, batch 8, vocab 1024, AdamW; {args.steps} steps; "
          f"median steady step, first step includes compile")
    print(f"{'configuration':46} {'steady s':>9} {'vs cpu':>7} {'first s':>9}")
    for row, r in results.items():
        if r is None:
            print(f"{ROWS[row]:46} {'(not available)':>27}")
            continue
        ratio = f"{r['steady'] / base['steady']:.2f}x" if base else "-"
        print(f"{ROWS[row]:46} {r['steady']:9.3f} {ratio:>7} {r['first']:9.2f}")


if __name__ == "__main__":
    main()
