"""``torch.cond``, ``while_loop``, ``scan`` and ``map`` inside a program: their lax forms.

Their branches and bodies are FX subgraphs (get_attr nodes); each is lowered by the same walk
as the graph holding it (``interpret``), inside the one trace, so the whole graph stays one
XLA program and the predicate is read on the device, not on the host.
"""

from __future__ import annotations

from collections.abc import Callable

import jax.numpy as jnp
import torch
from jax import lax
from torch import fx

Interpret = Callable[[fx.GraphModule, list], list]


def _cond(interpret: Interpret, pred, true_gm, false_gm, operands) -> tuple:
    if isinstance(pred, bool):  # a predicate PyTorch already knew (a static shape test)
        return tuple(interpret(true_gm if pred else false_gm, list(operands)))
    return lax.cond(
        jnp.asarray(pred).astype(bool).reshape(()),
        lambda ops: tuple(interpret(true_gm, list(ops))),
        lambda ops: tuple(interpret(false_gm, list(ops))),
        tuple(operands),
    )


def _while_loop(interpret: Interpret, cond_gm, body_gm, carried, additional) -> tuple:
    additional = list(additional)
    init = tuple(jnp.asarray(c) for c in carried)

    def cond(carry):
        (pred,) = interpret(cond_gm, [*carry, *additional])
        return jnp.asarray(pred).astype(bool).reshape(())

    def body(carry):
        return _as_carry(interpret(body_gm, [*carry, *additional]), carry)

    return lax.while_loop(cond, body, init)


def _scan(interpret: Interpret, combine_gm, init, xs, additional) -> tuple:
    """``combine(carry..., row..., additional...)`` gives the new carry, then one output row
    each; the result is the last carry and the stacked outputs."""
    n, additional = len(init), list(additional)

    def step(carry, rows):
        outs = interpret(combine_gm, [*carry, *rows, *additional])
        return _as_carry(outs[:n], carry), tuple(outs[n:])

    carry, ys = lax.scan(step, tuple(jnp.asarray(c) for c in init), tuple(xs))
    return (*carry, *ys)


def _map(interpret: Interpret, body_gm, xs, args) -> tuple:
    args = list(args)
    return lax.map(lambda rows: tuple(interpret(body_gm, [*rows, *args])), tuple(xs))


def _as_carry(outs, carry) -> tuple:
    # A loop's carry keeps its types: a weakly typed result (an int added to a scalar) is cast.
    return tuple(lax.convert_element_type(o, c.dtype) for o, c in zip(outs, carry, strict=True))


_RULES = {"cond": _cond, "while_loop": _while_loop, "scan": _scan, "map_impl": _map}
CONTROL_FLOW: dict = {getattr(torch.ops.higher_order, name): rule for name, rule in _RULES.items()
                      if hasattr(torch.ops.higher_order, name)}


def subgraphs(gm: fx.GraphModule, node: fx.Node) -> list[fx.GraphModule]:
    """The branch or body graphs a control-flow node calls."""
    return [getattr(gm, a.target) for a in node.args
            if isinstance(a, fx.Node) and a.op == "get_attr"
            and isinstance(getattr(gm, a.target), fx.GraphModule)]
