"""Discrete Fourier transforms: the three ATen primitives every torch.fft function reaches."""

from __future__ import annotations

import math

import jax.numpy as jnp
import torch

from .registry import lowering

aten = torch.ops.aten


def _normalize(out, sizes, normalization: int):
    """PyTorch's fft_norm_mode: 0 none, 1 by 1/sqrt(n) ("ortho"), 2 by 1/n."""
    n = math.prod(sizes)
    if normalization == 1:
        return out * (1 / math.sqrt(n))
    if normalization == 2:
        return out * (1 / n)
    return out


def _complex(x):
    return x if jnp.iscomplexobj(x) else x.astype(jnp.result_type(x.dtype, jnp.complex64))


@lowering(aten._fft_r2c)
def _fft_r2c(self, dim, normalization, onesided):
    dim = tuple(d % self.ndim for d in dim)
    if onesided:
        out = jnp.fft.rfftn(self, axes=dim)
    else:
        out = jnp.fft.fftn(_complex(self), axes=dim)
    return _normalize(out, [self.shape[d] for d in dim], normalization)


@lowering(aten._fft_c2c)
def _fft_c2c(self, dim, normalization, forward):
    dim = tuple(d % self.ndim for d in dim)
    sizes = [self.shape[d] for d in dim]
    if forward:
        out = jnp.fft.fftn(self, axes=dim)
    else:
        # jnp's inverse divides by n; PyTorch's primitive leaves scaling to `normalization`.
        out = jnp.fft.ifftn(self, axes=dim) * math.prod(sizes)
    return _normalize(out, sizes, normalization)


@lowering(aten._fft_c2r)
def _fft_c2r(self, dim, normalization, last_dim_size):
    dim = tuple(d % self.ndim for d in dim)
    sizes = [self.shape[d] for d in dim[:-1]] + [last_dim_size]
    out = jnp.fft.irfftn(self, s=sizes, axes=dim) * math.prod(sizes)
    return _normalize(out, sizes, normalization)
