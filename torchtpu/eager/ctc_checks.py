"""CPU's ctc_loss argument checks (its ``ctc_loss_allocate_outputs``), in its order: on lengths
the host holds or strict eager reads, or, in fused eager, computed beside the loss and read at
the sync point that runs it (deferred_checks), as for out-of-range indices."""

from __future__ import annotations

from functools import partial

import jax.numpy as jnp
import numpy as np

from ..runtime.execute import executable
from . import deferred_checks
from .call_site import user_line

_CTC = " (while checking arguments for ctc_loss_allocate_outputs)"


def _shapes(log_probs_shape, targets_shape) -> tuple[list, list]:
    """The shapes as PyTorch's composite passes them: an unbatched input gains its batch."""
    if len(log_probs_shape) == 3:
        return list(log_probs_shape), list(targets_shape)
    return [*log_probs_shape[:1], 1, *log_probs_shape[1:]], [1, *targets_shape]


def _check_shapes(lp: list, tg: list, lengths_sizes: tuple[int, int], blank: int) -> None:
    """The checks that read no length's value, which CPU makes first."""
    if len(lp) != 3:
        raise RuntimeError(f"Expected 3-dimensional tensor, but got {len(lp)}-dimensional "
                           f"tensor for argument #1 'log_probs'{_CTC}")
    if not 1 <= len(tg) <= 2:
        raise RuntimeError(f"Expected 1 to 2 dimensions, but got {len(tg)}-dimensional tensor "
                           f"for argument #2 'targets'{_CTC}")
    if not 0 <= blank < lp[2]:
        raise RuntimeError("blank must be in label range")
    for name, size in zip(("input_lengths", "target_lengths"), lengths_sizes, strict=True):
        if size != lp[1]:
            raise RuntimeError(f"{name} must be of size batch_size")


def _faults(xp, input_lengths, target_lengths, t_max: int, targets_shape: tuple):
    """Each value check's (failed, the value its message names), in CPU's order: a negative
    target length, targets' first size, a target length past targets' second size, an input
    length outside [0, t_max]. ``xp``: numpy on the host, jax.numpy in a program; the batch
    is not empty."""
    il, tl = input_lengths, target_lengths
    negative = tl < 0
    want = tl.sum() if len(targets_shape) == 1 else xp.asarray(il.shape[0])
    longest = tl.max()
    outside = (il < 0) | (il > t_max)
    failed = xp.stack([negative.any(), want != targets_shape[0],
                       (longest > targets_shape[1]) if len(targets_shape) == 2
                       else xp.asarray(False), outside.any()])
    values = xp.stack([tl[xp.argmax(negative)], want, longest, il[xp.argmax(outside)]])
    return failed, values


def _error(t_max: int, targets_shape: tuple, which: int, value: int) -> RuntimeError:
    if which == 0:
        message = f"Expected target_lengths to have value at least 0, but got value {value}"
    elif which == 1:
        message = (f"Expected tensor to have size {value} at dimension 0, but got size "
                   f"{targets_shape[0]} for argument #2 'targets'")
    elif which == 2:
        message = (f"Expected tensor to have size at least {value} at dimension 1, but got "
                   f"size {targets_shape[1]} for argument #2 'targets'")
    else:
        bound = "at least 0" if value < 0 else f"at most {t_max}"
        message = f"Expected input_lengths to have value {bound}, but got value {value}"
    return RuntimeError(message + _CTC)


def ctc_check(log_probs_shape, targets_shape, input_lengths, target_lengths, blank: int) -> None:
    """CPU's checks of lengths the host holds (a list, a CPU tensor, tpu ones read)."""
    lp, tg = _shapes(log_probs_shape, targets_shape)
    il, tl = (np.asarray(v, np.int64).reshape(-1) for v in (input_lengths, target_lengths))
    _check_shapes(lp, tg, (len(il), len(tl)), blank)
    if lp[1] == 0:
        if tg[0] != 0:
            raise _error(lp[0], tuple(tg), 1, 0)
        return
    failed, values = _faults(np, il, tl, lp[0], tuple(tg))
    if failed.any():
        which = int(np.argmax(failed))
        raise _error(lp[0], tuple(tg), which, int(values[which]))


@executable(static_argnums=(2, 3))
def _first_fault(input_lengths, target_lengths, t_max: int, targets_shape: tuple):
    failed, values = _faults(jnp, input_lengths.reshape(-1), target_lengths.reshape(-1),
                             t_max, targets_shape)
    which = jnp.argmax(failed)
    return failed.any(), which, values[which]


def defer_ctc_check(log_probs_shape, targets_shape, input_lengths, target_lengths,
                    blank: int) -> None:
    """Fused eager: the shape checks now, the length values' at the sync point that runs the
    loss. The lengths: int64 arrays on the device."""
    lp, tg = _shapes(log_probs_shape, targets_shape)
    sizes = tuple(int(np.prod(v.shape)) for v in (input_lengths, target_lengths))
    _check_shapes(lp, tg, sizes, blank)
    if lp[1] == 0:
        return ctc_check(log_probs_shape, targets_shape, [], [], blank)
    outputs = _first_fault(input_lengths, target_lengths, lp[0], tuple(tg))
    origin = (f"aten.ctc_loss, called at {user_line()} (fused eager checks values when a sync "
              "point runs the op)")
    deferred_checks.record(outputs, partial(_error, lp[0], tuple(tg)), origin)
