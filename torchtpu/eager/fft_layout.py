"""The strides of CPU's FFT results.

CPU's MKL kernels (aten/src/ATen/native/mkl/SpectralOps.cpp, ``_exec_fft``) write their
result with the batch dimensions outermost, in the input's stride order, and the transformed
dimensions innermost, in the order they are transformed (sorted by the input's strides):
``fft(x, dim=0)`` of a contiguous (5, 6) ``x`` has strides (1, 5). PyTorch's meta kernels
model cuFFT's plans instead when the device is not cpu, so the layout is computed here,
from strides alone (no meta kernel on the per-op path).
"""

from __future__ import annotations

import torch

from ..tensor import TpuTensor, contiguous_strides, is_dense, read, with_layout

aten = torch.ops.aten

FFT_OPS = {aten._fft_c2c.default, aten._fft_r2c.default, aten._fft_c2r.default}


def _by_stride(dims, stride) -> list[int]:
    # std::sort on under 16 elements is libstdc++'s insertion sort: stable, as sorted() is.
    return sorted(dims, key=lambda d: -stride[d])


def _batch_dims(ndim: int, dim) -> list[int]:
    """The dimensions not in ``dim``, in the order libstdc++'s std::partition leaves them
    (it swaps from both ends: not stable), which decides the order of equal strides."""
    order, first, last = list(range(ndim)), 0, ndim
    while True:
        while first != last and order[first] not in dim:
            first += 1
        if first == last:
            return order[:first]
        last -= 1
        while first != last and order[last] in dim:
            last -= 1
        if first == last:
            return order[:first]
        order[first], order[last] = order[last], order[first]
        first += 1


def _exec_fft_strides(in_stride, out_size, dim) -> tuple[int, ...]:
    """``_exec_fft``'s result strides: ``dim`` innermost in its order, then the other
    dimensions in ``in_stride``'s order."""
    stride = [0] * len(out_size)
    step = 1
    for d in reversed(dim):
        stride[d] = step
        step *= max(out_size[d], 1)
    batch_step = 1
    for d in reversed(_by_stride(_batch_dims(len(out_size), dim), in_stride)):
        stride[d] = batch_step * step
        batch_step *= out_size[d]
    return tuple(stride)


def _c2c_strides(size, stride, dim) -> tuple[int, ...]:
    return _exec_fft_strides(stride, size, _by_stride(dim, stride))


def fft_strides(func, x, args) -> tuple[int, ...]:
    """The strides of CPU's result of ``func(x, *args)`` (one of ``FFT_OPS``)."""
    size, stride = tuple(x.shape), x.stride()
    dim = [d % len(size) for d in args[0]] if size else list(args[0])
    if func is aten._fft_c2c.default:
        if not dim:  # a clone
            return stride if is_dense(size, stride) else contiguous_strides(size)
        return _c2c_strides(size, stride, dim)
    if func is aten._fft_r2c.default:
        out_size = list(size)
        if args[2]:  # onesided
            out_size[dim[-1]] = size[dim[-1]] // 2 + 1
        return _exec_fft_strides(stride, out_size, _by_stride(dim[:-1], stride) + dim[-1:])
    # c2r: a c2c transform over all but the last dimension, then a 1-d c2r one over that.
    if len(dim) > 1:
        stride = _c2c_strides(size, stride, dim[:-1])
    out_size = list(size)
    out_size[dim[-1]] = args[2]
    return _exec_fft_strides(stride, out_size, dim[-1:])


def laid_out_as_cpu(func, inner):
    """``inner``'s FFT result with CPU's strides (where CPU's FFT is MKL's: PocketFFT's
    results, on builds without MKL, are contiguous)."""
    if not torch.backends.mkl.is_available():
        return inner

    def handler(args, kwargs):
        out = inner(args, kwargs)
        if type(out) is not TpuTensor or out.dim() == 0:
            return out
        rest = (*args[1:], *(kwargs[a.name] for a in func._schema.arguments[len(args):]))
        stride = fft_strides(func, args[0], rest)
        if out.stride() == stride:
            return out
        return with_layout(read(out), stride)

    return handler
