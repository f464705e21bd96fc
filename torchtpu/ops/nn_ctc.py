"""Connectionist temporal classification loss (_ctc_loss): the forward (alpha) recursion of
Graves et al. (2006) over the target interleaved with blanks, in log space, as PyTorch's CPU
kernel runs it (the same three-term log-sum-exp with its running maximum)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import torch
from jax import lax

from ..runtime.execute import executable
from .registry import lowering

aten = torch.ops.aten


def _extended_targets(targets, target_lengths, blank: int, width: int):
    """(N, width): blank at even positions, the s//2-th label at odd ones."""
    n = target_lengths.shape[0]
    s = jnp.arange(width)
    label = (s - 1) // 2
    if targets.ndim == 1:  # concatenated targets
        starts = jnp.cumsum(target_lengths) - target_lengths
        pos = jnp.clip(starts[:, None] + label[None, :], 0, max(targets.shape[0] - 1, 0))
        labels = targets[pos] if targets.shape[0] else jnp.zeros((n, width), targets.dtype)
    else:
        pos = jnp.clip(label, 0, max(targets.shape[1] - 1, 0))
        labels = targets[:, pos] if targets.shape[1] else jnp.zeros((n, width), targets.dtype)
    return jnp.where(s % 2 == 1, labels, blank).astype(jnp.int64)


def _ctc(log_probs, targets, input_lengths, target_lengths, blank: int, max_target: int):
    t_max, n, _ = log_probs.shape
    width = 2 * max_target + 1
    neg_inf = jnp.asarray(-jnp.inf, log_probs.dtype)
    ext = _extended_targets(targets, target_lengths, blank, width)
    # lp[t, b, s]: the log-probability of extended label s at time t.
    lp = jnp.take_along_axis(log_probs, jnp.broadcast_to(ext[None], (t_max, n, width)), axis=2)
    s = jnp.arange(width)
    valid = s[None, :] < 2 * target_lengths[:, None] + 1
    # A label may follow the one two places back unless the two are the same label.
    skip = (s >= 2) & (ext != jnp.roll(ext, 2, axis=1))
    first = jnp.where((s == 0) | ((s == 1) & (target_lengths[:, None] > 0)), lp[0], neg_inf)

    def step(prev, t):
        la1 = prev
        la2 = jnp.concatenate([jnp.full((n, 1), neg_inf), prev[:, :-1]], axis=1)
        la3 = jnp.where(skip, jnp.concatenate([jnp.full((n, 2), neg_inf), prev[:, :-2]],
                                              axis=1)[:, :width], neg_inf)
        m = jnp.maximum(jnp.maximum(la1, la2), la3)
        m = jnp.where(m == -jnp.inf, 0, m)
        new = jnp.log(jnp.exp(la1 - m) + jnp.exp(la2 - m) + jnp.exp(la3 - m)) + m + lp[t]
        new = jnp.where(valid, new, neg_inf)
        live = (t < input_lengths)[:, None]
        return jnp.where(live, new, prev), jnp.where(live, new, neg_inf)

    last, rows = lax.scan(step, first, jnp.arange(1, t_max))
    log_alpha = jnp.concatenate([first[None], rows], axis=0).transpose(1, 0, 2)
    # The likelihood: paths ending in the last label or the blank after it.
    tl = target_lengths
    l1 = jnp.take_along_axis(last, (2 * tl)[:, None], axis=1)[:, 0]
    l2 = jnp.take_along_axis(last, jnp.maximum(2 * tl - 1, 0)[:, None], axis=1)[:, 0]
    m = jnp.maximum(l1, l2)
    m = jnp.where(m == -jnp.inf, 0, m)
    both = jnp.log(jnp.exp(l1 - m) + jnp.exp(l2 - m)) + m
    nll = -jnp.where(tl == 0, last[:, 0], both)
    return nll, log_alpha


@lowering(aten._ctc_loss.default)
def _ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, zero_infinity=False):
    return _ctc(log_probs, targets, jnp.asarray(input_lengths, jnp.int64),
                jnp.asarray(target_lengths, jnp.int64), blank, max(target_lengths, default=0))


_ctc_jit = executable(static_argnums=(4, 5))(_ctc)


@lowering(aten._ctc_loss.Tensor, eager=True)
def _ctc_loss_tensor(log_probs, targets, input_lengths, target_lengths, blank=0,
                     zero_infinity=False):
    # log_alpha's width follows the longest target: read the lengths, as CPU does.
    max_target = int(np.max(np.asarray(target_lengths), initial=0))
    return _ctc_jit(log_probs, targets, input_lengths.astype(jnp.int64),
                    target_lengths.astype(jnp.int64), blank, max_target)
