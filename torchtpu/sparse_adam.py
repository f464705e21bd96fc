"""``torch.optim.SparseAdam`` for tpu parameters, whose gradients are dense.

tpu has no sparse layouts: ``nn.Embedding(sparse=True)`` gives a dense gradient, zero in
the rows the batch did not look up. SparseAdam "masks out the parameter and moment updates
corresponding to the zero values in the gradients" (PyTorch's own description): here a row
is updated when any of its gradient is nonzero, which is the rows a sparse gradient would
list (a looked-up row whose gradient is exactly zero is the one difference: CPU decays its
moments, here they stay). Each updated row gets CPU's arithmetic, in CPU's order.
"""

from __future__ import annotations

import math

import torch
from torch.optim import SparseAdam
from torch.optim import _functional as F

_sparse_step = SparseAdam.step


@torch.no_grad()
def _step(self, closure=None):
    """SparseAdam.step, taking a tpu parameter's dense gradient as the rows it touches."""
    if not any(_dense_on_tpu(p) for g in self.param_groups for p in g["params"]):
        return _sparse_step(self, closure)
    loss = None
    if closure is not None:
        with torch.enable_grad():
            loss = closure()
    for group in self.param_groups:
        beta1, beta2 = group["betas"]
        options = dict(eps=group["eps"], beta1=beta1, beta2=beta2, lr=float(group["lr"]),
                       maximize=group.get("maximize", False))
        sparse: list[list] = [[], [], [], [], []]
        for p in group["params"]:
            if p.grad is None:
                continue
            if not p.grad.is_sparse and not _dense_on_tpu(p):
                raise RuntimeError("SparseAdam does not support dense gradients, please "
                                   "consider Adam instead")
            state = self.state[p]
            if len(state) == 0:
                state["step"] = 0
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["step"] += 1
            moments = (p, p.grad, state["exp_avg"], state["exp_avg_sq"], state["step"])
            if p.grad.is_sparse:
                for kept, x in zip(sparse, moments, strict=True):
                    kept.append(x)
            else:
                _masked_update(*moments, **options)
        if sparse[0]:
            F.sparse_adam(*sparse, **options)
    return loss


def _dense_on_tpu(p) -> bool:
    return p.grad is not None and p.grad.device.type == "tpu" and not p.grad.is_sparse


def _masked_update(param, grad, exp_avg, exp_avg_sq, step, *, eps, beta1, beta2, lr,
                   maximize) -> None:
    grad = -grad if maximize else grad
    touched = grad.ne(0).flatten(1).any(1) if grad.dim() > 1 else grad.ne(0)
    touched = touched.view(-1, *[1] * (grad.dim() - 1))
    # as F.sparse_adam: old += (1 - b) * (new - old), then numer / (sqrt(new_sq) + eps)
    numer = exp_avg + (grad - exp_avg).mul_(1 - beta1)
    squares = exp_avg_sq + (grad.pow(2) - exp_avg_sq).mul_(1 - beta2)
    exp_avg.copy_(torch.where(touched, numer, exp_avg))
    exp_avg_sq.copy_(torch.where(touched, squares, exp_avg_sq))
    step_size = lr * math.sqrt(1 - beta2**step) / (1 - beta1**step)
    update = -step_size * numer.div_(squares.sqrt_().add_(eps))
    param.add_(torch.where(touched, update, torch.zeros((), dtype=update.dtype,
                                                          device=update.device)))


def install() -> None:
    if SparseAdam.step is _sparse_step:
        SparseAdam.step = _step
