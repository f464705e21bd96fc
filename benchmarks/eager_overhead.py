"""Per-op overhead of eager execution, and a minGPT train step, side by side with PyTorch.

    python benchmarks/eager_overhead.py [--ops-only] [--repeat N]

Prints microseconds per op for small (64x64) elementwise ops on PyTorch CPU eager, tpu
strict and tpu debug, and the minGPT train-step time on tpu strict vs CPU eager, as ratios.
Timings on a shared machine are noisy: every row is measured in the same run.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import torchtpu
from torchtpu.models.gpt import GPT, GPTConfig

OPS = {
    "add": lambda a, b: a + b,
    "mul scalar": lambda a, b: a * 1.5,
    "add_ (in-place)": lambda a, b: a.add_(b, alpha=0.0),
    "relu": lambda a, b: torch.relu(a),
    "gelu": lambda a, b: torch.nn.functional.gelu(a),
    "sum(dim)": lambda a, b: a.sum(1),
    "t() view": lambda a, b: a.t(),
    "mm": lambda a, b: a @ b,
}


def _sync(device: str) -> None:
    if device.startswith("tpu"):
        torch.tpu.synchronize()


def per_op_us(fn, device: str, n: int, repeat: int) -> float:
    a = torch.randn(64, 64, device=device)
    b = torch.randn(64, 64, device=device)
    for _ in range(50):
        fn(a, b)
    samples = []
    for _ in range(repeat):
        _sync(device)
        t0 = time.perf_counter()
        for _ in range(n):
            fn(a, b)
        _sync(device)
        samples.append((time.perf_counter() - t0) / n * 1e6)
    return min(samples)


def train_step_s(device: str, steps: int) -> float:
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=1024, block_size=128, n_layer=4, n_head=4, n_embd=256)
    model = GPT(cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    x = torch.randint(0, cfg.vocab_size, (8, 128)).to(device)
    times = []
    for _ in range(steps + 2):
        t0 = time.perf_counter()
        _, loss = model(x, x)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss.item()
        times.append(time.perf_counter() - t0)
    return statistics.median(times[2:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops-only", action="store_true")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()

    print(f"platform: {torch.tpu.get_device_name()}   torch {torch.__version__}")
    print(f"{'op (64x64)':<18}{'cpu us':>9}{'strict us':>11}{'debug us':>10}"
          f"{'strict/cpu':>12}{'debug/cpu':>11}")
    for name, fn in OPS.items():
        cpu = per_op_us(fn, "cpu", args.n, args.repeat)
        strict = per_op_us(fn, "tpu", args.n, args.repeat)
        with torchtpu.set_eager_mode("debug"):
            debug = per_op_us(fn, "tpu", args.n // 2, args.repeat)
        print(f"{name:<18}{cpu:>9.1f}{strict:>11.1f}{debug:>10.1f}"
              f"{strict / cpu:>11.1f}x{debug / cpu:>10.1f}x")
    if args.ops_only:
        return
    cpu = train_step_s("cpu", args.steps)
    tpu = train_step_s("tpu", args.steps)
    print("\nminGPT train step (4 layers, d 256, seq 128, batch 8, AdamW), median seconds")
    print(f"  cpu eager {cpu:.3f}   tpu strict {tpu:.3f}   tpu/cpu {tpu / cpu:.2f}x")


if __name__ == "__main__":
    main()
