"""Train a small minGPT on a bundled text (character level), optionally checking against CPU.

    python examples/train_gpt.py --device tpu --compare-cpu

With --compare-cpu the same run (same seed, same initial weights, same batches) is repeated on
the CPU and the per-step losses are printed side by side with their relative difference.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
from torchtpu.models.gpt import GPT, GPTConfig  # noqa: E402

DATA = Path(__file__).parent / "data" / "tiny.txt"


def pick_device(name: str) -> torch.device:
    if name == "tpu":
        import torchtpu  # noqa: F401  (registers the 'tpu' device)

        return torch.device("tpu:0")  # with an index: autograd needs it (DESIGN.md)
    return torch.device(name)


def load_text(path: Path) -> tuple[torch.Tensor, list[str]]:
    """Character-level tokens of the file, and the vocabulary (sorted characters)."""
    text = path.read_text(encoding="utf-8")
    vocab = sorted(set(text))
    index = {c: i for i, c in enumerate(vocab)}
    return torch.tensor([index[c] for c in text], dtype=torch.long), vocab


def batches(data: torch.Tensor | None, vocab_size: int, batch: int, seq: int, steps: int,
            seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """All batches up front, on the CPU, from a private generator: identical on every device."""
    g = torch.Generator().manual_seed(seed + 1)
    out = []
    for _ in range(steps):
        if data is None:  # --synthetic
            chunk = torch.randint(0, vocab_size, (batch, seq + 1), generator=g)
        else:
            starts = torch.randint(0, len(data) - seq - 1, (batch,), generator=g)
            chunk = torch.stack([data[s : s + seq + 1] for s in starts.tolist()])
        out.append((chunk[:, :-1], chunk[:, 1:]))
    return out


def train(device: torch.device, cfg: GPTConfig, data: list[tuple[torch.Tensor, torch.Tensor]],
          lr: float = 1e-3, seed: int = 0, desc: str = "train") -> dict:
    """Train from a seeded CPU init; returns per-step losses and throughput."""
    torch.manual_seed(seed)
    model = GPT(cfg).to(device)  # init on the CPU, then move: the same weights everywhere
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1)
    losses: list[float] = []
    tokens = data[0][0].numel()
    start = steady = time.perf_counter()
    bar = tqdm(data, desc=f"{desc} [{device}]", unit="step")
    for step, (x, y) in enumerate(bar):
        x, y = x.to(device), y.to(device)
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())  # logging; also waits for the step to finish
        if step == 0:
            steady = time.perf_counter()  # step 0 pays for compilation on a compiling device
        bar.set_postfix(loss=f"{losses[-1]:.4f}")
    end = time.perf_counter()
    n = len(data)
    rate = tokens * (n - 1) / (end - steady) if n > 1 else tokens / (end - start)
    print(f"{desc} on {device}: {n} steps in {end - start:.2f}s, {rate:,.0f} tokens/s "
          f"(after step 0), first step {steady - start:.2f}s")
    return {"losses": losses, "tokens_per_s": rate, "seconds": end - start}


def compare(dev_losses: list[float], cpu_losses: list[float], device: torch.device) -> float:
    """Print the side-by-side table; return the largest relative difference."""
    print(f"\n{'step':>4}  {'loss ' + device.type:>12}  {'loss cpu':>12}  {'rel diff':>10}")
    worst = 0.0
    for i, (a, b) in enumerate(zip(dev_losses, cpu_losses, strict=True)):
        rel = abs(a - b) / max(abs(b), 1e-12)
        worst = max(worst, rel)
        print(f"{i:>4}  {a:>12.6f}  {b:>12.6f}  {rel:>10.2e}")
    print(f"max relative difference: {worst:.3e}")
    return worst


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="tpu", help="tpu, cpu, or any torch device")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--n-layer", type=int, default=2)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--n-embd", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", type=Path, default=DATA, help="a UTF-8 text file")
    p.add_argument("--synthetic", action="store_true", help="random tokens instead of text")
    p.add_argument("--vocab-size", type=int, default=65, help="with --synthetic")
    p.add_argument("--compare-cpu", action="store_true", help="repeat on CPU, compare losses")
    p.add_argument("--tolerance", type=float, default=None,
                   help="with --compare-cpu: exit 1 if the max relative difference exceeds it")
    args = p.parse_args(argv)

    if args.synthetic:
        tokens, vocab_size = None, args.vocab_size
    else:
        tokens, vocab = load_text(args.data)
        vocab_size = len(vocab)
    cfg = GPTConfig(vocab_size=vocab_size, block_size=args.seq_len, n_layer=args.n_layer,
                    n_head=args.n_head, n_embd=args.n_embd)
    data = batches(tokens, vocab_size, args.batch_size, args.seq_len, args.steps, args.seed)
    device = pick_device(args.device)
    result = train(device, cfg, data, args.lr, args.seed)
    if args.compare_cpu:
        cpu = train(torch.device("cpu"), cfg, data, args.lr, args.seed, desc="reference")
        result["cpu_losses"] = cpu["losses"]
        result["max_rel_diff"] = compare(result["losses"], cpu["losses"], device)
        if args.tolerance is not None and result["max_rel_diff"] > args.tolerance:
            sys.exit(f"FAIL: max relative difference {result['max_rel_diff']:.3e} > "
                     f"{args.tolerance:g}")
    return result


if __name__ == "__main__":
    main()
