"""Tiny models and the plain-PyTorch reference the streamed trainer is compared with.

A plain module (not conftest.py) so its name cannot clash with another test package's helpers.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from torchtpu.offload.config import OffloadConfig
from torchtpu.offload.engine import OffloadEngine, causal_lm_loss

VOCAB = 128


def tiny_hf_llama(layers: int = 4, hidden: int = 64, seed: int = 0) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=hidden, intermediate_size=2 * hidden,
                      num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=64)
    return LlamaForCausalLM(cfg)


def make_steps(steps: int, micro: int, batch: int = 2, seq: int = 16, seed: int = 1,
               repeat: bool = False):
    """`steps` lists of `micro` (ids, labels) micro-batches; `repeat`: the same list each step."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(steps):
        if repeat and out:
            out.append(out[0])
            continue
        mbs = []
        for _ in range(micro):
            ids = torch.randint(0, VOCAB, (batch, seq), generator=g)
            mbs.append((ids, ids.clone()))
        out.append(mbs)
    return out


def train_plain(model: torch.nn.Module, steps, cfg: OffloadConfig,
                logits: Callable = lambda m, ids: m(ids).logits) -> list[float]:
    """Ordinary training: full autograd graph, torch.optim.AdamW, clip_grad_norm_.

    fp32 master weights are stepped by PyTorch's fused AdamW kernel in the streamed trainer,
    so the reference uses it too (the per-op AdamW rounds the last bit differently).
    """
    fused = cfg.weights_dtype == torch.float32 and next(model.parameters()).dtype == torch.float32
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=cfg.betas, eps=cfg.eps,
                            weight_decay=cfg.weight_decay, fused=fused)
    losses = []
    for mbs in steps:
        total = 0.0
        for ids, labels in mbs:
            loss = causal_lm_loss(logits(model, ids), labels) / len(mbs)
            loss.backward()
            total += loss.item()
        if cfg.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
        opt.step()
        opt.zero_grad()
        losses.append(total)
    return losses


def train_streamed(model: torch.nn.Module, steps, cfg: OffloadConfig, device: str = "cpu",
                   **kw) -> tuple[list[float], OffloadEngine]:
    batch, seq = steps[0][0][0].shape
    eng = OffloadEngine(model, device, cfg, batch=batch, seq=seq, micro_batches=len(steps[0]),
                        **kw)
    losses = [eng.train_step(mbs).loss for mbs in steps]
    eng.synchronize()
    return losses, eng


def assert_same_weights(a: torch.nn.Module, b: torch.nn.Module, rtol: float = 1e-5) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        err = ((sa[k] - sb[k]).norm() / sb[k].norm()).item()
        assert err <= rtol, f"{k}: relative error {err:.3g}"
