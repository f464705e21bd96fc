"""logspace, and the functional copy (into a fresh tensor's shape).

PyTorch's CPU logspace reads the endpoints as the output dtype, takes the step in float64 and
raises a float64 base to float64 exponents, rounding each power once to the output dtype.
"""

from __future__ import annotations

import jax.numpy as jnp
import torch

from .dtypes import range_dtype, scalar_to
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
    dt = range_dtype(dtype, start, end)
    ct = jnp.complex128 if jnp.issubdtype(dt, jnp.complexfloating) else jnp.float64
    base = jnp.asarray(base, ct)
    if steps == 1:
        return scalar_to(jnp.power(base, jnp.asarray(start, ct)), dt).reshape(1)
    first, last = scalar_to(start, dt), scalar_to(end, dt)
    step = (last - first).astype(ct) / (steps - 1)
    i = jnp.arange(steps, dtype=ct)
    exponent = jnp.where(i.real < steps // 2, first.astype(ct) + step * i,
                         last.astype(ct) - step * (steps - 1 - i))
    return scalar_to(jnp.power(base, exponent), dt)
