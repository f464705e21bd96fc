"""Results laid out as CPU's TensorIterator lays them out (pointwise ops, advanced indexing),
computed from the operands' strides rather than by a meta kernel, which costs ~10x as much
and does not always say it: the iterator orders a result's dimensions by its operands'
strides, size-1 dimensions' too, and a broadcast stride (a 0-dim operand's, an index's
outside its dimensions) decides nothing."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..tensor import TpuTensor, contiguous_strides, is_dense

aten = torch.ops.aten


def _operand_strides(t: torch.Tensor, shape) -> tuple[int, ...]:
    """``t``'s strides over the result's dimensions as the iterator sees them: a dimension it
    broadcasts (missing, or size 1 against a larger one) strides 0."""
    pad = len(shape) - t.dim()
    return (0,) * pad + tuple(0 if n == 1 and m != 1 else s
                              for n, s, m in zip(t.shape, t.stride(), shape[pad:], strict=True))


def result_strides(shape, operands) -> tuple[int, ...]:
    """The strides TensorIterator gives a result it allocates: its dimensions sorted by the
    operands' strides (reorder_dimensions: the first operand that tells two apart decides, an
    equal stride puts the smaller size inside), then dense in that order (compatible_stride).
    Size-1 dimensions take part, with whatever strides they have."""
    ndim = len(shape)

    def should_swap(d0: int, d1: int) -> int:
        for strides in operands:
            s0, s1 = strides[d0], strides[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 != s1:
                return -1 if s0 < s1 else 1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    perm = list(range(ndim - 1, -1, -1))  # innermost first; an insertion sort, as ATen's
    for i in range(1, ndim):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            order = should_swap(perm[d0], perm[d1])
            if order > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif order < 0:
                break
    strides, step = [0] * ndim, 1
    for d in perm:
        strides[d] = step
        step *= shape[d]
    return tuple(strides)


def _iterated(tensors) -> torch.Tensor:
    shape = torch.broadcast_shapes(*(t.shape for t in tensors))
    strides = result_strides(shape, [_operand_strides(t, shape) for t in tensors])
    return torch.empty_strided(shape, strides, device="meta")


def ldexp(self: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """CPU's ldexp is self * pow(2, other), a power its kernel allocates contiguous."""
    return _iterated([t for t in (self, torch.empty(other.shape, device="meta")) if t.dim()])


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


def _odd_unit_strides(x: TpuTensor) -> bool:
    """A (non-direct) tpu tensor whose size-1 dimensions stride otherwise than a contiguous
    tensor's (a transpose moved them): c10's contiguity ignores them, CPU's iterator sorts
    by them."""
    shape, stride = x._geometry[:2]
    if 1 not in shape or 0 in shape:
        return False
    return any(n == 1 and s != c
               for n, s, c in zip(shape, stride, contiguous_strides(shape), strict=True))


# CPU allocates these results with empty_like, which keeps a dense input's strides.
LIKE_INPUT = {aten.hardtanh.default, aten.relu6.default, aten.nan_to_num.default,
              aten.deg2rad.default, aten.rad2deg.default, aten.frexp.Tensor,
              aten._conj_physical.default}


def into_empty_like(func, at: int) -> Callable:
    """For a kernel that writes an unreduced result into an ``empty_like`` of argument
    ``at`` (binary_cross_entropy and its backward on CPU): that argument's strides where it
    is dense; otherwise, and for a reduced result, the meta kernel's layout."""
    def laid_out(*args, **kwargs):
        meta, x = func(*args, **kwargs), args[at]
        if meta.shape != x.shape or not is_dense(x.shape, x.stride()):
            return meta
        return torch.empty_strided(x.shape, x.stride(), device="meta")

    return laid_out


# Their CPU kernels write into an empty_like of this argument (the input).
INTO_EMPTY_LIKE = {aten.binary_cross_entropy.default: 0,
                   aten.binary_cross_entropy_backward.default: 1}
# Tagged pointwise, but CPU's kernel sums an iterator's result (the meta kernel knows).
_NOT_ITERATED = {aten.mvlgamma.default}
# Unary kernels whose number is a parameter, not a (0-dim) operand of the iterator.
_NUMBER_NOT_AN_OPERAND = {aten.pow, aten.lerp}


def _fast_path_strides(tensors) -> tuple[int, ...] | None:
    """The layout of TensorIterator's fast path, for operands of one shape: contiguous,
    channels_last, or a dense layout they all share; None where none applies."""
    if all(t.is_contiguous() for t in tensors):
        return contiguous_strides(tuple(tensors[0].shape))
    if tensors[0].dim() == 4 and all(t.is_contiguous(memory_format=torch.channels_last)
                                     for t in tensors):
        return torch.empty(tensors[0].shape, device="meta",
                           memory_format=torch.channels_last).stride()
    strides = tensors[0].stride()
    if is_dense(tensors[0].shape, strides) and all(t.stride() == strides for t in tensors):
        return strides
    return None


def by_operands(func) -> Callable | None:
    """For a pointwise op: its result's layout (a meta tensor, or a tuple of them) as CPU's
    TensorIterator gives it. Its fast path needs operands of one shape, no number made a
    0-dim operand (one in a Tensor argument, ``x + 1``, or a binary op's Scalar overload's,
    ``x > 0``) and one layout; otherwise it sorts the dimensions by the operands' strides,
    size-1 dimensions' too. CPU makes the results in ``LIKE_INPUT`` with empty_like: a
    dense input's strides (None for another input: its meta kernel knows)."""
    if func in _NOT_ITERATED:
        return None
    results = len(func._schema.returns)
    if func in LIKE_INPUT:
        def like_input(args):
            x = args[0]
            if not is_dense(x.shape, x.stride()):
                return None  # (empty_like asks suggest_memory_format: the meta kernel's)
            meta = torch.empty_strided(x.shape, x.stride(), device="meta")
            return meta if results == 1 else (meta,) * results

        return like_input
    schema = func._schema.arguments
    slots = tuple(i for i, a in enumerate(schema)
                  if not a.kwarg_only and isinstance(a.type, torch.TensorType))
    numbers = (func._overloadname != "default" and func.overloadpacket not in _NUMBER_NOT_AN_OPERAND
               and any(isinstance(a.type, torch.NumberType) and not a.kwarg_only
                       for a in schema))

    def layout(args):
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        shape = tensors[0].shape
        strides = None
        if not (numbers or any(t.shape != shape for t in tensors)
                or any(i < len(args) and args[i] is not None
                       and not isinstance(args[i], torch.Tensor) for i in slots)):
            strides = _fast_path_strides(tensors)
        meta = (_iterated([t for t in tensors if t.dim()]) if strides is None
                else torch.empty_strided(shape, strides, device="meta"))
        return meta if results == 1 else (meta,) * results

    return layout


def by_unit_strides(layout: Callable) -> Callable:
    """For a pointwise op whose operands are in contiguous order: its ``layout``
    (``by_operands``) where an operand's size-1 dimensions stride otherwise than a contiguous
    tensor's (c10 calls it contiguous, CPU's iterator and empty_like keep them), else None
    (contiguous, as it is)."""

    def iterated(args):
        for a in args:  # (a loop: this runs on every pointwise op; direct tensors are contiguous)
            if type(a) is TpuTensor and not a._direct and _odd_unit_strides(a):
                return layout(args)  # (contiguous ones also where a decomposition kept them)
        return None

    return iterated
