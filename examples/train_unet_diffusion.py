"""Train a diffusion UNet with the DDPM noise-prediction loss on synthetic images.

    python examples/train_unet_diffusion.py --device tpu --steps 50

Each step picks random diffusion steps t, noises the images as q(x_t | x_0) and regresses the
noise (Ho et al. 2020, algorithm 1) under a linear beta schedule.
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
from torchtpu.models.unet import UNet, UNetConfig  # noqa: E402


def pick_device(name: str) -> torch.device:
    if name == "tpu":
        import torchtpu  # noqa: F401  (registers the 'tpu' device)

        return torch.device("tpu:0")  # with an index: autograd needs it (DESIGN.md)
    return torch.device(name)


def synthetic_images(n: int, size: int, g: torch.Generator) -> torch.Tensor:
    """Soft coloured discs in [-1, 1]: structure a small UNet can learn quickly."""
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, size), torch.linspace(-1, 1, size),
                            indexing="ij")
    centre = torch.rand(n, 2, 1, 1, generator=g) * 1.2 - 0.6
    radius = torch.rand(n, 1, 1, generator=g) * 0.4 + 0.2
    dist = ((xx - centre[:, 0]) ** 2 + (yy - centre[:, 1]) ** 2).sqrt()
    disc = torch.sigmoid((radius - dist) * 20)[:, None]  # (n, 1, H, W)
    colour = torch.rand(n, 3, 1, 1, generator=g) * 2 - 1
    return disc * colour


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="tpu", help="tpu, cpu, or any torch device")
    p.add_argument("--image-size", type=int, default=16)
    p.add_argument("--channels", type=int, default=32, help="UNet base width")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--timesteps", type=int, default=1000, help="diffusion steps T")
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    device = pick_device(args.device)
    torch.manual_seed(args.seed)
    cfg = UNetConfig.tiny(args.image_size)
    cfg.channels = args.channels
    model = UNet(cfg).to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    betas = torch.linspace(1e-4, 0.02, args.timesteps)
    alpha_bar = torch.cumprod(1 - betas, 0).to(device)
    g = torch.Generator().manual_seed(args.seed + 1)

    losses = []
    start = steady = time.perf_counter()
    for step in (bar := tqdm(range(args.steps), desc=f"ddpm [{device}]", unit="step")):
        x0 = synthetic_images(args.batch_size, args.image_size, g).to(device)
        t = torch.randint(0, args.timesteps, (args.batch_size,), generator=g).to(device)
        noise = torch.randn(x0.shape, generator=g).to(device)
        a = alpha_bar[t][:, None, None, None]
        xt = a.sqrt() * x0 + (1 - a).sqrt() * noise
        loss = F.mse_loss(model(xt, t), noise)
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
    print(f"{args.steps} steps in {end - start:.2f}s: {rate:,.0f} images/s (after step 0); "
          f"loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    return {"losses": losses, "images_per_s": rate}


if __name__ == "__main__":
    main()
