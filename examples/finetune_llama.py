"""Fine-tune a Llama / Qwen checkpoint on a text file and save the result in HF format.

    python examples/finetune_llama.py --checkpoint ~/Llama-3.2-1B --save ~/llama-tuned

Without --checkpoint a tiny random Llama is used, so the script runs with no download. Text is
tokenised with the checkpoint's tokenizer.json when present, else as UTF-8 bytes.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
from torchtpu.models.checkpoint import load_pretrained, save_pretrained  # noqa: E402
from torchtpu.models.llama import Llama, LlamaConfig  # noqa: E402

DATA = Path(__file__).parent / "data" / "tiny.txt"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def pick_device(name: str) -> torch.device:
    if name == "tpu":
        import torchtpu  # noqa: F401  (registers the 'tpu' device)

        return torch.device("tpu:0")  # with an index: autograd needs it (DESIGN.md)
    return torch.device(name)


def tokenize(text: str, checkpoint: Path | None) -> torch.Tensor:
    if checkpoint is not None and (checkpoint / "tokenizer.json").exists():
        from tokenizers import Tokenizer

        ids = Tokenizer.from_file(str(checkpoint / "tokenizer.json")).encode(text).ids
    else:
        ids = list(text.encode("utf-8"))
    return torch.tensor(ids, dtype=torch.long)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint", type=Path, default=None, help="HF checkpoint directory")
    p.add_argument("--device", default="tpu", help="tpu, cpu, or any torch device")
    p.add_argument("--dtype", default="float32", choices=sorted(DTYPES))
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--save", type=Path, default=None, help="write the tuned checkpoint here")
    args = p.parse_args(argv)

    device = pick_device(args.device)
    torch.manual_seed(args.seed)
    if args.checkpoint is None:
        model = Llama(LlamaConfig.tiny()).to(device=device, dtype=DTYPES[args.dtype])
        lr = max(args.lr, 1e-3)  # a random model needs a larger step to visibly learn
    else:
        model = load_pretrained(args.checkpoint, device=device, dtype=DTYPES[args.dtype])
        lr = args.lr
    model.train()
    tokens = tokenize(args.data.read_text(encoding="utf-8"), args.checkpoint)
    if int(tokens.max()) >= model.config.vocab_size:
        sys.exit(f"token id {int(tokens.max())} >= vocab_size {model.config.vocab_size}")
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    g = torch.Generator().manual_seed(args.seed)  # batches drawn on the CPU, then moved

    losses: list[float] = []
    start = time.perf_counter()
    for _ in (bar := tqdm(range(args.steps), desc=f"finetune [{device}]", unit="step")):
        starts = torch.randint(0, len(tokens) - args.seq_len - 1, (args.batch_size,), generator=g)
        chunk = torch.stack([tokens[s : s + args.seq_len + 1] for s in starts.tolist()])
        x, y = chunk[:, :-1].to(device), chunk[:, 1:].to(device)
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())  # logging only
        bar.set_postfix(loss=f"{losses[-1]:.4f}")
    seconds = time.perf_counter() - start
    rate = args.steps * args.batch_size * args.seq_len / seconds
    print(f"{args.steps} steps in {seconds:.2f}s: {rate:,.0f} tokens/s; "
          f"loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    if args.save is not None:
        save_pretrained(model, args.save)
        print(f"saved to {args.save}")
    return {"losses": losses, "tokens_per_s": rate}


if __name__ == "__main__":
    main()
