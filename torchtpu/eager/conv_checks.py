"""CPU's dtype checks for a convolution, after its shape checks (meta_errors.py's table takes
them): which of its kernels the arguments reach decides both the dtypes refused and the words
for an input and weight of different dtypes."""

from __future__ import annotations

import functools
import math

import torch

from ..ops.dtypes import scalar_type_name, to_torch_dtype

# The dtypes c10 names as legacy tensor types (torch.FloatTensor); the others CPUBFloat16Type.
_LEGACY_TYPES = {torch.float32, torch.float64, torch.float16, torch.int64, torch.int32,
                 torch.int16, torch.int8, torch.uint8}
_INTEGERS = {torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64}


def _torch_dtype(dtype) -> torch.dtype:
    return dtype if isinstance(dtype, torch.dtype) else to_torch_dtype(dtype)


def _type_string(dtype) -> str:
    dtype = _torch_dtype(dtype)
    name = scalar_type_name(dtype)
    return f"torch.{name}Tensor" if dtype in _LEGACY_TYPES else f"CPU{name}Type"


@functools.cache
def _mkldnn_takes(dtype: torch.dtype) -> bool:
    """Whether this CPU's oneDNN convolves half or bfloat16 (it asks the hardware)."""
    if dtype == torch.float16:
        return torch.ops.mkldnn._is_mkldnn_fp16_supported()
    return torch.ops.mkldnn._is_mkldnn_bf16_supported()


def _uses_mkldnn(dtype, x, w, stride, dilation, groups) -> bool:
    """ATen's use_mkldnn (Convolution.cpp) for a CPU input, its 1-d shapes seen as 2-d."""
    if dtype in (torch.float16, torch.bfloat16):
        return torch.backends.mkldnn.is_available() and _mkldnn_takes(dtype)
    if dtype != torch.float32 or not torch.backends.mkldnn.is_available():
        return False
    if len(x) == 3:
        x, w = [*x[:2], 1, x[2]], [*w[:2], 1, w[2]]
    small_1x1 = (all(s == 1 for s in stride) and all(d == 1 for d in dilation) and x[0] < 16
                 and w[-1] == 1 and w[-2] == 1 and torch.get_num_threads() == 1)
    # "for some case, native is faster": one small image, a small kernel, no groups
    native_faster = not (groups > 1 or (w[-1] > 3 and w[-2] > 3) or x[0] > 1
                         or math.prod(x[:4]) > 20480)
    return not small_1x1 and not native_faster


def _kernel_refuses(input, weight, dilation, transposed) -> NotImplementedError | None:  # noqa: A002
    """CPU's slow kernels take integers (int64 alone for the dilated and transposed ones) but
    no bool; an empty batch or channel reaches none of them."""
    dtype = _torch_dtype(input.dtype)
    if dtype not in _INTEGERS or 0 in input.shape[:2]:
        return None
    nd = len(weight.shape) - 2
    if transposed or any(d != 1 for d in dilation):
        kernel = (f"slow_conv_transpose{3 if nd == 3 else 2}d_out_cpu" if transposed
                  else "slow_conv_dilated<>")
        if dtype == torch.int64:
            return None
    elif dtype == torch.bool:
        kernel = "compute_columns3d" if nd == 3 else "slow_conv2d_cpu"
    else:
        return None
    return NotImplementedError(f'"{kernel}" not implemented for \'{scalar_type_name(dtype)}\'')


def _kernel_size(input, weight, padding, dilation) -> str | None:  # noqa: A002
    """CPU's last shape check, which its meta kernel makes after the dtypes'."""
    nd = len(weight.shape) - 2
    padding, dilation = (list(p) * nd if len(p) == 1 else p for p in (padding, dilation))
    sizes = [n + 2 * p for n, p in zip(input.shape[2:], padding, strict=True)]
    kernel = [d * (k - 1) + 1 for k, d in zip(weight.shape[2:], dilation, strict=True)]
    if all(n >= k for n, k in zip(sizes, kernel, strict=True)):
        return None
    return (f"Calculated padded input size per channel: ({' x '.join(map(str, sizes))}). "
            f"Kernel size: ({' x '.join(map(str, kernel))}). Kernel size can't be greater "
            "than actual input size")


def conv_kernel_check(input, weight, bias=None, stride=(), padding=(), dilation=(),  # noqa: A002
                      transposed=False, output_padding=(), groups=1,
                      *_) -> Exception | str | None:
    """CPU's checks past its arguments': a kernel no larger than the padded input, the kernel
    CPU lacks for the input's dtype, then its words for an input and weight of different
    dtypes: oneDNN's where it would take the input, the slow kernels' scalar type check
    elsewhere. (PyTorch checks a complex input itself, naming the device's type as cuda's
    does.)"""
    if not transposed and (error := _kernel_size(input, weight, padding, dilation)):
        return error
    if (refused := _kernel_refuses(input, weight, dilation, transposed)) is not None:
        return refused
    if input.dtype == weight.dtype:
        return None
    dtype = _torch_dtype(input.dtype)
    if _uses_mkldnn(dtype, list(input.shape), list(weight.shape), stride, dilation, groups):
        return (f"Input type ({_type_string(dtype)}) and weight type "
                f"({_type_string(weight.dtype)}) should be the same or input should be a MKLDNN "
                "tensor and weight is a dense tensor")
    return (f"expected scalar type {scalar_type_name(dtype)} but found "
            f"{scalar_type_name(weight.dtype)}")
