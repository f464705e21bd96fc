"""Printing tpu tensors: format a host copy, as PyTorch does for xla tensors."""

from __future__ import annotations

import threading

import torch
import torch._tensor_str
from torch.utils._python_dispatch import _disable_current_modes

_printing = threading.local()  # the suffixes of the tpu tensor this thread is printing
_add_suffixes = torch._tensor_str._add_suffixes


def _add_suffixes_of_the_device_tensor(tensor_str, suffixes, indent, force_newline):
    first, last = getattr(_printing, "suffixes", ([], []))
    return _add_suffixes(tensor_str, first + suffixes + last, indent, force_newline)


torch._tensor_str._add_suffixes = _add_suffixes_of_the_device_tensor


def tensor_repr(t: torch.Tensor) -> str:
    """PyTorch's repr of ``t``'s host copy, with the suffixes of ``t`` itself: the device
    first (as cuda's), its autograd state last (the copy is detached), wrapped as PyTorch
    wraps them."""
    if t.grad_fn is not None:
        grad = [f"grad_fn=<{type(t.grad_fn).__name__}>"]
    else:
        grad = ["requires_grad=True"] if t.requires_grad else []
    _printing.suffixes = [f"device='{t.device}'"], grad
    try:
        # As PyTorch's _str: the host copy is no op of the program's, so neither a dispatch
        # mode nor a torch.func transform (which would wrap a captured tensor) sees it.
        with (torch._C.DisableTorchFunctionSubclass(), _disable_current_modes(),
              torch._C._DisableFuncTorch()):
            host = t.detach().cpu()
            user_class = getattr(type(t), "_user_class", None)  # printed by its name
            if user_class is not None:
                host = host.as_subclass(user_class)
            return torch._tensor_str._str(host)
    finally:
        del _printing.suffixes
