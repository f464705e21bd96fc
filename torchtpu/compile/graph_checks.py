"""A compiled graph's value checks: the checks CPU's kernels make of their nodes' values (an
index in range: eager/bounds.py) and the graph's own asserts (``_assert_async``, one_hot's
from its decomposition), computed inside the graph's program as more outputs and read at the
first sync point after it ran (eager/deferred_checks.py), as a cuda device-side assert
surfaces at the next synchronization."""

from __future__ import annotations

import jax.numpy as jnp
import torch
from torch import fx

from ..debug import counters as metrics
from ..eager import bounds, deferred_checks
from ..eager.call_site import traced_line
from ..eager.special import NONZERO_EXPECTED

aten = torch.ops.aten

# CPU's eager kernels raise their message; inductor asserts in its generated code.
ASSERTS = {aten._assert_async.default, aten._assert_async.msg,
           aten._functional_assert_async.msg}


def of_node(node: fx.Node, fakes: tuple, args, kwargs) -> list:
    """The node's value checks (bounds.traced_checks; ``fakes``: its arguments as the graph's
    fake tensors). One that cannot be built for this node is left out and counted: a check
    must never stop a graph that computes. (CPU's own errors raise: a division by the number
    0.)"""
    try:
        checks = bounds.traced_checks(node.target, fakes, (args, kwargs))
    except (KeyError, TypeError, AttributeError, ValueError):
        metrics.count("graph", "unchecked")
        return []
    return [(found, make_error, _origin(node)) for found, make_error in checks]


def of_assert(node: fx.Node, condition, message: str | None = None) -> tuple:
    """An assert node's check: its condition is false."""
    message = message or NONZERO_EXPECTED
    failed = jnp.logical_not(jnp.asarray(condition).astype(bool).reshape(()))
    return [failed], lambda: RuntimeError(message), _origin(node)


def _origin(node: fx.Node) -> str:
    line = traced_line(node.meta.get("stack_trace"))
    return (f"{node.target} in a torch.compile graph" + (f", called at {line}" if line else "")
            + " (checked at the first sync point after the graph ran)")


def launch(outs: list, checks: list) -> list:
    """Hand the program's check outputs (its last) to the sync points that read them; the
    rest of its outputs. ``checks``: (how many outputs, make_error, origin) each."""
    n = sum(count for count, *_ in checks)
    found = iter(outs[len(outs) - n:])
    for count, make_error, origin in checks:
        deferred_checks.launched([next(found) for _ in range(count)], make_error, origin)
    return outs[:len(outs) - n]
