"""Which torch._decomp decompositions we take, for ops without a rule of their own.

We take PyTorch's core-ATen decompositions (they lower every non-core op to the Core ATen
opset, which our rules cover) plus the wider registered table for ops outside it. Ops with a
rule never decompose: a rule is one XLA program, a decomposition is several.
"""

from __future__ import annotations

import torch
from torch._decomp import core_aten_decompositions, decomposition_table

aten = torch.ops.aten

# Decompositions that would loop back into themselves or into ops we handle better directly.
_EXCLUDED = {
    aten._to_copy.default,  # a host/device transfer: handled in eager/special.py
    aten.copy_.default,
    aten.lift_fresh.default,
}

DECOMPOSITIONS: dict = {
    op: fn
    for table in (decomposition_table, core_aten_decompositions())
    for op, fn in table.items()
    if isinstance(op, torch._ops.OpOverload) and op not in _EXCLUDED
}
