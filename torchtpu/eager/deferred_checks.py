"""Fused eager's value checks: CPU's error for an out-of-range index (or a value CPU refuses),
raised at a sync point.

Strict eager reads an op's indices on the host before running it (bounds.py). Fused eager
cannot wait there, so beside the op it records a check: whether the indices leave the
valid range, and the first value that does and where (or, for binary_cross_entropy's
probabilities, random ops' parameter tensors and integer divisors, whether any value is
invalid and what CPU's message needs). The check
is one more output of the program. The sync point that runs the op reads it and raises
CPU's exception, so an embedding id past the vocabulary or a target past the classes is an
error, not a clamped row read in silence. A check that only needs what the forced value
needs runs in the forced value's program (``loss.item()`` raises); one that runs in the
rest of the step, dispatched without waiting, is read at a later sync point once its
program has finished (or at once by ``torch.tpu.synchronize()``). The ops recorded with it
have run by then, with the index clamped, as XLA does.

A compiled graph's program (torch.compile) computes the checks of its nodes as more outputs
(``launched``); the sync point that reads any value after it has finished raises, as a cuda
device-side assert surfaces at the next synchronization."""

from __future__ import annotations

import jax

# Checks as (outputs, make_error): the first output says whether it failed, make_error(the
# other outputs) builds CPU's exception. Recorded: in the trace not yet run; running (with
# whether the sync point reads it): in programs already dispatched.
_recorded: list[tuple] = []
_running: list[tuple] = []


def record(outputs: tuple, make_error, origin: str) -> None:
    """In fused eager: check at the sync point. ``outputs``: a recorded executable's pending
    outputs, the first true when the check fails; ``make_error(the others, as ints)`` builds
    the exception; ``origin``: the op and the user's line that called it."""
    _recorded.append((outputs, _noting(make_error, origin)))


class OpCallSite(Exception):
    """The op whose value check failed and the user's line that called it: the cause of the
    error a sync point raises, whose traceback shows where the value was read instead."""


def _noting(make_error, origin: str):
    # A cause, not a note or a longer message: the error stays CPU's exception, message and
    # all (pytest's ``match`` reads notes too).
    def noted(*found):
        error = make_error(*found)
        error.__cause__ = OpCallSite(origin)
        return error

    return noted


def count() -> int:
    """How many checks the current trace has recorded."""
    return len(_recorded)


def recorded_nodes() -> list[int]:
    """The current trace's check nodes."""
    return [flags[0].src[0] for flags, _ in _recorded]


def dispatched(forced: set[int] | None) -> None:
    """The flushed trace's checks have been dispatched; ``forced``: its nodes that ran with
    the forced value, whose checks the sync point reads."""
    global _recorded
    for flags, make_error in _recorded:
        now = forced is not None and flags[0].src[0] in forced
        _running.append((flags, make_error, now))
    _recorded = []


def launched(outputs: list, make_error, origin: str) -> None:
    """A compiled program's check, as ``record`` takes it but with its arrays: read at a
    sync point once the program has finished."""
    _running.append((outputs, _noting(make_error, origin), False))
    if len(_running) > _MAX_UNREAD:  # a loop that never syncs: read the finished ones
        raise_failed(wait=False)


_MAX_UNREAD = 64


def raise_failed(wait: bool) -> None:
    """At a sync point: raise the first failed check among those whose program ran with
    the forced value or has finished (``wait``: every one, waiting for its program)."""
    global _running
    unread, failure = [], None
    for check in _running:
        (ran, *found), make_error, now = check
        ran, *found = (v if isinstance(v, jax.Array) else v.array for v in (ran, *found))
        if ran is None:  # its op failed (that error is raised) or it was dropped
            continue
        if not (wait or now or ran.is_ready()):
            unread.append(check)
        elif failure is None and bool(ran):
            failure = make_error(*(v.item() for v in found))
    _running = unread
    if failure is not None:
        raise failure
