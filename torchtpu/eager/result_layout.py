"""Results laid out as PyTorch's kernels lay them out on CPU.

A rule computes values; their strides come from here: pointwise results follow their operands'
order (iterator_layout.py), channels_last inputs keep it through convolution, normalisation and
pooling, factorizations are column-major (linalg_layout.py), and factories keep a template's
layout or take the strides they are given.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils._pytree import tree_map

from ..ops.registry import LOWERINGS
from ..tensor import TpuTensor, is_dense, overlaps, read, with_layout, wrap
from . import conv_checks, iterator_layout, linalg_layout, views

Handler = Callable[[tuple, dict], object]
aten = torch.ops.aten

_KEEPS = (None, torch.preserve_format, torch.contiguous_format)


def keeping_layout(inner: Handler) -> Handler:
    """*_like factories lay their result out as PyTorch does (preserve: a channels_last input
    gives a channels_last result)."""

    def handler(args, kwargs):
        out = inner(args, kwargs)
        x, fmt = args[0], kwargs.get("memory_format")
        if type(x) is TpuTensor and x._direct and fmt in _KEEPS:
            return out
        stride = views.layout_for(x, fmt)
        return out if out.stride() == stride else with_layout(read(out), stride)

    return handler


# Factories taking strides (AccumulateGrad gives a grad its parameter's layout through
# new_empty_strided): a dense layout keeps the elements in its memory order; one with gaps or
# overlaps is a view of a storage as large as it reaches, as PyTorch's.
STRIDE_ARG = {aten.empty_strided.default: 1, aten.new_empty_strided.default: 2}


def strided(inner: Handler, at: int) -> Handler:
    def handler(args, kwargs):
        out = inner(args, kwargs)
        stride = tuple(args[at])
        if out.stride() == stride:
            return out
        if is_dense(out.shape, stride) or len(stride) != out.dim():
            return with_layout(read(out), stride)
        return views.fresh_strided(read(out).dtype, out.shape, stride)

    return handler


def _channels_last(x) -> bool:
    """A tensor PyTorch's kernels lay out as channels_last: dense so, or a slice of one
    (``x[:, ::2]``: c10's suggest_memory_format reads the strides' order)."""
    # A channels_last tensor is never direct: a direct one is contiguous.
    if type(x) is not TpuTensor or x._direct or x.dim() not in _CHANNELS_LAST:
        return False
    if x.is_contiguous():
        # Also channels_last-contiguous when size-1 dimensions make it both: c10's
        # suggest_memory_format tells them apart by those dimensions' strides.
        return (x.is_contiguous(memory_format=_CHANNELS_LAST[x.dim()])
                and _strides_like_channels_last(x.shape, x.stride()))
    return (x.is_contiguous(memory_format=_CHANNELS_LAST[x.dim()])
            or _strides_like_channels_last(x.shape, x.stride()))


def _as_2d(x, weight) -> list:
    """CPU's convolution of 1-d operands: the input made contiguous (a permuted one's order
    dropped; one that size-1 dimensions make contiguous kept), then both viewed with a height
    of 1 inserted (view4d), where either may be channels_last. (shape, strides) of each."""
    out = []
    for t, strides in ((x, x.stride() if x.is_contiguous() else None), (weight, weight.stride())):
        n, c, length = t.shape
        s0, s1, s2 = strides or (c * length, length, 1)
        out.append(((n, c, 1, length), (s0, s1, s2 * length, s2)))
    return out


def _strides_like_channels_last(shape, strides) -> bool:
    """c10's is_channels_last_strides_2d/3d: channels innermost, then the spatial dims from
    the last, then the batch (ambiguous strides count as contiguous)."""
    if strides[1] == 0:
        return False
    low = 0
    for d in (1, 3, 2, 0) if len(shape) == 4 else (1, 4, 3, 2, 0):
        if shape[d] == 0 or strides[d] < low or (d == 0 and low == strides[1]):
            return False
        low = strides[d] * shape[d]
    return True


def suggested_format(x) -> torch.memory_format:
    """c10's suggest_memory_format."""
    if x.dim() in _CHANNELS_LAST and _strides_like_channels_last(x.shape, x.stride()):
        return _CHANNELS_LAST[x.dim()]
    return torch.contiguous_format


