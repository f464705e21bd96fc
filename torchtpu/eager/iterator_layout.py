"""Results laid out as CPU's TensorIterator lays them out, for ops whose meta kernels do not
say it: the iterator orders a result's dimensions by its operands' strides, and a broadcast
stride (a 0-dim operand's, an index's outside its dimensions) decides nothing."""

from __future__ import annotations

import torch
from torch._prims_common import compute_elementwise_output_strides

aten = torch.ops.aten


def _iterated(tensors) -> torch.Tensor:
    shape = torch.broadcast_shapes(*(t.shape for t in tensors))
    strides = compute_elementwise_output_strides(*(t.expand(shape) for t in tensors))
    return torch.empty_strided(shape, strides, device="meta")


def elementwise(*args, **kwargs) -> torch.Tensor:
    """A binary kernel's result over these meta tensors (numbers and 0-dim tensors aside)."""
    return _iterated([a for a in args if isinstance(a, torch.Tensor) and a.dim()])


def ldexp(self: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """CPU's ldexp is self * pow(2, other), a power its kernel allocates contiguous."""
    return elementwise(self, torch.empty(other.shape, device="meta"))


def index(self: torch.Tensor, indices) -> torch.Tensor:
    """``self[indices]`` on meta, laid out as CPU's AdvancedIndex iterator lays it out: over
    ``self`` with the indexed dimensions replaced by the indices' shape (stride 0), and each
    index viewed in the result's dimensions. A mask's positions come from nonzero, data
    the meta kernel cannot see: it says what it can."""
    if any(t is not None and t.dtype in (torch.bool, torch.uint8) for t in indices):
        return aten.index.Tensor(self, indices)
    indices = list(indices) + [None] * (self.dim() - len(indices))
    defined = [i for i, t in enumerate(indices) if t is not None]
    shape = torch.broadcast_shapes(*(indices[i].shape for i in defined))
    expanded = {i: indices[i].expand(shape) for i in defined}
    if defined[-1] - defined[0] + 1 != len(defined):
        # Indexed dimensions apart: CPU moves them to the front first.
        order = defined + [d for d in range(self.dim()) if d not in expanded]
        self = self.permute(order)
        indices = [expanded[d] for d in defined] + [None] * (self.dim() - len(defined))
    else:
        indices = [expanded.get(d) for d in range(self.dim())]
    before = next(d for d, t in enumerate(indices) if t is not None)
    after = self.dim() - before - len(defined)
    restrided = self.as_strided(
        (*self.shape[:before], *shape, *self.shape[self.dim() - after:]),
        (*self.stride()[:before], *[0] * len(shape), *self.stride()[self.dim() - after:]))
    viewed = [t.reshape((1,) * before + tuple(shape) + (1,) * after)
              for t in indices if t is not None]
    return _iterated([restrided, *viewed])
