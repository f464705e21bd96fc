"""Train minGPT data-parallel with DDP, one process per device, launched by torchrun.

    torchrun --nproc-per-node 2 examples/train_gpt_ddp.py --device tpu

The script is written as for cuda (`tpu:{local_rank}`, `device_ids=[local_rank]`); each rank
trains on its slice of every global batch, and rank 0 prints the mean loss over all ranks.
`--out FILE` writes rank 0's losses as JSON (the test compares tpu's with CPU's).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
from torchtpu.models.gpt import GPT, GPTConfig  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_gpt import DATA, batches, load_text  # noqa: E402


def main(argv: list[str] | None = None) -> list[float]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="tpu", help="tpu or cpu")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=8, help="global, split over the ranks")
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--n-layer", type=int, default=2)
    p.add_argument("--n-embd", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)

    local_rank = int(os.environ["LOCAL_RANK"])
    if args.device == "tpu":
        import torchtpu  # noqa: F401  (registers the 'tpu' device and its process group)

        device = torch.device("tpu", local_rank)
        torch.tpu.set_device(local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group("tpu" if device.type == "tpu" else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    tokens, vocab = load_text(DATA)
    cfg = GPTConfig(vocab_size=len(vocab), block_size=args.seq_len, n_layer=args.n_layer,
                    n_head=4, n_embd=args.n_embd)
    torch.manual_seed(0)  # the same weights on every rank (DDP also broadcasts rank 0's)
    model = GPT(cfg).to(device)
    ddp = torch.nn.parallel.DistributedDataParallel(
        model, device_ids=[local_rank] if device.type != "cpu" else None)
    opt = torch.optim.AdamW(ddp.parameters(), lr=args.lr, weight_decay=0.1)
    per_rank = args.batch_size // world
    losses = []
    for x, y in batches(tokens, len(vocab), args.batch_size, args.seq_len, args.steps, 0):
        mine = slice(rank * per_rank, (rank + 1) * per_rank)
        _, loss = ddp(x[mine].to(device), y[mine].to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append(mean.item() / world)
        if rank == 0:
            print(f"step {len(losses) - 1:>3}  loss {losses[-1]:.4f}", flush=True)
    if rank == 0 and args.out is not None:
        args.out.write_text(json.dumps(losses))
    dist.destroy_process_group()
    return losses


if __name__ == "__main__":
    main()