def _out_of_order(x) -> bool:
    """Some dimension strides further than one before it (broadcasts aside): a transpose,
    channels_last, or a slice of one, whose order TensorIterator's outputs take. Past its
    contiguity check (which skips them), a size-1 dimension's stride counts too, as the
    iterator sorts by it: an N1HW slice of a channels_last tensor gives channels_last
    results. Two equal strides (an overlapping layout) count as well: the iterator puts the
    smaller size inside."""
    if type(x) is not TpuTensor or x._direct or x.is_contiguous():
        return False
    before = None
    for s in x.stride():
        if s:
            if before is not None and s >= before:
                return True
            before = s
    return False


def _permuted(x) -> bool:
    """A dense tensor in another order than contiguous (a transpose, channels_last)."""
    return (type(x) is TpuTensor and not x._direct and not x.is_contiguous()
            and is_dense(x.shape, x.stride()))


def following_memory_format(func, inner: Handler) -> Handler:
    """A rule's results laid out as PyTorch lays them out when an input is channels_last
    (elementwise, convolution, normalisation and pooling kernels keep it), an elementwise
    op's input is in any other order (a transpose: TensorIterator follows it), attention's
    query is permuted, or always for a factorization (LAPACK's column-major results):
    PyTorch's meta kernel on inputs of the same strides says how. Other inputs take the
    plain path: their results are contiguous."""
    if not any("Tensor" in str(r.type) for r in func._schema.returns):  # (Tensor[], Tensor?)
        # equal is tagged pointwise but answers a bool: nothing to lay out, and its operands
        # need not broadcast (a shape mismatch is just False)
        return inner
    if func in _CONTIGUOUS_RESULT:  # (a decomposition's follows its pointwise ops': undone)
        return inner if func in LOWERINGS else lambda a, k: _contiguous(inner(a, k))
    follows = (_out_of_order if torch.Tag.pointwise in func.tags or func in _FOLLOWING_ORDER
               else _channels_last)
    always = func in _LAPACK_ORDER
    laid_out = _LAID_OUT_BY.get(func, func)
    # (as its out= form resizes its outs, where linalg_layout.py knows it)
    lapack = linalg_layout.result_layout(func) if always else None
    # A pointwise result's layout as CPU's iterator computes it (a meta kernel, a Python
    # reference here, costs ~10x as much and misses size-1 dimensions).
    iterated = (iterator_layout.by_operands(func) if (torch.Tag.pointwise in func.tags
                                                       or func in _ITERATED)
                and func not in _LAID_OUT_BY else None)
    unit_strides = iterator_layout.by_unit_strides(iterated) if iterated else None

    def handler(args, kwargs):
        out = inner(args, kwargs)
        if lapack is not None:
            return _laid_out_as(out, lapack(args, kwargs, out), gaps=True)
        unbatched = func in _AS_A_BATCH_OF_ONE and _unbatched_channels_last_3d(args[0])
        conv1d = func is aten.convolution.default and len(args[0].shape) == 3
        if not (always or unbatched or _follows(func, follows, args) or func in _FAKE_LAYOUT
                or (conv1d and any(_strides_like_channels_last(*t) for t in _as_2d(*args[:2])))
                or not all(args[i].is_contiguous() for i in _QUERY_LAYOUT.get(func, ()))):
            meta = unit_strides and unit_strides(args)
            return out if meta is None else _laid_out_as(out, meta)
        meta = iterated and iterated(args)
        if meta is not None:
            return _laid_out_as(out, meta)
        try:
            meta = laid_out(*tree_map(views.meta_like, args),
                            **tree_map(views.meta_like, kwargs))
        except (NotImplementedError, RuntimeError):  # no meta kernel: keep what we have
            return out
        if func is aten.convolution.default:
            if 0 in args[0].shape[:2]:
                return out  # CPU's _convolution answers an empty batch with a plain view
            # The meta kernel does not pick CPU's backend: CPU's (mkldnn's, and its 2-d slow
            # path's) result is channels_last when the input or the weight is (its only
            # arguments that can be; by suggest_memory_format, which a channels_last-contiguous
            # tensor with odd size-1 strides is not); the 3-d slow kernels' is contiguous.
            operands = (_as_2d(*args[:2]) if conv1d
                        else [(t.shape, t.stride()) for t in args[:2]])
            keeps = (any(_strides_like_channels_last(*t) for t in operands)
                     and conv_checks.keeps_channels_last(*args[:2], *args[3:4], *args[5:]))
            if conv1d:  # (the 2-d result's height of 1 dropped again)
                meta = (meta.unsqueeze(2).contiguous(memory_format=torch.channels_last)
                        .squeeze(2) if keeps else meta.contiguous())
            else:
                meta = meta.to(memory_format=_CHANNELS_LAST[meta.dim()] if keeps
                               else torch.contiguous_format)
        if unbatched:
            meta = tuple(m.unsqueeze(0).contiguous(memory_format=torch.channels_last_3d)
                         .squeeze(0) for m in meta)
        return _laid_out_as(out, meta)

    return handler


