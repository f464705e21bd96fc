"""Printing tpu tensors: format a host copy, as PyTorch does for cuda."""

from __future__ import annotations

import torch


def tensor_repr(t: torch.Tensor) -> str:
    with torch._C.DisableTorchFunctionSubclass():
        host = t.detach().cpu()
    text = torch._tensor_str._str(host)
    suffix = f"device='{t.device}'"
    if text.endswith(")"):
        if t.requires_grad and "grad_fn" not in text:
            grad = (f", grad_fn=<{type(t.grad_fn).__name__}>" if t.grad_fn
                    else ", requires_grad=True")
        else:
            grad = ""
        return f"{text[:-1]}, {suffix}{grad})"
    return text
