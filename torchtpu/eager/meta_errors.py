"""CPU's wording for errors PyTorch's meta kernels word their own way.

Shape inference runs PyTorch's meta kernels, so invalid input raises PyTorch's exception. Some
meta kernels are Python references whose messages differ from the CPU kernels' ("Attempting
to broadcast a dimension..." where CPU says "The size of tensor a (3) must match..."); users
and their tests know CPU's, so those few are reworded here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import torch

from ..ops.dtypes import scalar_type_name

_MATMUL = re.compile(r"a and b must have same reduction dim, but got \[(.*)\] X \[(.*)\]")
_CAT = re.compile(r"Sizes of tensors must match except in dimension (\d+)\. "
                  r"Expected (\d+) in dimension \d+ but got (\d+) for tensor number (\d+)")
_DTYPE = re.compile(r"torch\.(\w+)")


def cpu_wording(error: RuntimeError, shapes: Sequence[tuple]) -> RuntimeError | None:
    """CPU's message for ``error`` (raised by a meta kernel for tensors of ``shapes``, in
    argument order), or None when it already reads as CPU's."""
    text = str(error)
    if text.startswith("Attempting to broadcast a dimension"):
        return RuntimeError(_broadcast_message(shapes) or text)
    if m := _MATMUL.match(text):
        a, b = (x.replace(", ", "x") for x in m.groups())
        return RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a} and {b})")
    if m := _CAT.match(text):
        dim, want, got, i = m.groups()
        return RuntimeError(f"Sizes of tensors must match except in dimension {dim}. Expected "
                            f"size {want} but got size {got} for tensor number {i} in the list.")
    if "could not infer output dtype" in text and "Got: torch." in text:
        return RuntimeError(_DTYPE.sub(lambda m: _c10_name(m.group(1)), text))
    return None


def _broadcast_message(shapes: Sequence[tuple]) -> str | None:
    """CPU's (infer_size's) message for the first pair that does not broadcast, folding the
    shapes left to right as TensorIterator does."""
    if not shapes:
        return None
    acc = tuple(shapes[0])
    for b in shapes[1:]:
        ndim = max(len(acc), len(b))
        out = []
        for i in range(ndim - 1, -1, -1):
            k = ndim - 1 - i
            sa = acc[len(acc) - 1 - k] if k < len(acc) else 1
            sb = b[len(b) - 1 - k] if k < len(b) else 1
            if sa != sb and sa != 1 and sb != 1:
                return (f"The size of tensor a ({sa}) must match the size of tensor b ({sb}) "
                        f"at non-singleton dimension {i}")
            out.append(sb if sa == 1 else sa)
        acc = tuple(reversed(out))
    return None


def _c10_name(name: str) -> str:
    dtype = getattr(torch, name, None)
    return scalar_type_name(dtype) if isinstance(dtype, torch.dtype) else f"torch.{name}"
