"""Train DLRM on synthetic click logs whose labels follow a hidden rule; report examples/s.

    python examples/train_dlrm.py --device tpu --steps 100
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
from torchtpu.models.dlrm import DLRM, DLRMConfig  # noqa: E402


def pick_device(name: str) -> torch.device:
    if name == "tpu":
        import torchtpu  # noqa: F401  (registers the 'tpu' device)

        return torch.device("tpu:0")  # with an index: autograd needs it (DESIGN.md)
    return torch.device(name)


class ClickLog:
    """Dense features and id bags; the click probability is a fixed logistic function of the
    dense features plus a per-id score in each table, so there is something to learn."""

    def __init__(self, cfg: DLRMConfig, bag: int, g: torch.Generator):
        self.cfg, self.bag, self.g = cfg, bag, g
        self.w_dense = torch.randn(cfg.num_dense, generator=g)
        self.id_scores = [torch.randn(n, generator=g) for n in cfg.table_sizes]

    def batch(self, b: int):
        dense = torch.randn(b, self.cfg.num_dense, generator=self.g)
        sparse = torch.stack([torch.randint(0, n, (b, self.bag), generator=self.g)
                              for n in self.cfg.table_sizes], dim=1)
        score = dense @ self.w_dense + sum(s[sparse[:, i]].sum(1)
                                           for i, s in enumerate(self.id_scores))
        clicks = torch.bernoulli(torch.sigmoid(score), generator=self.g)
        return dense, sparse, clicks


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="tpu", help="tpu, cpu, or any torch device")
    p.add_argument("--tables", type=int, default=8, help="number of categorical features")
    p.add_argument("--rows", type=int, default=1000, help="rows per embedding table")
    p.add_argument("--embedding-dim", type=int, default=16)
    p.add_argument("--bag-size", type=int, default=2, help="ids per categorical feature")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    device = pick_device(args.device)
    torch.manual_seed(args.seed)
    cfg = DLRMConfig(num_dense=13, table_sizes=(args.rows,) * args.tables,
                     embedding_dim=args.embedding_dim, bottom_mlp=(64, 32), top_mlp=(64, 32))
    model = DLRM(cfg).to(device).train()
    # Adagrad is the usual choice for embedding tables: rare ids keep large steps.
    opt = torch.optim.Adagrad(model.parameters(), lr=args.lr)
    log = ClickLog(cfg, args.bag_size, torch.Generator().manual_seed(args.seed + 1))

    losses = []
    start = steady = time.perf_counter()
    for step in (bar := tqdm(range(args.steps), desc=f"dlrm [{device}]", unit="step")):
        dense, sparse, clicks = (t.to(device) for t in log.batch(args.batch_size))
        _, loss = model(dense, sparse, clicks)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())  # logging only
        if step == 0:
            steady = time.perf_counter()
        bar.set_postfix(loss=f"{losses[-1]:.4f}")
    end = time.perf_counter()
    timed = end - steady if args.steps > 1 else end - start
    rate = args.batch_size * max(args.steps - 1, 1) / timed
    print(f"{args.steps} steps in {end - start:.2f}s: {rate:,.0f} examples/s (after step 0); "
          f"loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    return {"losses": losses, "examples_per_s": rate}


if __name__ == "__main__":
    main()
