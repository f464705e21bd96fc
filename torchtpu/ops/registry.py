"""The one registry of lowering rules.

A rule is a pure function of jax arrays plus hashable static Python values, written for the
functional form of an op. In-place, ``out=`` and view write-back variants are derived from
the op's schema by the executor (eager/dispatch.py), never written twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

OpOverload = torch._ops.OpOverload
OpOverloadPacket = torch._ops.OpOverloadPacket


@dataclass(frozen=True)
class Lowering:
    op: OpOverload
    fn: Callable
    # Scalar arguments are traced (a changing learning rate must not recompile); these are not.
    static: frozenset[str] = frozenset()
    # Data-dependent output shape: runs on concrete arrays, outside jit.
    eager: bool = False
    # The rule checks its own dtypes; skip PyTorch's meta kernel at trace time.
    skip_meta: bool = False
    # An eager rule whose array work all goes through runtime.execute executables: fused
    # eager can run it on pending values (random ops) instead of synchronising first.
    records: bool = False
    # Inputs the op updates in place although its schema does not say so
    # (native_batch_norm's running statistics); the rule returns their new values last.
    mutates: tuple[str, ...] = ()
    # Integer arguments traced all the same (select's index: a loop over x[i] compiles once).
    dynamic: frozenset[str] = frozenset()


LOWERINGS: dict[OpOverload, Lowering] = {}


def is_functional(op: OpOverload) -> bool:
    return not any(a.alias_info is not None and a.alias_info.is_write for a in op._schema.arguments)


def _overloads(op: OpOverload | OpOverloadPacket) -> list[OpOverload]:
    if isinstance(op, OpOverload):
        return [op]
    found = [getattr(op, name) for name in op.overloads()]
    return [o for o in found if is_functional(o)]


def lowering(
    *ops: OpOverload | OpOverloadPacket,
    static: tuple[str, ...] = (),
    eager: bool = False,
    skip_meta: bool = False,
    records: bool = False,
    mutates: tuple[str, ...] = (),
    dynamic: tuple[str, ...] = (),
) -> Callable[[Callable], Callable]:
    """Register ``fn`` as the lowering of ``ops``; a packet stands for its functional overloads."""

    def register(fn: Callable) -> Callable:
        for packet in ops:
            for op in _overloads(packet):
                if op in LOWERINGS:
                    raise RuntimeError(f"torchtpu: duplicate lowering for {op}")
                LOWERINGS[op] = Lowering(op, fn, frozenset(static), eager, skip_meta, records,
                                         tuple(mutates), frozenset(dynamic))
        return fn

    return register
