"""vmap batching rules that replace functorch's where those cannot serve a Python backend.

functorch's C++ rules for linspace/logspace with one Scalar end turn the Scalar into a
*wrapped number* on the other end's device. A wrapped number reaching a Python kernel is
converted back to a Python scalar, which PyTorch allows only on the CPU: on tpu the next op
(``expand``) fails an internal assert. These rules make the Scalar an ordinary 0-d tensor
of the dtype the wrapped number has (double, long, complex double or bool), then take the
Tensor_Tensor rule. functorch's rule expands the wrapped number before using it (an expand
is no longer a wrapped number), so values and dtypes are those of its own rule, CPU's
included.
"""

from __future__ import annotations

import warnings

import torch

aten = torch.ops.aten

_lib: torch.library.Library | None = None


def _scalar_to_tensor(value, device) -> torch.Tensor:
    """ATen's scalar_to_tensor: a Python number's widest dtype of its kind."""
    if isinstance(value, (bool, torch.SymBool)):
        dtype = torch.bool
    elif isinstance(value, complex):
        dtype = torch.complex128
    elif isinstance(value, (float, torch.SymFloat)):
        dtype = torch.float64
    else:
        dtype = torch.int64
    return torch.scalar_tensor(value, dtype=dtype, device=device)


def _with_tensor_ends(tensor_tensor):
    def tensor_scalar(start, end, *args, **kwargs):
        return tensor_tensor(start, _scalar_to_tensor(end, start.device), *args, **kwargs)

    def scalar_tensor(start, end, *args, **kwargs):
        return tensor_tensor(_scalar_to_tensor(start, end.device), end, *args, **kwargs)

    return tensor_scalar, scalar_tensor


def register() -> None:
    global _lib
    if _lib is not None:
        return
    _lib = torch.library.Library("aten", "IMPL", "FuncTorchBatched")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "overriding a previously registered kernel"
        for packet in (aten.linspace, aten.logspace):
            tensor_scalar, scalar_tensor = _with_tensor_ends(packet.Tensor_Tensor)
            _lib.impl(packet.Tensor_Scalar, tensor_scalar)
            _lib.impl(packet.Scalar_Tensor, scalar_tensor)
