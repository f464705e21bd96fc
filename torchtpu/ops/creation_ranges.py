"""logspace, and the functional copy (into a fresh tensor's shape).

PyTorch's CPU logspace reads the endpoints as the output dtype, takes the step in float64 and
raises a float64 base to float64 exponents, rounding each power once to the output dtype.
"""

from __future__ import annotations

import jax.numpy as jnp
import torch

from .dtypes import default_float, scalar_to, to_jax_dtype
from .registry import lowering

aten = torch.ops.aten


@lowering(aten.copy)
def _copy(self, src, non_blocking=False):
    return jnp.broadcast_to(src.astype(self.dtype), self.shape)


# The meta kernel cannot tell a 0-d tensor endpoint from a traced Python scalar; the rule makes
# PyTorch's one check itself.
@lowering(aten.logspace.default, aten.logspace.Tensor_Tensor, aten.logspace.Tensor_Scalar,
          aten.logspace.Scalar_Tensor, skip_meta=True)
def _logspace(start, end, steps, base=10.0, *, dtype=None, layout=None, device=None,
              pin_memory=None):
    for x in (start, end):
        if jnp.ndim(x) != 0:
            raise RuntimeError("logspace only supports 0-dimensional start and end tensors, "
                               f"but got a tensor with {jnp.ndim(x)} dimension(s).")
    dt = to_jax_dtype(dtype) if dtype is not None else default_float()
    base = jnp.float64(base)
    if steps == 1:
        return scalar_to(jnp.power(base, jnp.asarray(start, jnp.float64)), dt).reshape(1)
    first, last = scalar_to(start, dt), scalar_to(end, dt)
    step = (last - first).astype(jnp.float64) / (steps - 1)
    i = jnp.arange(steps, dtype=jnp.float64)
    exponent = jnp.where(i < steps // 2, first.astype(jnp.float64) + step * i,
                         last.astype(jnp.float64) - step * (steps - 1 - i))
    return scalar_to(jnp.power(base, exponent), dt)
