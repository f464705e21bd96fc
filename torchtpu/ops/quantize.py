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


# An fbgemm constant: scales below float16's smallest normal are raised to it.
_SMALL_SCALE = 6.1e-5


def _choose_qparams(low, high, quant_min: int, quant_max: int, symmetric: bool):
    """CPU's ChooseQuantizationParams (quant_utils.h, fbgemm's twin) for float32 bounds:
    the scale (float64 until stored) and the nudged integer zero point."""
    f32, f64 = jnp.float32, jnp.float64
    if symmetric:
        sym_min, sym_max = -((quant_max - quant_min) // 2 + 1), (quant_max - quant_min) // 2
        step = jnp.maximum(jnp.abs(low / f32(sym_min)), jnp.abs(high / f32(sym_max)))
        around_zero = (low < 0) & (high > 0)
        low = jnp.where(around_zero, (step.astype(f64) * sym_min).astype(f32), low)
        high = jnp.where(around_zero, (step.astype(f64) * sym_max).astype(f32), high)
    low, high = jnp.minimum(low, f32(0)), jnp.maximum(high, f32(0))
    span = quant_max - quant_min
    scale = (high.astype(f64) - low.astype(f64)) / span
    scale = jnp.where((scale.astype(f32) == 0) | jnp.isinf(f32(1) / scale.astype(f32)),
                      f64(0.1), scale)
    small = scale < f64(f32(_SMALL_SCALE))
    amplifier = f32(_SMALL_SCALE) / scale.astype(f32)
    low, high = (
        jnp.where(small & (low != 0) & (high != 0), low * amplifier,
                  jnp.where(small & (low != 0) & (high == 0), -f32(_SMALL_SCALE) * span, low)),
        jnp.where(small & (low != 0) & (high != 0), high * amplifier,
                  jnp.where(small & (low == 0), f32(_SMALL_SCALE) * span, high)))
    scale = jnp.where(small, f64(f32(_SMALL_SCALE)), scale)
    from_min, from_max = quant_min - low / scale, quant_max - high / scale
    error_min = abs(quant_min) - jnp.abs(low / scale)
    error_max = abs(quant_max) - jnp.abs(high / scale)
    zero = jnp.where(error_min < error_max, from_min, from_max)
    if symmetric:
        zero = jnp.where((low < 0) & (high > 0), f64((quant_min + quant_max) / 2), zero)
    zero = jnp.where(zero < quant_min, quant_min,
                     jnp.where(zero > quant_max, quant_max, jnp.round(zero)))
    return scale.astype(f32), zero.astype(jnp.int32)


@lowering(aten._fused_moving_avg_obs_fq_helper.default,
          aten._fused_moving_avg_obs_fq_helper_functional.default)
def _observe_and_fake_quantize(self, observer_on, fake_quant_on, running_min, running_max,
                               scale, zero_point, averaging_const, quant_min, quant_max,
                               ch_axis, per_row_fake_quant=False, symmetric_quant=False):
    """FusedMovingAvgObsFakeQuantize: the moving-average min/max observer, its qparams and
    the fake-quantized input in one op; returns (output, mask) and the new observer state."""
    if per_row_fake_quant:
        raise NotImplementedError(
            "torchtpu: per-channel FusedMovingAvgObsFakeQuantize (the op resizes its observer "
            "state) is not supported on tpu; use FakeQuantize with "
            "MovingAveragePerChannelMinMaxObserver")
    x = self.astype(jnp.float32)
    low, high = running_min.reshape(()), running_max.reshape(())
    c = jnp.float32(averaging_const)
    moved = (jnp.where(jnp.isinf(low), jnp.min(x), low + c * (jnp.min(x) - low)),
             jnp.where(jnp.isinf(high), jnp.max(x), high + c * (jnp.max(x) - high)))
    observe = observer_on.reshape(-1)[0] != 0
    low, high = jnp.where(observe, moved[0], low), jnp.where(observe, moved[1], high)
    new_scale, new_zero = _choose_qparams(low, high, quant_min, quant_max, symmetric_quant)
    quantize = fake_quant_on.reshape(-1)[0] != 0
    out, mask = _fake_quantized(self, new_scale, new_zero.astype(jnp.float32), quant_min,
                                quant_max)
    scale = jnp.where(quantize, new_scale, scale.reshape(()).astype(jnp.float32))
    zero_point = jnp.where(quantize, new_zero, zero_point.reshape(()).astype(jnp.int32))
    return (jnp.where(quantize, out, self), mask | ~quantize,
            low.reshape(running_min.shape), high.reshape(running_max.shape),
            scale.reshape(-1).astype(jnp.float32), zero_point.reshape(-1).astype(jnp.int32))
