"""Activations that draw random numbers: rrelu (randomized leaky ReLU).

In training each non-positive input is scaled by its own slope drawn uniformly from
[lower, upper], and ``noise`` records the slopes (1 where the input is positive); in
evaluation the slope is their mean and ``noise`` is left as it is.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from ..runtime.execute import executable
from .random import _key, _next, _sample_dtype
from .registry import lowering

aten = torch.ops.aten


@executable()
def _rrelu_train(seed, counter, x, lower, upper):
    slope = jax.random.uniform(_key(seed, counter), x.shape, _sample_dtype(x.dtype),
                               lower, upper)
    negative = x <= 0
    out = jnp.where(negative, x * slope, x).astype(x.dtype)
    return out, jnp.where(negative, slope, 1).astype(x.dtype)


@executable()
def _rrelu_eval(x, noise, lower, upper):
    slope = (lower + upper) / 2
    return jnp.where(x >= 0, x, x * slope).astype(x.dtype), noise


@lowering(aten.rrelu_with_noise_functional, eager=True, records=True)
def _rrelu_with_noise_functional(self, noise, lower=0.125, upper=1 / 3, training=False,
                                 generator=None):
    if training:
        return _rrelu_train(*_next(generator), self, lower, upper)
    return _rrelu_eval(self, noise, lower, upper)
