"""CPU's checks of a convolution's arguments, in CPU's order (meta_errors.py's table takes
them): ATen's Convolution.cpp checks the parameters and shapes, then the kernel it picks
refuses dtypes and words an input and weight of different dtypes its own way. The meta kernel
checks channels first ("Invalid channel dimensions") and lets several of these through to
XLA."""

from __future__ import annotations

import functools
import math

import torch

from ..ops.dtypes import scalar_type_name, to_torch_dtype

# The dtypes c10 names as legacy tensor types (torch.FloatTensor); the others CPUBFloat16Type.
_LEGACY_TYPES = {torch.float32, torch.float64, torch.float16, torch.int64, torch.int32,
                 torch.int16, torch.int8, torch.uint8}
_INTEGERS = {torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64}


def _type_string(dtype) -> str:
    dtype = to_torch_dtype(dtype)
    name = scalar_type_name(dtype)
    return f"torch.{name}Tensor" if dtype in _LEGACY_TYPES else f"CPU{name}Type"


@functools.cache
def _mkldnn_takes(dtype: torch.dtype) -> bool:
    """Whether this CPU's oneDNN convolves half or bfloat16 (it asks the hardware)."""
    if dtype == torch.float16:
        return torch.ops.mkldnn._is_mkldnn_fp16_supported()
    return torch.ops.mkldnn._is_mkldnn_bf16_supported()


def uses_mkldnn(dtype, x, w, stride, dilation, groups, transposed=False,
                output_padding=()) -> bool:
    """ATen's use_mkldnn (Convolution.cpp) for a CPU input, its 1-d shapes seen as 2-d."""
    if transposed and any(p >= s for p, s in zip(output_padding, stride, strict=False)):
        return False  # "is_output_padding_big": the slow kernels take it
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


def _per_dim(nd: int, *params) -> list[list[int]]:
    """Each parameter with a value per spatial dimension (one value stands for all)."""
    return [list(p) * nd if len(p) == 1 else list(p) for p in params]


def keeps_channels_last(input, weight, stride, dilation, transposed, output_padding,  # noqa: A002
                        groups) -> bool:
    """Whether CPU's kernel for this convolution gives a channels_last result for a
    channels_last input or weight: oneDNN's and the 2-d slow ones do, the 3-d slow ones
    (slow_conv3d, its dilated and transposed forms) are contiguous whatever they are given."""
    if weight.dim() != 5:
        return True
    stride, dilation, output_padding = _per_dim(3, stride, dilation, output_padding)
    return uses_mkldnn(to_torch_dtype(input.dtype), list(input.shape), list(weight.shape),
                       stride, dilation, groups, transposed, output_padding)


def _kernel_refuses(input, weight, dilation, transposed) -> NotImplementedError | None:  # noqa: A002
    """CPU's slow kernels take integers (int64 alone for the dilated and transposed ones) but
    no bool; an empty batch or channel reaches none of them."""
    dtype = to_torch_dtype(input.dtype)
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


def _parameters(x, w, stride, padding, dilation, output_padding, groups) -> str | None:
    """The parameters, before any shape: their count, then their signs. (ATen refuses a
    negative dilation only: a zero one reaches the kernel, whose words _zero_dilation has.)"""
    if len(w) < 3:
        return "weight should have at least three dimensions"
    if groups <= 0:
        return "non-positive groups is not supported"
    nd = len(w) - 2
    params = {"stride": stride, "padding": padding, "dilation": dilation,
              "output_padding": output_padding}
    for name, values in params.items():
        if len(values) not in (1, nd):
            return (f"expected {name} to be a single integer value or a list of {nd} values to "
                    f"match the convolution dimensions, but got {name}={list(values)}")
    for name, bad, message in (("padding", lambda p: p < 0, "negative padding"),
                               ("output_padding", lambda p: p < 0, "negative output_padding"),
                               ("stride", lambda s: s <= 0, "non-positive stride")):
        if any(map(bad, params[name])):
            return f"{message} is not supported"
    if any(d < 0 for d in dilation):
        return "dilation should be greater than zero"
    return None


def _zero_dilation(dtype, x, w, stride, dilation, groups, transposed,
                   output_padding) -> str | None:
    """A zero dilation in the words of the kernel CPU picks: oneDNN's own check, or its
    primitive's failure for a transposed one; the slow kernels' checks, which see a 1-d
    convolution as 2-d (a height of 1) and name a transposed one's dilations one by one.
    (A complex convolution runs as real ones of its parts' dtype.)"""
    if 0 not in dilation:
        return None
    real = dtype.to_real() if dtype.is_complex else dtype
    if uses_mkldnn(real, x, w, stride, dilation, groups, transposed, output_padding):
        if not transposed:
            return "non-positive dilation is not supported"
        if len(dilation) == 3:
            return "dimensions are invalid"
        return ("could not create a primitive descriptor for the deconvolution forward "
                "propagation primitive. Run workload with environment variable "
                "ONEDNN_VERBOSE=all to get additional diagnostic information.")
    seen = [1, *dilation] if len(dilation) == 1 else list(dilation)
    if not transposed:
        return f"dilation should be greater than zero, but got {seen}"
    names = ("depth", "height", "width")[-len(seen):]
    return "dilation should be greater than zero, but got " + ", ".join(
        f"dilation_{n}: {v}" for n, v in zip(names, seen, strict=True))


