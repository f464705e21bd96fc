"""_trilinear (nn.functional.bilinear's kernel) and _pdist_forward: products and distances
between the rows of their operands.

_pdist_backward follows CPU's per-norm formulas (``DistanceOpsKernel.cpp``) rather than the
forward's VJP: they differ where the VJP is undefined, and CPU's choice holds there (a zero
distance gives a zero gradient, not a NaN; every coordinate attaining an inf-norm distance
gets the whole gradient).
"""

from __future__ import annotations

import string

import jax.numpy as jnp
import numpy as np
import torch
from jax import lax

from .registry import lowering

aten = torch.ops.aten


@lowering(aten._trilinear)
def _trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim=1):
    """Each input unsqueezed at its expand dims, multiplied, and summed over sumdim: like
    CPU, i1 times i2 first (summing the dims i3 lacks), rounded, then times i3."""
    total = i1.ndim + len(expand1)
    letters = string.ascii_letters[:total]

    def dims(expand):
        return [d for d in range(total) if d not in expand]

    def spec(ds):
        return "".join(letters[d] for d in ds)

    first_sum = {d for d in sumdim if d in expand3}
    d12 = [d for d in range(total) if d in set(dims(expand1)) | set(dims(expand2))]
    kept12 = [d for d in d12 if d not in first_sum]
    product = jnp.einsum(f"{spec(dims(expand1))},{spec(dims(expand2))}->{spec(kept12)}",
                         i1, i2, precision=lax.Precision.HIGHEST).astype(i1.dtype)
    present = set(kept12) | set(dims(expand3))
    out_dims = [d for d in range(total) if d not in sumdim]
    out_present = [d for d in out_dims if d in present]
    out = jnp.einsum(f"{spec(kept12)},{spec(dims(expand3))}->{spec(out_present)}",
                     product, i3, precision=lax.Precision.HIGHEST)
    # A dimension every input was expanded along has size one.
    return out.reshape(tuple(out.shape[out_present.index(d)] if d in present else 1
                             for d in out_dims))


@lowering(aten._pdist_forward)
def _pdist_forward(self, p=2):
    n = self.shape[0]
    i, j = np.triu_indices(n, 1)
    diff = jnp.abs(self[i] - self[j])
    if p == 0:
        return jnp.sum(diff != 0, axis=-1).astype(self.dtype)
    if p == float("inf"):
        return jnp.max(diff, axis=-1, initial=0)
    if p == 1:
        return jnp.sum(diff, axis=-1)
    if p == 2:
        return jnp.sqrt(jnp.sum(diff * diff, axis=-1))
    return jnp.sum(diff**p, axis=-1) ** (1.0 / p)


@lowering(aten._pdist_backward)
def _pdist_backward(grad, self, p, pdist):
    n = self.shape[0]
    if p == 0 or n < 2:  # the 0-"norm" counts differences: flat everywhere
        return jnp.zeros_like(self)
    i, j = np.triu_indices(n, 1)
    diff = self[i] - self[j]
    g, dist = grad[:, None], pdist[:, None]
    sign = jnp.sign(diff)
    if p == 1:
        term = sign * g
    elif p == float("inf"):
        # 1 where the coordinate's |diff| is the distance, else 0 (CPU's ceil formula)
        at_max = 1 - jnp.minimum(1, jnp.ceil(jnp.abs(jnp.abs(diff) - dist)))
        term = g * sign * at_max
    elif p == 2:
        term = jnp.where(dist == 0, 0, g * diff / dist)
    elif p < 2:
        term = sign * jnp.abs(diff) ** (p - 1) * g / dist ** (p - 1)
        term = jnp.where((dist == 0) | ((diff == 0) & (p < 1)), 0, term)
    else:
        term = jnp.where(dist == 0, 0, diff * jnp.abs(diff) ** (p - 2) * g / dist ** (p - 1))
    term = term.astype(self.dtype)
    return jnp.zeros_like(self).at[i].add(term).at[j].add(-term)
