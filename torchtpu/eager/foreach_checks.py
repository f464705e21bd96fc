"""CPU's checks for the ``_foreach_*`` ops.

CPU's slow path runs the single-tensor op on each tensor in turn, so each tensor meets that
op's checks (a dtype its kernel is not built for, a bool subtracted, a complex bound) and
those of its numbers (a complex weight for a float lerp), in list order. These tables derive
the foreach overload's checks from the single op's.
"""

from __future__ import annotations

import jax.numpy as jnp
import torch

from ..ops.dtypes import scalar_type_name

_aten = torch.ops.aten

# The single-tensor op CPU runs per tensor where it is not the one of the same name: maximum
# and minimum are clamp_min and clamp_max there (by tensors or by numbers).
_RENAMED = {"maximum": "clamp_min", "minimum": "clamp_max"}
# Which overload of it: the foreach overload's (a list of tensors, numbers, a 0-d tensor).
_OVERLOADS = {"List": ("Tensor", "Tensor_Tensor", "default"),
              "Scalar": ("Tensor_Scalar", "Scalar", "default"),
              "ScalarList": ("Tensor_Scalar", "Scalar", "default"),
              "Tensor": ("Tensor", "default"), "default": ("default",)}


def _single_op(op):
    name = op._schema.name.split("::")[1].removeprefix("_foreach_")
    base = name.removesuffix("_")
    packet = getattr(_aten, _RENAMED.get(base, base) + name[len(base):], None)
    if packet is None:
        return None
    return next((getattr(packet, o) for o in _OVERLOADS.get(op._overloadname, ())
                 if o in packet.overloads()), None)


def _pick(value, i: int):
    return value[i] if isinstance(value, (list, tuple)) else value


def _each(check):
    def each(self, *args, **kwargs):
        if any(isinstance(a, (list, tuple)) and len(a) != len(self) for a in args):
            return None  # (the foreach op's own check: lists of other lengths)
        for i, t in enumerate(self):
            if error := check(t, *(_pick(a, i) for a in args), **kwargs):
                return error
        return None

    return each


def _foreach_ops(in_place: bool):
    # (every registered op: dir(torch.ops.aten) lists only those looked up so far)
    names = {n.removeprefix("aten::").split(".")[0]
             for n in torch._C._dispatch_get_all_op_names()}
    for name in sorted(names):
        if name.startswith("_foreach_") and name.endswith("_") == in_place:
            packet = getattr(_aten, name)
            for overload in packet.overloads():
                if not overload.endswith("out"):
                    yield getattr(packet, overload)


def each_tensor(checks: dict, in_place: bool = False) -> dict:
    """The checks of ``checks``' single-tensor ops, run on each tensor of their foreach
    overloads (those without a check of their own there); ``in_place``: the in-place ones'
    (clamp_min_'s cast, before the functional op's checks)."""
    found = {}
    for op in _foreach_ops(in_place):
        if any(a.name == "scalars" for a in op._schema.arguments) and op._overloadname == "Tensor":
            continue  # (numbers packed in a tensor: checked first, then the ScalarList overload)
        single = _single_op(op)
        if single in checks and op not in checks:
            found[op] = _each(checks[single])
        if op in _COUNT_UNCHECKED:
            found[op] = _counted(found.get(op))
    return found


# pow's numbers reach its meta kernel as tensors (strict.py), which leaves their count unchecked
_COUNT_UNCHECKED = {_aten._foreach_pow.ScalarList, _aten._foreach_pow_.ScalarList}


def _counted(check):
    def counted(self, scalars, *args, **kwargs):
        if len(scalars) != len(self):
            return RuntimeError("Tensor list must have same number of elements as scalar list.")
        return check(self, scalars, *args, **kwargs) if check else None

    return counted


def _vector_norm(self, ord=2, dtype=None) -> str | None:  # noqa: A002
    """linalg.vector_norm's, which CPU's _foreach_norm runs per tensor."""
    for t in self:
        if not jnp.issubdtype(t.dtype, jnp.inexact):
            return ("linalg.vector_norm: Expected a floating point or complex tensor as input. "
                    f"Got {scalar_type_name(t.dtype)}")
    return None


FOREACH_CHECKS = {_aten._foreach_norm.Scalar: _vector_norm}
