"""Train a ResNet on synthetic images (one learnable pattern per class) and report images/s.

    python examples/train_resnet.py --device tpu --arch resnet18 --steps 50
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
from torchtpu.models.resnet import ResNet, ResNetConfig  # noqa: E402

ARCHS = {"tiny": ResNetConfig.tiny, "resnet18": ResNetConfig.resnet18,
         "resnet50": ResNetConfig.resnet50}


def pick_device(name: str) -> torch.device:
    if name == "tpu":
        import torchtpu  # noqa: F401  (registers the 'tpu' device)

        return torch.device("tpu:0")  # with an index: autograd needs it (DESIGN.md)
    return torch.device(name)


def synthetic_batch(patterns: torch.Tensor, batch: int, g: torch.Generator):
    """Images = the class's fixed pattern + noise, so accuracy can actually rise."""
    labels = torch.randint(0, patterns.shape[0], (batch,), generator=g)
    noise = torch.randn((batch, *patterns.shape[1:]), generator=g)
    return patterns[labels] + noise, labels


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="tpu", help="tpu, cpu, or any torch device")
    p.add_argument("--arch", default="tiny", choices=sorted(ARCHS))
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--num-classes", type=int, default=10)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    device = pick_device(args.device)
    torch.manual_seed(args.seed)
    cfg = ARCHS[args.arch](num_classes=args.num_classes)
    if args.image_size <= 64:
        cfg.small_input = True  # 3x3 stem, no max-pool: CIFAR-style
    model = ResNet(cfg).to(device).train()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    g = torch.Generator().manual_seed(args.seed + 1)
    patterns = torch.randn(args.num_classes, 3, args.image_size, args.image_size, generator=g)

    losses, accs = [], []
    start = steady = time.perf_counter()
    for step in (bar := tqdm(range(args.steps), desc=f"{args.arch} [{device}]", unit="step")):
        x, y = synthetic_batch(patterns, args.batch_size, g)
        x, y = x.to(device), y.to(device)
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())  # logging only
        accs.append((logits.argmax(1) == y).float().mean().item())
        if step == 0:
            steady = time.perf_counter()  # step 0 includes compilation on compiling devices
        bar.set_postfix(loss=f"{losses[-1]:.3f}", acc=f"{accs[-1]:.2f}")
    end = time.perf_counter()
    rate = args.batch_size * max(args.steps - 1, 1) / (end - steady if args.steps > 1
                                                        else end - start)
    print(f"{args.steps} steps in {end - start:.2f}s: {rate:,.0f} images/s (after step 0); "
          f"loss {losses[0]:.3f} -> {losses[-1]:.3f}, accuracy {accs[-1]:.2f}")
    return {"losses": losses, "accuracy": accs, "images_per_s": rate}


if __name__ == "__main__":
    main()