def _contiguous(out):
    if isinstance(out, tuple):
        return tuple(_contiguous(o) for o in out)
    return out if out.is_contiguous() else wrap(read(out))


def _follows(func, follows, args) -> bool:
    if func is aten.index.Tensor:  # its input's order, or its indices'
        return follows(args[0]) or any(i is not None and not i.is_contiguous() for i in args[1])
    return any(follows(x) for x in flat(args))


# CPU's 3-d max pooling runs an unbatched input that is channels_last_3d as a batch of one
# (c10's is_contiguous, not suggest_memory_format, which calls it contiguous) and returns that
# batch's results, channels_last_3d; the meta kernel's are contiguous.
_AS_A_BATCH_OF_ONE = {aten.max_pool3d_with_indices.default}


def _unbatched_channels_last_3d(x) -> bool:
    if type(x) is not TpuTensor or x._direct or x.dim() != 4 or x.is_contiguous():
        return False
    expected = 1
    for d in (0, 3, 2, 1):  # channels innermost, then width, height, depth
        if x.shape[d] != 1:
            if x.stride(d) != expected:
                return False
            expected *= x.shape[d]
    return True


_CHANNELS_LAST = {4: torch.channels_last, 5: torch.channels_last_3d}


def flat(args):
    """An op's arguments, a list's items in its place (cat's tensors): ATen's schemas nest no
    deeper. (pytree's walk costs ~10x this on every op.)"""
    for a in args:
        if type(a) is list or type(a) is tuple:
            yield from a
        else:
            yield a


# A copy of their first input with a part written: laid out as it (CPU clones it).
_COPIES_OF_INPUT = {aten.slice_scatter.default, aten.select_scatter.default,
                    aten.diagonal_scatter.default, aten.copy.default}
# Not tagged pointwise, but TensorIterator kernels on CPU.
_ITERATED = {aten.hardswish.default, aten.complex.default, aten.polar.default,
             aten.floor_divide.default, aten.rsub.Tensor, aten.hardtanh_backward.default,
             aten.leaky_relu_backward.default, aten.hardsigmoid_backward.default,
             aten.hardswish_backward.default, aten.mish_backward.default,
             aten.softshrink_backward.default, aten.hardshrink_backward.default}
# Not tagged pointwise, but CPU's kernels (an empty_like of the input, or TensorIterator)
# lay their results out in their input's order, as the meta kernels do (constant_pad_nd: a
# clone of the input when no pad is positive, else a contiguous tensor).
_FOLLOWING_ORDER = {*_COPIES_OF_INPUT, *_ITERATED, aten.addr.default, aten.sort.default,
                    aten.constant_pad_nd.default,
                    aten.sort.stable, aten.flip.default, aten.index.Tensor,
                    aten.index_put.default, aten.put.default, aten.native_dropout.default,
                    aten.fill.Tensor, *iterator_layout.INTO_EMPTY_LIKE}


