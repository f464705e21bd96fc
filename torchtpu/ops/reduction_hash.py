"""hash_tensor: the XOR of the elements' bit patterns, as PyTorch's CPU kernel reads them
(floating values widened to float64, integers to int64, bools as 0 or 1)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import torch
from jax import lax

from .registry import lowering

aten = torch.ops.aten


def _bits(x):
    if jnp.issubdtype(x.dtype, jnp.floating):
        return lax.bitcast_convert_type(x.astype(jnp.float64), jnp.uint64)
    return x.astype(jnp.int64).astype(jnp.uint64)


@lowering(aten.hash_tensor)
def _hash_tensor(self, dim=(), *, keepdim=False, mode=0):
    axes = tuple(range(self.ndim)) if not dim else tuple(d % max(self.ndim, 1) for d in dim)
    axes = tuple(a for a in axes if a < self.ndim)  # a 0-d input reduces over nothing
    out = lax.reduce(_bits(self), np.uint64(0), lax.bitwise_xor, axes)
    if keepdim:
        out = out.reshape(tuple(1 if i in axes else n for i, n in enumerate(self.shape)))
    return out
