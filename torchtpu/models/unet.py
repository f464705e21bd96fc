"""Diffusion UNet (Ho et al. 2020, DDPM), predicting the noise added to an image at step t.

Sinusoidal timestep embedding -> MLP; a down path of residual blocks (GroupNorm, SiLU, conv,
plus the timestep embedding) with strided-conv downsampling; a middle of res-attn-res; an up
path that concatenates the skip connections and upsamples by nearest + conv. Self-attention
(through ``F.scaled_dot_product_attention``) runs only at the low resolutions listed in
``attn_resolutions``, where the token count H*W is small.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class UNetConfig:
    image_size: int = 32
    in_channels: int = 3
    channels: int = 128
    channel_mults: tuple[int, ...] = (1, 2, 2, 2)
    num_res_blocks: int = 2
    attn_resolutions: tuple[int, ...] = (16,)
    num_heads: int = 1
    groups: int = 32
    dropout: float = 0.1

    @classmethod
    def tiny(cls, image_size: int = 16) -> UNetConfig:
        return cls(image_size, channels=16, channel_mults=(1, 2), num_res_blocks=1,
                   attn_resolutions=(image_size // 2,), groups=8, dropout=0.0)

    @classmethod
    def ddpm_cifar10(cls) -> UNetConfig:
        """The 35.7M-parameter model of the DDPM paper's CIFAR-10 results."""
        return cls()


def timestep_embedding(t: torch.Tensor, dim: int, max_period: float = 10000.0) -> torch.Tensor:
    """t (B,) integer or float steps -> (B, dim) sin/cos features at geometric frequencies."""
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, device=t.device) / half)
    args = t.float()[:, None] * freqs[None, :]
    return torch.cat([args.sin(), args.cos()], dim=-1)


class ResBlock(nn.Module):
    def __init__(self, cin: int, cout: int, temb: int, groups: int, dropout: float):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.temb_proj = nn.Linear(temb, cout)
        self.norm2 = nn.GroupNorm(groups, cout)
        self.dropout = nn.Dropout(dropout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor, temb: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.temb_proj(F.silu(temb))[:, :, None, None]
        h = self.conv2(self.dropout(F.silu(self.norm2(h))))
        return self.skip(x) + h


class AttnBlock(nn.Module):
    def __init__(self, ch: int, heads: int, groups: int):
        super().__init__()
        self.heads = heads
        self.norm = nn.GroupNorm(groups, ch)
        self.qkv = nn.Conv2d(ch, 3 * ch, 1)
        self.proj = nn.Conv2d(ch, ch, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        # (B, 3C, H, W) -> three (B, heads, H*W, C/heads): pixels are the tokens.
        qkv = self.qkv(self.norm(x)).reshape(b, 3, self.heads, c // self.heads, h * w)
        q, k, v = qkv.transpose(-1, -2).unbind(1)
        y = F.scaled_dot_product_attention(q, k, v)
        return x + self.proj(y.transpose(-1, -2).reshape(b, c, h, w))


class UNet(nn.Module):
    def __init__(self, cfg: UNetConfig):
        super().__init__()
        self.config = cfg
        ch, temb, g, p = cfg.channels, 4 * cfg.channels, cfg.groups, cfg.dropout
        self.temb = nn.Sequential(nn.Linear(ch, temb), nn.SiLU(), nn.Linear(temb, temb))
        self.conv_in = nn.Conv2d(cfg.in_channels, ch, 3, padding=1)

        def attn_at(res: int, c: int) -> AttnBlock | None:
            return AttnBlock(c, cfg.num_heads, g) if res in cfg.attn_resolutions else None

        # Down path; `skips` records the channels of every activation the up path consumes.
        self.down = nn.ModuleList()
        skips, cur, res = [ch], ch, cfg.image_size
        for level, mult in enumerate(cfg.channel_mults):
            for _ in range(cfg.num_res_blocks):
                self.down.append(nn.ModuleList([ResBlock(cur, ch * mult, temb, g, p),
                                                attn_at(res, ch * mult)]))
                cur = ch * mult
                skips.append(cur)
            if level != len(cfg.channel_mults) - 1:
                self.down.append(nn.Conv2d(cur, cur, 3, stride=2, padding=1))
                skips.append(cur)
                res //= 2

        self.mid = nn.ModuleList([ResBlock(cur, cur, temb, g, p), AttnBlock(cur, cfg.num_heads, g),
                                  ResBlock(cur, cur, temb, g, p)])

        self.up = nn.ModuleList()
        for level, mult in reversed(list(enumerate(cfg.channel_mults))):
            for _ in range(cfg.num_res_blocks + 1):
                self.up.append(nn.ModuleList([ResBlock(cur + skips.pop(), ch * mult, temb, g, p),
                                              attn_at(res, ch * mult)]))
                cur = ch * mult
            if level != 0:
                self.up.append(nn.Sequential(nn.Upsample(scale_factor=2.0, mode="nearest"),
                                             nn.Conv2d(cur, cur, 3, padding=1)))
                res *= 2
        assert not skips, "down and up paths disagree"

        self.norm_out = nn.GroupNorm(g, cur)
        self.conv_out = nn.Conv2d(cur, cfg.in_channels, 3, padding=1)
        nn.init.zeros_(self.conv_out.weight)  # start by predicting zero noise
        nn.init.zeros_(self.conv_out.bias)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """x (B, C, H, W) noisy images, t (B,) diffusion steps -> predicted noise like x."""
        temb = self.temb(timestep_embedding(t, self.config.channels))
        h = self.conv_in(x)
        hs = [h]
        for mod in self.down:
            if isinstance(mod, nn.ModuleList):
                h = mod[0](h, temb)
                h = h if mod[1] is None else mod[1](h)
            else:
                h = mod(h)
            hs.append(h)
        h = self.mid[2](self.mid[1](self.mid[0](h, temb)), temb)
        for mod in self.up:
            if isinstance(mod, nn.ModuleList):
                h = mod[0](torch.cat([h, hs.pop()], dim=1), temb)
                h = h if mod[1] is None else mod[1](h)
            else:
                h = mod(h)
        return self.conv_out(F.silu(self.norm_out(h)))