def _first_result_in(func, format_of):
    """CPU's kernels for these allocate their (first) result in a format of the input:
    ``format_of(*args)``, in that format's own strides even where size-1 dimensions make the
    input contiguous in both. The meta kernels differ on such tensors (and padding's are
    always contiguous); ``.contiguous()`` would keep their strides."""
    def laid_out(*args):
        out = func(*args)
        fmt = format_of(*args)
        if isinstance(out, tuple):
            return (torch.empty_like(out[0], memory_format=fmt), *out[1:])
        return torch.empty_like(out, memory_format=fmt)

    return laid_out


def _input_format(at: int):
    return lambda *args: suggested_format(args[at])


def _dense_in_a_format(x) -> bool:
    return x.is_contiguous() or (x.dim() in _CHANNELS_LAST and x.is_contiguous(
        memory_format=_CHANNELS_LAST[x.dim()]))


def _contiguous_first(x) -> torch.memory_format:
    """ATen's suggest_memory_format_contig, for a tensor dense in some format: the one it is
    contiguous in, plain contiguous first."""
    return torch.contiguous_format if x.is_contiguous() else _CHANNELS_LAST[x.dim()]


def _batch_norm_format(x, *params):
    if _dense_in_a_format(x) and all(t.is_contiguous() for t in params[:4]
                                     if isinstance(t, torch.Tensor)):
        return _contiguous_first(x)
    return suggested_format(x)


def _batch_norm_grad_format(grad, x, *_):
    if (_dense_in_a_format(x) and _dense_in_a_format(grad)
            and suggested_format(x) == suggested_format(grad)):
        return _contiguous_first(x)
    return suggested_format(x)


_PADDING = [getattr(aten, f"{kind}_pad{nd}d{bw}").default for kind in ("reflection", "replication")
            for nd in (2, 3) for bw in ("", "_backward")]
_UPSAMPLING = [getattr(aten, name).default for name in (
    "upsample_nearest2d", "upsample_nearest3d", "_upsample_nearest_exact2d",
    "_upsample_nearest_exact3d", "upsample_bilinear2d", "_upsample_bilinear2d_aa",
    "upsample_bicubic2d", "_upsample_bicubic2d_aa", "upsample_trilinear3d")]
_BATCH_NORM = [aten.native_batch_norm.default, aten._native_batch_norm_legit.default,
               aten._native_batch_norm_legit.no_stats,
               aten._native_batch_norm_legit_no_training.default]
_FORMATS = {
    **{f: _input_format(int("backward" in f.__name__)) for f in _PADDING},
    **{f: _input_format(0) for f in (*_UPSAMPLING, aten.native_group_norm.default,
                                     aten.max_unpool2d.default)},
    **{f: _batch_norm_format for f in _BATCH_NORM},
    aten.native_batch_norm_backward.default: _batch_norm_grad_format,
    aten.native_group_norm_backward.default: _input_format(1),
}
# Their meta kernels ignore the indices' order (index) or do not say CPU's (the others).
_LAID_OUT_BY = {aten.index.Tensor: iterator_layout.index, aten.ldexp.Tensor: iterator_layout.ldexp,
                **{f: _first_result_in(f, format_of) for f, format_of in _FORMATS.items()},
                **{f: iterator_layout.into_empty_like(f, at)
                   for f, at in iterator_layout.INTO_EMPTY_LIKE.items()}}
