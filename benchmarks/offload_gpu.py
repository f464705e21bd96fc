"""Streamed training vs plain GPU training vs FSDP2 CPU offload, on one GPU.

    python benchmarks/offload_gpu.py                 # H200: ~3B Llama, capped device memory
    python benchmarks/offload_gpu.py --dry-run       # CPU, tiny model: checks the plumbing

Modes, each in its own process (so a cap or an OOM in one cannot touch the others):
  offload  torchtpu.offload under the memory cap
  plain    the model and fused AdamW on the uncapped GPU (skipped when it does not fit)
  fsdp2    fully_shard + CPUOffloadPolicy on a one-process group, same cap, AdamW on the
           host (fused where PyTorch allows it on the host tensors)
plain and fsdp2 checkpoint each block, as the streamed trainer recomputes each block in
backward, so all three do the same arithmetic.
It prints step time, TFLOPS (6 * params * tokens / step time) and device-busy share, with
ratios to the streamed trainer. Numbers are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

# The streamed trainer drives torch's CUDA device directly. A registered 'tpu' device would
# become the autograd engine's accelerator and break CUDA backward, and JAX would take the GPU.
os.environ.setdefault("TORCHTPU_REGISTER_DEVICE", "0")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

GB = 1e9
MODES = ("offload", "plain", "fsdp2")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--tiny", action="store_true", help="tiny model (plumbing check)")
    p.add_argument("--dry-run", action="store_true", help="= --device cpu --tiny --steps 1")
    p.add_argument("--steps", type=int, default=2, help="measured steps (after 1 warm-up)")
    # 16k tokens per step: past the host<->device transfer break-even for fp32 weights
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--cap-gb", type=float, default=40.0, help="device memory cap, GB")
    p.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=True,
                   help="bf16 autocast in every mode (fp32 master weights)")
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--mode", default=None, help=argparse.SUPPRESS)  # child process
    p.add_argument("--in-process", action="store_true", help="run modes without subprocesses")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per mode")
    args = p.parse_args(argv)
    if args.dry_run:
        args.device, args.tiny, args.steps, args.in_process = "cpu", True, 1, True
        args.batch, args.seq = 2, 32
    return args


def build_model(tiny: bool, device: str = "cpu"):
    from torchtpu.models.llama import Llama, LlamaConfig

    cfg = LlamaConfig.tiny(n_layers=4) if tiny else LlamaConfig.llama3_2_3b()
    with torch.device(device):
        return Llama(cfg)


def _checkpoint_blocks(model) -> None:
    """Recompute each block in backward, as the streamed trainer does."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    for i, block in enumerate(model.layers):
        model.layers[i] = checkpoint_wrapper(block)


def _autocast(args):
    import contextlib

    if not args.bf16:
        return contextlib.nullcontext()
    return torch.autocast(args.device, dtype=torch.bfloat16)


def _sync(args) -> None:
    if args.device == "cuda":
        torch.cuda.synchronize()


def _cap(args) -> int:
    """Apply the memory cap; return it in bytes."""
    cap = int(args.cap_gb * GB)
    if args.device == "cuda":
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap / total))
    return cap


def _data(args, vocab: int):
    g = torch.Generator().manual_seed(0)
    while True:
        ids = torch.randint(0, vocab, (args.batch, args.seq), generator=g)
        yield ids, ids.clone()


def _loss(logits, labels):
    from torchtpu.offload.engine import causal_lm_loss

    return causal_lm_loss(logits, labels)


def _timed_steps(args, step_fn) -> tuple[list[float], list[float]]:
    """Run 1 warm-up + args.steps steps; return (wall times, device-busy times)."""
    walls, busys = [], []
    for i in range(args.steps + 1):
        _sync(args)
        t0 = time.perf_counter()
        busy = step_fn()
        _sync(args)
        if i:
            walls.append(time.perf_counter() - t0)
            busys.append(busy)
    return walls, busys


def _region_timer(args):
    """(start, stop) around a compute region: CUDA events, or wall clock on CPU."""
    if args.device == "cuda":
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        return a.record, lambda: (b.record(), b.synchronize(), a.elapsed_time(b) / 1e3)[-1]
    t = [0.0]
    return (lambda: t.__setitem__(0, time.perf_counter()),
            lambda: time.perf_counter() - t[0])


def run_plain(args) -> dict:
    model = build_model(args.tiny, args.device)
    _checkpoint_blocks(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=args.device == "cuda")
    data = _data(args, model.config.vocab_size)

    def step():
        ids, labels = (t.to(args.device) for t in next(data))
        start, stop = _region_timer(args)
        start()
        with _autocast(args):
            loss = _loss(model(ids)[0], labels)
        loss.backward()
        busy = stop()  # the optimizer runs on the device too; counted as idle: a lower bound
        opt.step()
        opt.zero_grad(set_to_none=True)
        return busy

    return _report(args, "plain", model, *_timed_steps(args, step))


