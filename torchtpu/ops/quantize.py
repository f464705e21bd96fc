"""Fake quantization (quantization-aware training): values rounded to a quantized grid and
back, with the mask of those inside it that their backward passes gradients through.

The formulas are CPU's kernels': ``q = zero_point + nearbyint(x * (1 / scale))`` in float32,
clamped to [quant_min, quant_max], then ``(q - zero_point) * scale``.
"""

from __future__ import annotations

import jax.numpy as jnp
import torch

from .registry import lowering

aten = torch.ops.aten


def _check_range(quant_min: int, quant_max: int) -> None:
    if quant_min > quant_max:
        raise RuntimeError("`quant_min` should be less than or         equal to `quant_max`.")


def _fake_quantized(x, scale, zero_point, quant_min: int, quant_max: int):
    """(output, mask) for scale (float32) and zero_point broadcast against x."""
    inv_scale = jnp.float32(1) / scale.astype(jnp.float32)
    q = zero_point + jnp.round(x.astype(jnp.float32) * inv_scale)  # round half to even
    out = (jnp.clip(q, quant_min, quant_max) - zero_point) * scale
    return out.astype(x.dtype), (q >= quant_min) & (q <= quant_max)


# zero_point static: CPU checks its value (scale is passed at run time: a new one each step
# recompiles nothing).
@lowering(aten.fake_quantize_per_tensor_affine_cachemask, static=("zero_point",))
def _per_tensor(self, scale, zero_point, quant_min, quant_max):
    _check_range(quant_min, quant_max)
    if not quant_min <= zero_point <= quant_max:
        raise RuntimeError("`zero_point` must be between `quant_min` and `quant_max`.")
    return _fake_quantized(self, jnp.asarray(scale, jnp.float32), jnp.float32(zero_point),
                           quant_min, quant_max)


@lowering(aten._fake_quantize_per_tensor_affine_cachemask_tensor_qparams)
def _per_tensor_qparams(self, scale, zero_point, fake_quant_enabled, quant_min, quant_max):
    _check_range(quant_min, quant_max)
    out, mask = _fake_quantized(self, scale.reshape(()), zero_point.reshape(()).astype(
        jnp.float32), quant_min, quant_max)
    enabled = fake_quant_enabled.reshape(()) >= 1
    return jnp.where(enabled, out, self), mask | ~enabled


@lowering(aten.fake_quantize_per_channel_affine_cachemask)
def _per_channel(self, scale, zero_point, axis, quant_min, quant_max):
    _check_range(quant_min, quant_max)
    if scale.shape != zero_point.shape:
        raise RuntimeError("scale and zero-point need to have the same dimensions")
    axis = axis % self.ndim
    shape = [1] * self.ndim
    shape[axis] = -1
    zp = zero_point.reshape(shape).astype(jnp.float32)
    if jnp.issubdtype(zero_point.dtype, jnp.integer):
        return _fake_quantized(self, scale.reshape(shape), zp, quant_min, quant_max)
    # A float zero_point (CPU takes float and half ones too) is added before rounding.
    inv_scale = jnp.float32(1) / scale.reshape(shape).astype(jnp.float32)
    q = jnp.round(self.astype(jnp.float32) * inv_scale + zp)
    out = (jnp.clip(q, quant_min, quant_max) - zp) * scale.reshape(shape)
    return out.astype(self.dtype), (q >= quant_min) & (q <= quant_max)
