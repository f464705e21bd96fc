"""AMP's loss-scaling ops (``torch.amp.GradScaler``): unscale gradients while checking for
infs/NaNs, and grow or back off the scale, as PyTorch's CPU and CUDA kernels do."""

from __future__ import annotations

import jax.numpy as jnp
import torch

from .registry import lowering

aten = torch.ops.aten


@lowering(aten._amp_foreach_non_finite_check_and_unscale)
def _unscale(grads, found_inf, inv_scale):
    # found_inf is only ever set (to 1), never cleared; the grads are unscaled either way.
    bad = jnp.zeros((), jnp.bool_)
    for g in grads:
        bad = bad | ~jnp.all(jnp.isfinite(g))
    out = [(g.astype(jnp.float32) * inv_scale.astype(jnp.float32)).astype(g.dtype)
           if g.dtype in (jnp.bfloat16, jnp.float16) else g * inv_scale.astype(g.dtype)
           for g in grads]
    return out, jnp.where(bad, jnp.ones_like(found_inf), found_inf)


@lowering(aten._amp_update_scale, static=("growth_interval",))
def _update_scale(scale, growth_tracker, found_inf, scale_growth_factor, scale_backoff_factor,
                  growth_interval):
    inf = found_inf.reshape(()) != 0
    successful = growth_tracker + 1
    grow = successful == growth_interval
    # CPU multiplies the float scale by the double factor and rounds once.
    wide = scale.astype(jnp.float64)
    grown = (wide * scale_growth_factor).astype(scale.dtype)
    kept = jnp.where(grow & jnp.isfinite(grown), grown, scale)
    new_scale = jnp.where(inf, (wide * scale_backoff_factor).astype(scale.dtype), kept)
    tracker = jnp.where(inf | grow, jnp.zeros_like(growth_tracker), successful)
    return new_scale, tracker.astype(growth_tracker.dtype)