# CPU's pow(Scalar, Tensor) allocates its result contiguous before it runs the iterator;
# rrelu's and log_sigmoid's kernels, log_softmax's backward and the pointwise losses'
# backwards (into a zeros_like) allocate theirs contiguous; masked_fill (tagged pointwise)
# fills a contiguous clone; im2col's kernel writes a fresh tensor (its decomposition's
# reshape of a permuted gather is a view in another order).
_CONTIGUOUS_RESULT = {aten.pow.Scalar, aten.masked_fill.Scalar, aten.rrelu_with_noise.default,
                      aten.im2col.default,
                      aten.rrelu_with_noise_functional.default,
                      aten._log_softmax_backward_data.default, aten.mse_loss_backward.default,
                      aten.smooth_l1_loss_backward.default, aten.huber_loss_backward.default,
                      aten.log_sigmoid_forward.default}


# Factorizations and solves: CPU's results are in LAPACK's column-major order whatever the
# input's (the meta kernels say which results and how).
_LAPACK_ORDER = {aten.linalg_inv_ex.default, aten.linalg_cholesky_ex.default,
                 aten.linalg_lu_factor_ex.default, aten.linalg_lu.default,
                 aten.linalg_lu_solve.default, aten._linalg_solve_ex.default,
                 aten.linalg_solve_triangular.default, aten.triangular_solve.default,
                 aten.cholesky_solve.default, aten.cholesky_inverse.default,
                 aten.linalg_qr.default, aten._linalg_svd.default, aten._linalg_eigh.default,
                 aten.linalg_eig.default, aten.geqrf.default,
                 aten.linalg_householder_product.default, aten.ormqr.default,
                 aten.linalg_lstsq.default, aten.linalg_ldl_factor_ex.default,
                 aten.linalg_ldl_solve.default}


def scattering_in_memory_order(inner: Handler) -> Handler:
    """``as_strided_scatter``: its window is in the memory of a copy of the input, which CPU
    lays out as the input. A permuted input is scattered in its memory order, then put back
    in its own."""

    def handler(args, kwargs):
        x = args[0]
        if not _permuted(x):
            return inner(args, kwargs)
        order = sorted(range(x.dim()), key=lambda d: (-x.stride()[d], d))
        out = inner((aten.permute.default(x, order), *args[1:]), kwargs)
        back = sorted(range(x.dim()), key=order.__getitem__)
        return aten.clone.default(aten.permute.default(out, back))  # x's strides

    return handler


# As CPU's flash kernels lay their results out (the fake kernels say how; ops/attention.py):
# the output as the query (which then needs the fake only when the query is not contiguous),
# the gradients in (B, L, H, E) order whatever their inputs' (so always).
_QUERY_LAYOUT = {torch.ops.torchtpu.attention.default: (0,)}
_FAKE_LAYOUT = {torch.ops.torchtpu.attention_backward.default}


def _laid_out_as(out, meta, gaps: bool = False):
    """``out`` in ``meta``'s strides where they are dense; ``gaps``: also where they skip
    elements (lstsq's solution, narrowed from a taller buffer: a view of a fresh storage as
    large as they reach)."""
    if isinstance(out, TpuTensor) and isinstance(meta, torch.Tensor):
        stride = meta.stride()
        if out.stride() == stride:
            return out
        if is_dense(out.shape, stride):
            return with_layout(read(out), stride)
        if not gaps or overlaps(tuple(out.shape), tuple(stride)):
            return out
        return aten.copy_.default(views.fresh_strided(read(out).dtype, out.shape, stride), out)
    if isinstance(out, (list, tuple)) and isinstance(meta, (list, tuple)):
        # (a tuple, as ATen returns, also for a decomposition's namedtuple)
        laid = (_laid_out_as(o, m, gaps) for o, m in zip(out, meta, strict=True))
        return list(laid) if type(out) is list else tuple(laid)
    return out


def in_columns(inner: Handler) -> Handler:
    """``nonzero``'s (N, ndim) indices laid out as CPU's, a column at a time (strides (1, N)):
    ``nonzero(as_tuple=True)``, ``where(cond)`` and ``argwhere`` then have CPU's strides."""

    def handler(args, kwargs):
        out = inner(args, kwargs)
        return with_layout(read(out), (1, out.shape[0]))

    return handler
