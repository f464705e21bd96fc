"""Connectionist temporal classification loss (_ctc_loss): the forward (alpha) recursion of
Graves et al. (2006) over the target interleaved with blanks, in log space, as PyTorch's CPU
kernel runs it (the same three-term log-sum-exp with its running maximum).

The backward runs the backward (beta) recursion as CPU's kernel does (LossCTC.cpp) and gives
its answer, which is not the derivative of the loss with respect to log_probs: CPU adds
exp(log_probs), the term log_softmax's backward would otherwise contribute, so the result is
the gradient with respect to the logits when log_probs came from log_softmax. The forward's
VJP would also give NaN at states no path reaches (log of a zero sum).
"""

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


def _lattice(log_probs, targets, target_lengths, blank: int, width: int):
    """The extended targets (N, width); lp[t, b, s], the log-probability of extended label s
    at time t; which states lie within each target; and where a label may follow the one two
    places back (unless the two are the same label)."""
    t_max, n, _ = log_probs.shape
    ext = _extended_targets(targets, target_lengths, blank, width)
    lp = jnp.take_along_axis(log_probs, jnp.broadcast_to(ext[None], (t_max, n, width)), axis=2)
    s = jnp.arange(width)
    valid = s[None, :] < 2 * target_lengths[:, None] + 1
    skip = (s >= 2) & (ext != jnp.roll(ext, 2, axis=1))
    return ext, lp, valid, skip


def _log_sum3(a, b, c):
    """log(exp(a) + exp(b) + exp(c)) about their maximum (0 where all are -inf), as CPU."""
    m = jnp.maximum(jnp.maximum(a, b), c)
    m = jnp.where(m == -jnp.inf, 0, m)
    return jnp.log(jnp.exp(a - m) + jnp.exp(b - m) + jnp.exp(c - m)) + m


def _ctc(log_probs, targets, input_lengths, target_lengths, blank: int, max_target: int):
    t_max, n, _ = log_probs.shape
    width = 2 * max_target + 1
    neg_inf = jnp.asarray(-jnp.inf, log_probs.dtype)
    ext, lp, valid, skip = _lattice(log_probs, targets, target_lengths, blank, width)
    s = jnp.arange(width)
    first = jnp.where((s == 0) | ((s == 1) & (target_lengths[:, None] > 0)), lp[0], neg_inf)

    def step(prev, t):
        la1 = prev
        la2 = jnp.concatenate([jnp.full((n, 1), neg_inf), prev[:, :-1]], axis=1)
        la3 = jnp.where(skip, jnp.concatenate([jnp.full((n, 2), neg_inf), prev[:, :-2]],
                                              axis=1)[:, :width], neg_inf)
        new = jnp.where(valid, _log_sum3(la1, la2, la3) + lp[t], neg_inf)
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
    # One sample's lengths may be 0-d (ctc_loss on an unbatched input), as CPU reads them.
    return _ctc_jit(log_probs, targets, input_lengths.astype(jnp.int64).reshape(-1),
                    target_lengths.astype(jnp.int64).reshape(-1), blank, max_target)


@lowering(aten._ctc_loss_backward)
def _ctc_loss_backward(grad, log_probs, targets, input_lengths, target_lengths,
                       neg_log_likelihood, log_alpha, blank, zero_infinity=False):
    t_max, n, classes = log_probs.shape
    width = log_alpha.shape[-1]  # 2 * the longest target + 1: no need to read the lengths
    il = jnp.asarray(input_lengths, jnp.int64).reshape(-1)
    tl = jnp.asarray(target_lengths, jnp.int64).reshape(-1)
    neg_inf = jnp.asarray(-jnp.inf, log_probs.dtype)
    ext, lp, valid, skip = _lattice(log_probs, targets, tl, blank, width)
    s = jnp.arange(width)
    # Beta at the last live step: the final blank and the last label.
    last = (s == 2 * tl[:, None]) | ((s == 2 * tl[:, None] - 1) & (tl[:, None] > 0))
    # Going back, a state is reached from itself, the next one, and the one two on where that
    # one may follow it.
    skip_next = jnp.concatenate([skip[:, 2:], jnp.zeros((n, 2), bool)], axis=1)[:, :width]

    def step(nxt, t):
        lb2 = jnp.concatenate([nxt[:, 1:], jnp.full((n, 1), neg_inf)], axis=1)
        lb3 = jnp.where(skip_next, jnp.concatenate([nxt[:, 2:], jnp.full((n, 2), neg_inf)],
                                                   axis=1)[:, :width], neg_inf)
        rec = jnp.where(valid, _log_sum3(nxt, lb2, lb3) + lp[t], neg_inf)
        start = jnp.where(last, lp[t], neg_inf)
        at = t - il[:, None]
        beta = jnp.where(at == -1, start, jnp.where(at < -1, rec, neg_inf))
        return beta, beta

    _, log_beta = lax.scan(step, jnp.full((n, width), neg_inf), jnp.arange(t_max),
                           reverse=True)
    live = jnp.arange(t_max)[:, None] < il[None, :]  # (T, N)
    ab = log_alpha.transpose(1, 0, 2) + log_beta
    ab = jnp.where(live[..., None] & valid[None], ab, neg_inf)
    # log of the summed alpha * beta of the states carrying each class (T, N, C).
    index = jnp.broadcast_to(ext[None], ab.shape)
    t_i, b_i = jnp.arange(t_max)[:, None, None], jnp.arange(n)[None, :, None]
    top = jnp.full((t_max, n, classes), neg_inf).at[t_i, b_i, index].max(ab)
    safe_top = jnp.where(top == -jnp.inf, 0, top)
    total = jnp.zeros_like(top).at[t_i, b_i, index].add(
        jnp.exp(ab - jnp.take_along_axis(safe_top, index, axis=2)))
    lcab = jnp.log(total) + safe_top
    nll = neg_log_likelihood[None, :, None]
    out = (jnp.exp(log_probs) - jnp.exp(lcab + nll - log_probs)) * grad[None, :, None]
    keep = live[..., None]
    if zero_infinity:
        keep = keep & (nll != jnp.inf)
    return jnp.where(keep, out, 0).astype(log_probs.dtype)