def run_offload(args) -> dict:
    from torchtpu.offload.config import OffloadConfig
    from torchtpu.offload.engine import OffloadEngine

    cap = _cap(args)
    model = build_model(args.tiny)
    cfg = OffloadConfig(lr=1e-4, autocast_bf16=args.bf16, device_budget=cap)
    eng = OffloadEngine(model, args.device, cfg, batch=args.batch, seq=args.seq)
    data = _data(args, model.config.vocab_size)
    if args.device == "cuda":
        torch.cuda.reset_peak_memory_stats()

    def step():
        return eng.train_step([next(data)]).device_busy_s

    out = _report(args, "offload", model, *_timed_steps(args, step))
    peak = eng.ops.peak_bytes()
    out.update(predicted_device_gb=eng.plan.device_total / GB, peak_device_gb=peak / GB,
               h2d_gb_per_step=eng.stats.h2d_bytes / GB, d2h_gb_per_step=eng.stats.d2h_bytes / GB)
    eng.close()
    return out


def run_fsdp2(args) -> dict:
    if args.device != "cuda":
        return {"mode": "fsdp2", "skipped": "CPUOffloadPolicy needs a CUDA device"}
    import torch.distributed as dist
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("nccl", rank=0, world_size=1)
    torch.cuda.set_device(0)
    _cap(args)
    model = build_model(args.tiny)
    _checkpoint_blocks(model)
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) \
        if args.bf16 else MixedPrecisionPolicy()
    policy = CPUOffloadPolicy(pin_memory=True)
    for block in model.layers:
        fully_shard(block, offload_policy=policy, mp_policy=mp)
    fully_shard(model, offload_policy=policy, mp_policy=mp)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    data = _data(args, model.config.vocab_size)

    def step():
        nonlocal opt
        ids, labels = (t.to("cuda") for t in next(data))
        start, stop = _region_timer(args)
        start()
        loss = _loss(model(ids)[0], labels)
        loss.backward()
        busy = stop()  # includes waits on host copies inside the region: an upper bound
        try:
            opt.step()
        except (RuntimeError, NotImplementedError) as e:  # no fused kernel for these tensors
            print(f"fsdp2: fused AdamW refused ({str(e)[:100]}); using foreach", flush=True)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
            opt.step()
        opt.zero_grad(set_to_none=True)
        return busy

    out = _report(args, "fsdp2", model, *_timed_steps(args, step))
    out["optimizer"] = "fused" if opt.defaults.get("fused") else "foreach"
    dist.destroy_process_group()
    return out


def _report(args, mode: str, model, walls: list[float], busys: list[float]) -> dict:
    n = sum(p.numel() for p in model.parameters())
    step = statistics.median(walls)
    tokens = args.batch * args.seq
    peak = torch.cuda.max_memory_allocated() / GB if args.device == "cuda" else float("nan")
    return {"mode": mode, "params_b": n / 1e9, "step_s": step,
            "tflops": 6 * n * tokens / step / 1e12, "busy": statistics.median(busys) / step,
            "tok_s": tokens / step, "peak_gb": peak}


RUNNERS = {"plain": run_plain, "offload": run_offload, "fsdp2": run_fsdp2}


def run_child(args, mode: str) -> dict:
    if args.in_process:
        try:
            return RUNNERS[mode](args)
        except torch.OutOfMemoryError as e:
            return {"mode": mode, "skipped": f"out of memory: {str(e)[:120]}"}
    cmd = [sys.executable, __file__, "--mode", mode, "--device", args.device,
           "--steps", str(args.steps), "--batch", str(args.batch), "--seq", str(args.seq),
           "--cap-gb", str(args.cap_gb), "--bf16" if args.bf16 else "--no-bf16"]
    if args.tiny:
        cmd.append("--tiny")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"mode": mode, "skipped": f"timed out after {args.timeout:.0f}s"}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    return {"mode": mode, "skipped": f"exit {proc.returncode}: {' | '.join(tail)[:300]}"}


def main(argv=None) -> list[dict]:
    args = parse_args(argv)
    if args.mode:  # child
        if args.device == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = True
        try:
            out = RUNNERS[args.mode](args)
        except torch.OutOfMemoryError as e:
            out = {"mode": args.mode, "skipped": f"out of memory: {str(e)[:120]}"}
        print("RESULT " + json.dumps(out), flush=True)
        return [out]
    print(f"offload benchmark: device={args.device} tiny={args.tiny} batch={args.batch} "
          f"seq={args.seq} cap={args.cap_gb} GB bf16={args.bf16}", flush=True)
    results = [run_child(args, m) for m in args.modes.split(",")]
    ref = next((r for r in results if r["mode"] == "offload" and "step_s" in r), None)
    print(f"{'mode':<8} {'step s':>8} {'TFLOPS':>8} {'busy':>6} {'peak GB':>8} "
          f"{'speed/offload':>13}")
    for r in results:
        if "skipped" in r:
            print(f"{r['mode']:<8} skipped: {r['skipped']}")
            continue
        ratio = f"{ref['step_s'] / r['step_s']:.2f}x" if ref else "-"
        print(f"{r['mode']:<8} {r['step_s']:8.3f} {r['tflops']:8.2f} {r['busy']:6.0%} "
              f"{r['peak_gb']:8.2f} {ratio:>13}")
    if ref:
        print(f"offload: predicted device {ref['predicted_device_gb']:.2f} GB, peak "
              f"{ref['peak_device_gb']:.2f} GB; H2D {ref['h2d_gb_per_step']:.2f} GB/step, "
              f"D2H {ref['d2h_gb_per_step']:.2f} GB/step")
    print("RESULTS " + json.dumps(results), flush=True)
    return results


if __name__ == "__main__":
    main()
