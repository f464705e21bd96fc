"""Command line: train a model far larger than the device with host-resident state.

    python -m torchtpu.offload.train --model tiny --device cpu --batch 2 --seq 64 --steps 5
    python -m torchtpu.offload.train --model /path/to/hf_dir --device cuda --bf16 --data a.txt

`--model` is a built-in config name (see BUILTIN) or a Hugging Face checkpoint directory.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch
from torch import nn

from torchtpu.offload import checkpoint
from torchtpu.offload.config import OffloadConfig
from torchtpu.offload.engine import OffloadEngine, StepStats
from torchtpu.offload.preflight import PreflightError

GB = 1e9


def _builtin() -> dict:
    from torchtpu.models.llama import LlamaConfig

    return {
        "tiny": lambda: LlamaConfig.tiny(n_layers=4),
        "small": lambda: LlamaConfig(vocab_size=4096, hidden_size=256, intermediate_size=688,
                                     n_layers=8, n_heads=8, n_kv_heads=4, max_seq_len=2048),
        "llama-1b": LlamaConfig.llama3_2_1b,
        "llama-3b": LlamaConfig.llama3_2_3b,
        "llama-8b": LlamaConfig.llama3_8b,
        "llama-70b": LlamaConfig.llama3_1_70b,
    }


BUILTIN = ("tiny", "small", "llama-1b", "llama-3b", "llama-8b", "llama-70b")


def build_model(name: str) -> nn.Module:
    """A built-in config (randomly initialised on the host) or a HF checkpoint directory."""
    if name in BUILTIN:
        from torchtpu.models.llama import Llama

        return Llama(_builtin()[name]())
    if Path(name).is_dir():
        from transformers import AutoModelForCausalLM

        return AutoModelForCausalLM.from_pretrained(name, dtype=torch.float32)
    raise SystemExit(f"--model {name!r}: not a built-in ({', '.join(BUILTIN)}) nor a directory")


def batches(vocab: int, batch: int, seq: int, data: str | None,
            seed: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(ids, labels) windows: bytes of a text file (mod vocab), or random tokens."""
    g = torch.Generator().manual_seed(seed)
    tokens = None
    if data:
        tokens = torch.frombuffer(bytearray(Path(data).read_bytes()), dtype=torch.uint8).long()
        tokens = tokens % vocab
        if tokens.numel() <= seq:
            raise SystemExit(f"--data {data}: needs more than --seq {seq} bytes")
    while True:
        if tokens is None:
            ids = torch.randint(0, vocab, (batch, seq), generator=g)
        else:
            starts = torch.randint(0, tokens.numel() - seq, (batch,), generator=g)
            ids = torch.stack([tokens[s:s + seq] for s in starts.tolist()])
        yield ids, ids.clone()


def host_rss_bytes() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def step_metrics(stats: StepStats, n_params: int, peak: int) -> dict[str, float]:
    s = stats.step_s
    return {
        "loss": stats.loss,
        "step_s": s,
        "tok_s": stats.tokens / s,
        "tflops": 6 * n_params * stats.tokens / s / 1e12,
        "busy": stats.device_busy_s / s,
        "h2d_gbs": stats.h2d_bytes / s / GB,
        "d2h_gbs": stats.d2h_bytes / s / GB,
        "dev_peak_gb": peak / GB,
        "host_gb": host_rss_bytes() / GB,
    }


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m torchtpu.offload.train", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="tiny", help=f"{', '.join(BUILTIN)} or a HF directory")
    p.add_argument("--device", default="cpu", choices=["cuda", "tpu", "cpu"])
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--micro-batches", type=int, default=1, help="gradient accumulation")
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--clip", type=float, default=None, help="global grad-norm clipping")
    p.add_argument("--bf16", action="store_true", help="bf16 autocast over fp32 masters")
    p.add_argument("--bf16-weights", action="store_true", help="bf16 master weights")
    p.add_argument("--offload-activations", action="store_true")
    p.add_argument("--device-budget-gb", type=float, default=None)
    p.add_argument("--data", default=None, help="text file (byte-level tokens)")
    p.add_argument("--save", default=None, help="checkpoint file written after the run")
    p.add_argument("--resume", default=None, help="checkpoint file to start from")
    p.add_argument("--export-hf", default=None, help="HF directory written after the run")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> list[dict[str, float]]:
    args = parse_args(argv)
    from tqdm import tqdm

    torch.manual_seed(args.seed)
    model = build_model(args.model)
    n_params = sum(p.numel() for p in model.parameters())
    vocab = model.config.vocab_size
    cfg = OffloadConfig(
        lr=args.lr, weight_decay=args.weight_decay, max_grad_norm=args.clip,
        autocast_bf16=args.bf16, offload_activations=args.offload_activations,
        weights_dtype=torch.bfloat16 if args.bf16_weights else torch.float32,
        device_budget=None if args.device_budget_gb is None else int(args.device_budget_gb * GB))
    try:
        engine = OffloadEngine(model, args.device, cfg, batch=args.batch, seq=args.seq,
                               micro_batches=args.micro_batches)
    except PreflightError as e:
        print(e, file=sys.stderr)
        raise SystemExit(2) from None
    print(f"offload: {args.model}, {n_params / 1e6:.1f}M params, {len(engine.blocks)} blocks "
          f"on {engine.ops.device}; host state {engine.plan.host_total / GB:.2f} GB, "
          f"device plan {engine.plan.device_total / GB:.3f} GB")
    if args.resume:
        checkpoint.load(engine, args.resume)
    data = batches(vocab, args.batch, args.seq, args.data, args.seed)
    history = []
    bar = tqdm(range(args.steps), desc="train", disable=args.quiet, dynamic_ncols=True)
    for _ in bar:
        engine.ops.reset_peak()
        stats = engine.train_step([next(data) for _ in range(args.micro_batches)])
        m = step_metrics(stats, n_params, engine.ops.peak_bytes())
        history.append(m)
        bar.set_postfix_str(
            f"loss {m['loss']:.4f} | {m['tok_s']:.0f} tok/s | {m['tflops']:.2f} TFLOPS | "
            f"busy {m['busy']:.0%} | H2D {m['h2d_gbs']:.2f} D2H {m['d2h_gbs']:.2f} GB/s | "
            f"dev {m['dev_peak_gb']:.2f} GB | host {m['host_gb']:.1f} GB")
    engine.synchronize()
    if history:
        last = history[-1]
        print("offload: " + ", ".join(f"{k}={v:.4g}" for k, v in last.items()))
    if args.save:
        checkpoint.save(engine, args.save)
    if args.export_hf:
        checkpoint.export_hf(engine, args.export_hf)
    engine.close()
    return history


if __name__ == "__main__":
    main()
