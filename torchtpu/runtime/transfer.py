"""Host <-> device transfers between CPU torch tensors and jax arrays."""

from __future__ import annotations

import jax
import numpy as np
import torch

from ..ops.dtypes import to_jax_dtype, to_torch_dtype
from .platform import init

# torch cannot hand numpy bfloat16 or float8 (ml_dtypes' types): move them as their bits.
_BITS = {torch.bfloat16: (torch.int16, np.int16),
         **{dtype: (torch.uint8, np.uint8) for dtype in (
             torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz,
             torch.float8_e5m2fnuz)}}


# Dynamo must not compile the frames JAX's device_put runs (one is a dataclass's generated
# __init__, which no skip list names): a constant made while tracing, torch.tensor(...,
# device="tpu"), is copied in for real. compile/dynamo_tensor.py wraps it once Dynamo is used.
device_put = jax.device_put


def to_device(t: torch.Tensor) -> jax.Array:
    """Copy a CPU tensor to the device."""
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    shape = tuple(t.shape)
    if len(shape) > 32:
        t = t.reshape(-1)  # numpy stops at 64 dimensions, PyTorch and XLA do not
    bits = _BITS.get(t.dtype)
    if bits is not None:
        host = t.contiguous().view(bits[0]).numpy().view(to_jax_dtype(t.dtype))
    else:
        host = t.numpy()
    device = init()
    if device.platform == "cpu":
        # jax's CPU client wraps an aligned numpy array without copying (may_alias=False does
        # not stop it): a later in-place write to the CPU tensor would show through on tpu.
        host = host.copy()
    out = device_put(host, device)
    return out if out.shape == shape else out.reshape(shape)


def to_host(a: jax.Array) -> torch.Tensor:
    """Copy a device array to a new CPU tensor."""
    dtype = to_torch_dtype(a.dtype)
    host = np.asarray(a)
    bits = _BITS.get(dtype)
    if bits is not None:
        return torch.from_numpy(host.view(bits[1]).copy()).view(dtype)
    return torch.from_numpy(np.array(host, copy=True))
