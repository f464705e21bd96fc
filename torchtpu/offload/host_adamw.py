"""AdamW on a group's flat host buffers, the same arithmetic as `torch.optim.AdamW`.

fp32 master weights take PyTorch's fused CPU AdamW kernel (`torch.optim.AdamW(fused=True)`):
one vectorised pass over the four buffers, about 7x faster than the per-op update, and the
host optimizer is what bounds a streamed step on a fast device. bf16 master weights take the
per-op update on fp32 copies, chunk by chunk so the temporaries stay small and cache-resident
(the update is elementwise, so chunking does not change a single bit of the result).
"""

from __future__ import annotations

import torch

from torchtpu.offload.config import OffloadConfig
from torchtpu.offload.store import HostGroup

CHUNK = 1 << 22


def grad_norms(group: HostGroup) -> list[torch.Tensor]:
    """Per-parameter L2 norms of the group's gradient, as `clip_grad_norm_` computes them."""
    return [torch.linalg.vector_norm(g) for g in group.layout.views(group.grads)]


def clip_coef(norms: list[torch.Tensor], max_norm: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(total norm, scale) with `clip_grad_norm_`'s arithmetic, so clipped runs match it bitwise.

    `norms` must be in the model's parameter order: the stack's order changes the rounding.
    """
    total = torch.linalg.vector_norm(torch.stack(norms))
    return total, torch.clamp(max_norm / (total + 1e-6), max=1.0)


def adamw_step(group: HostGroup, cfg: OffloadConfig, lr: float,
               grad_scale: torch.Tensor | None = None) -> None:
    """One AdamW step on `group`; `grad_scale` multiplies the gradient first (clipping)."""
    group.step += 1
    beta1, beta2 = cfg.betas
    if group.weights.dtype == torch.float32:
        if grad_scale is not None:
            group.grads.mul_(grad_scale)
        torch._fused_adamw_([group.weights], [group.grads], [group.exp_avg],
                            [group.exp_avg_sq], [], [torch.tensor(float(group.step))], lr=lr,
                            beta1=beta1, beta2=beta2, weight_decay=cfg.weight_decay,
                            eps=cfg.eps, amsgrad=False, maximize=False)
        return
    bias_correction1 = 1 - beta1 ** group.step
    bias_correction2_sqrt = (1 - beta2 ** group.step) ** 0.5
    step_size = lr / bias_correction1
    upcast = group.weights.dtype != torch.float32
    n = group.weights.numel()
    for start in range(0, n, CHUNK):
        sl = slice(start, min(start + CHUNK, n))
        w, g = group.weights[sl], group.grads[sl]
        m, v = group.exp_avg[sl], group.exp_avg_sq[sl]
        p = w.float() if upcast else w
        if grad_scale is not None:
            g.mul_(grad_scale)
        if cfg.weight_decay != 0:
            p.mul_(1 - lr * cfg.weight_decay)
        m.lerp_(g, 1 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        denom = (v.sqrt() / bias_correction2_sqrt).add_(cfg.eps)
        p.addcdiv_(m, denom, value=-step_size)
        if upcast:
            w.copy_(p)