def _shapes(x, w, bias, transposed, groups) -> str | None:
    if len(x) != len(w):
        return (f"Expected {len(w)}-dimensional input for {len(w)}-dimensional weight {w}, "
                f"but got {len(x)}-dimensional input of size {x} instead")
    if w[0] < groups:
        return (f"Given groups={groups}, expected weight to be at least {groups} at "
                f"dimension 0, but got weight of size {w} instead")
    if w[0] % groups:
        return (f"Given groups={groups}, expected weight to be divisible by {groups} at "
                f"dimension 0, but got weight of size [{w}] instead")
    if not transposed and x[1] != w[1] * groups:
        return (f"Given groups={groups}, weight of size {w}, expected input{x} to have "
                f"{w[1] * groups} channels, but got {x[1]} channels instead")
    if transposed and x[1] != w[0]:
        return (f"Given transposed=1, weight of size {w}, expected input{x} to have {w[0]} "
                f"channels, but got {x[1]} channels instead")
    out_channels = w[1] * groups if transposed else w[0]
    if bias is not None and list(bias.shape) != [out_channels]:
        given = "Given transposed=1, weight" if transposed else "Given weight"
        return (f"{given} of size {w}, expected bias to be 1-dimensional with {out_channels} "
                f"elements, but got bias of size {list(bias.shape)} instead")
    return None


def _output_padding(stride, output_padding, dilation) -> str | None:
    """CPU's transposed convolutions: each output padding under its stride or dilation (a
    1-d one is checked as 2-d, its height 0 of stride 1)."""
    if all(p < s or p < d for s, p, d in zip(stride, output_padding, dilation, strict=True)):
        return None
    if len(stride) == 1:
        stride, output_padding, dilation = [1, *stride], [0, *output_padding], [1, *dilation]
    names = ("depth", "height", "width")[-len(stride):]
    parts = [f"{kind}_{n}: {v}" for kind, values in (("output_padding", output_padding),
                                                    ("stride", stride), ("dilation", dilation))
             for n, v in zip(names, values, strict=True)]
    return ("output padding must be smaller than either stride or dilation, but got "
            + " ".join(parts))


def _kernel_size(input, weight, padding, dilation) -> str | None:  # noqa: A002
    """CPU's last shape check, which its meta kernel makes after the dtypes'."""
    sizes = [n + 2 * p for n, p in zip(input.shape[2:], padding, strict=True)]
    kernel = [d * (k - 1) + 1 for k, d in zip(weight.shape[2:], dilation, strict=True)]
    if all(n >= k for n, k in zip(sizes, kernel, strict=True)):
        return None
    return (f"Calculated padded input size per channel: ({' x '.join(map(str, sizes))}). "
            f"Kernel size: ({' x '.join(map(str, kernel))}). Kernel size can't be greater "
            "than actual input size")


def convolution_check(input, weight, bias=None, stride=(), padding=(), dilation=(),  # noqa: A002
                      transposed=False, output_padding=(), groups=1,
                      *_) -> Exception | str | None:
    """The first of CPU's checks these arguments fail: the parameters, the shapes, a kernel
    no larger than the padded input, an input empty but in its batch or channels, the
    kernel's own checks (a transposed one's output padding, the dtypes it lacks), then its
    words for a weight or bias of another dtype than the input's: oneDNN's where it would
    take the input, the slow kernels' elsewhere (which cast a bias, or add it in place).
    (PyTorch checks a complex input itself, naming the device's type as cuda's does.)"""
    x, w = list(input.shape), list(weight.shape)
    if error := _parameters(x, w, stride, padding, dilation, output_padding, groups):
        return error
    nd = len(w) - 2
    stride, padding, dilation, output_padding = _per_dim(nd, stride, padding, dilation,
                                                         output_padding)
    if error := _shapes(x, w, bias, transposed, groups):
        return error
    if not transposed and (error := _kernel_size(input, weight, padding, dilation)):
        return error
    if 0 not in x[:2] and 0 in x:
        shape = [*x[:2], 1, x[2]] if nd == 1 else x  # seen as 2-d
        return f"Only zero batch or zero channel inputs are supported, but got input shape: {shape}"
    dtype = to_torch_dtype(input.dtype)
    if 0 not in x[:2] and (error := _zero_dilation(dtype, x, w, stride, dilation, groups,
                                                    transposed, output_padding)):
        return error
    if transposed and (error := _output_padding(stride, output_padding, dilation)):
        return error
    if (refused := _kernel_refuses(input, weight, dilation, transposed)) is not None:
        return refused
    if input.dtype == weight.dtype and (bias is None or bias.dtype == input.dtype):
        return None
    mkldnn = uses_mkldnn(dtype, x, w, stride, dilation, groups, transposed, output_padding)
    if input.dtype != weight.dtype:
        if mkldnn:
            return _mkldnn_mismatch(dtype, "weight", weight.dtype)
        return (f"expected scalar type {scalar_type_name(dtype)} but found "
                f"{scalar_type_name(weight.dtype)}")
    if mkldnn:
        return _mkldnn_mismatch(dtype, "bias", bias.dtype)
    # the slow transposed kernels add the bias in place; the others cast it
    result = torch.promote_types(dtype, to_torch_dtype(bias.dtype))
    if transposed and not torch.can_cast(result, dtype):
        return (f"result type {scalar_type_name(result)} can't be cast to the desired output "
                f"type {scalar_type_name(dtype)}")
    return None


def _mkldnn_mismatch(dtype, name: str, other) -> str:
    return (f"Input type ({_type_string(dtype)}) and {name} type ({_type_string(other)}) should "
            f"be the same or input should be a MKLDNN tensor and {name} is a dense tensor")
