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


# Ops that return Python values (a bool) cannot be rules (rules return arrays): they are
# written here over ops that have rules, and read one scalar back, as PyTorch does on cuda.


def _equal(self, other):
    if self.shape != other.shape:
        return False
    return bool(torch.eq(self, other).all())


def _allclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return bool(torch.isclose(self, other, rtol, atol, equal_nan).all())


DECOMPOSITIONS[aten.equal.default] = _equal
DECOMPOSITIONS[aten.allclose.default] = _allclose


# rrelu_with_noise writes its slopes into ``noise`` although it is not an in-place op by name:
# the functional form (a rule) computes them, and they are copied back.


def _rrelu_with_noise(self, noise, lower=0.125, upper=1 / 3, training=False, generator=None):
    out, slopes = aten.rrelu_with_noise_functional(self, noise, lower, upper, training,
                                                   generator=generator)
    noise.copy_(slopes)
    return out


DECOMPOSITIONS[aten.rrelu_with_noise.default] = _rrelu_with_noise


# torch.nn's chunked linear cross-entropy: custom ops (torch_nn::*) whose bodies are Python over
# ATen ops. Below autograd they reach us as opaque ops; their bodies run on tpu as they are.
# (CustomOpDef keeps the body as ``_init_fn``; PyTorch has no public accessor for it.)


def _custom_op_bodies() -> dict:
    try:
        from torch.nn.modules import linear_cross_entropy as lce
    except ImportError:  # a PyTorch without these ops
        return {}
    ops = (lce._linear_cross_entropy_batch_chunked,
           lce._linear_cross_entropy_batch_chunked_no_reduction)
    return {getattr(torch.ops.torch_nn, op._name).default: op._init_fn for op in ops}


DECOMPOSITIONS.update(_custom_op_bodies())
