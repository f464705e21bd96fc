"""CPU's argument checks for pooling, in CPU's order and words (meta_errors.py's table takes
these). PyTorch's meta kernels word them otherwise ("kH: 2, kW: 2" where CPU prints
"kH: 2 kW: 2"), round a negative kernel's half down where C++ truncates it (so a kernel of -1
met the padding check before the kernel's own), and skip some (fractional pooling's samples,
an empty channel to 3-d adaptive average pooling)."""

from __future__ import annotations

import torch

from ..ops.dtypes import scalar_type_name
from .kernel_dtypes import FLOATS, KERNEL_DTYPE_CHECKS, kernel_takes

_aten = torch.ops.aten


def _half(n: int) -> int:
    """C++'s n / 2: truncated toward zero."""
    return -(-n // 2) if n < 0 else n // 2


def _spread(values, nd: int, name: str, op: str, counts: str, omit: bool = False) -> tuple:
    values = tuple(values)
    if not (len(values) in (1, nd) or (omit and not values)):
        raise RuntimeError(f"{op}: {name} {counts}")
    return values * nd if len(values) == 1 else values


def _output_size(size, k, pad, stride, dilation, ceil_mode) -> int:
    """CPU's pooling_output_shape, with its checks."""
    if stride == 0:
        raise RuntimeError("stride should not be zero")
    if pad < 0:
        raise RuntimeError(f"pad must be non-negative, but got pad: {pad}")
    if pad > _half((k - 1) * dilation + 1):
        raise RuntimeError(f"pad should be at most half of effective kernel size, but got "
                           f"pad={pad}, kernel_size={k} and dilation={dilation}")
    out = (size + 2 * pad - dilation * (k - 1) - 1 + (stride - 1 if ceil_mode else 0)) // stride
    out += 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _sizes(shape) -> str:
    return str(list(shape))


def _pool2d(self, k, s, p, d, ceil_mode):
    shape = list(self.shape)
    names = ("H", "W")
    if len(shape) < 3:  # CPU reads the planes at -3 first
        raise IndexError(f"Dimension out of range (expected to be in range of "
                         f"[{-max(len(shape), 1)}, {max(len(shape), 1) - 1}], but got -3)")
    out = [_output_size(shape[-2 + i], k[i], p[i], s[i], d[i], ceil_mode) for i in range(2)]
    for label, v in (("kernel size", k), ("stride", s), ("dilation", d)):
        if min(v) <= 0:
            prefix = {"kernel size": "k", "stride": "d", "dilation": "dilation"}[label]
            got = " ".join(f"{prefix}{n}: {x}" for n, x in zip(names, v, strict=True))
            raise RuntimeError(f"{label} should be greater than zero, but got {got}")
    ndim = len(shape)
    valid = shape[1] != 0 and shape[2] != 0
    if not ((ndim == 3 and shape[0] != 0 and valid) or (ndim == 4 and valid and shape[3] != 0)):
        raise RuntimeError("Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size "
                           f"for input, but got:{_sizes(shape)}")
    if k[1] // 2 < p[1] or k[0] // 2 < p[0]:
        raise RuntimeError(f"pad should be smaller than or equal to half of kernel size, but got "
                           f"padW = {p[1]}, padH = {p[0]}, kW = {k[1]}, kH = {k[0]}")
    if min(out) < 1:
        planes, (h, w) = shape[-3], shape[-2:]
        raise RuntimeError(f"Given input size: ({planes}x{h}x{w}). Calculated output size: "
                           f"({planes}x{out[0]}x{out[1]}). Output size is too small")


def _pool3d(fn_name: str, self, k, s, p, d, ceil_mode, check_input_size=False):
    shape = list(self.shape)
    out = [_output_size(shape[-3 + i], k[i], p[i], s[i], d[i], ceil_mode) for i in range(3)]
    for label, prefix, v in (("kernel size", "k", k), ("stride", "d", s),
                             ("dilation", "dilation", d)):
        if min(v) <= 0:
            got = " ".join(f"{prefix}{n}: {x}" for n, x in zip("THW", v, strict=True))
            raise RuntimeError(f"{label} should be greater than zero, but got {got}")
    for i, n in enumerate(shape):
        if n <= 0 and not (len(shape) == 5 and i == 0):
            raise RuntimeError(f"{fn_name}: Expected input's non-batch dimensions to have "
                               f"positive length, but input has a shape of {_sizes(shape)} and "
                               f"non-batch dimension {n} has length zero!")
    t, h, w = shape[-3:]
    if check_input_size and not (t >= k[0] and h >= k[1] and w >= k[2]):
        raise RuntimeError(f"input image (T: {t} H: {h} W: {w}) smaller than kernel size "
                           f"(kT: {k[0]} kH: {k[1]} kW: {k[2]})")
    if k[0] // 2 < p[0] or k[2] // 2 < p[2] or k[1] // 2 < p[1]:
        raise RuntimeError(f"pad should be smaller than or equal to half of kernel size, but got "
                           f"kT: {k[0]} kW: {k[2]} kH: {k[1]} padT: {p[0]} padW: {p[2]} "
                           f"padH: {p[1]}")
    if min(out) < 1:
        planes = shape[-4]
        raise RuntimeError(f"Given input size: ({planes}x{t}x{h}x{w}). Calculated output size: "
                           f"({planes}x{out[0]}x{out[1]}x{out[2]}). Output size is too small")


def _max_pool_check(nd: int):
    op = f"max_pool{nd}d"
    count = "two" if nd == 2 else "three"

    def check(self, kernel_size, stride=(), padding=(0,), dilation=(1,), ceil_mode=False):
        k = _spread(kernel_size, nd, "kernel_size", op,
                    f"must either be a single int, or a tuple of {count} ints")
        s = _spread(stride, nd, "stride", op,
                    f"must either be omitted, a single int, or a tuple of {count} ints",
                    omit=True) or k
        p = _spread(padding, nd, "padding", op,
                    f"must either be a single int, or a tuple of {count} ints")
        d = _spread(dilation, nd, "dilation", op,
                    f"must be either a single int, or a tuple of {count} ints")
        if len(self.shape) not in (nd + 1, nd + 2):
            return (f"non-empty {nd + 1}D or {nd + 2}D (batch mode) tensor expected for input")
        if nd == 2:
            _pool2d(self, k, s, p, d, ceil_mode)
        else:
            _pool3d("max_pool3d_with_indices_out_cpu_template()", self, k, s, p, d, ceil_mode)
        return dtypes(self)

    dtypes = KERNEL_DTYPE_CHECKS[getattr(_aten, f"max_pool{nd}d_with_indices").default]
    return check


def _avg_pool_check(nd: int):
    op = f"avg_pool{nd}d"

    def check(self, kernel_size, stride=(), padding=(0,), ceil_mode=False,
              count_include_pad=True, divisor_override=None):
        if nd == 2:
            either, two = "must either", "two"
        else:
            either, two = "must", "three"
        k = _spread(kernel_size, nd, "kernel_size", op, f"{either} be a single int, or a tuple "
                    f"of {two} ints")
        s = _spread(stride, nd, "stride", op, f"{either} be omitted, a single int, or a tuple "
                    f"of {two} ints", omit=True) or k
        p = _spread(padding, nd, "padding", op, f"{either} be a single int, or a tuple of {two} "
                    "ints")
        if nd == 3 and len(self.shape) not in (4, 5):
            return "non-empty 4D or 5D (batch mode) tensor expected for input"
        if divisor_override is not None and divisor_override == 0:
            return "divisor must be not zero"
        if nd == 2:
            _pool2d(self, k, s, p, (1, 1), ceil_mode)
        else:
            _pool3d("avg_pool3d()", self, k, s, p, (1, 1, 1), ceil_mode, check_input_size=True)
        return dtypes(self)

    dtypes = KERNEL_DTYPE_CHECKS[getattr(_aten, op).default]
    return check


def adaptive_avg_check(nd: int):
    """CPU's 2-d kernel checks the spatial dims for emptiness, its 3-d one every non-batch dim."""

    def check(self, output_size):
        if self.ndim not in (nd + 1, nd + 2):
            return (f"adaptive_avg_pool{nd}d(): Expected {nd + 1}D or {nd + 2}D tensor, but got "
                    f"{list(self.shape)}")
        for i in range(-nd, 0) if nd == 2 else range(1 - self.ndim, 0):
            if self.shape[i] == 0:
                return (f"adaptive_avg_pool{nd}d(): Expected input to have non-zero size for "
                        f"non-batch dimensions, but input has sizes {list(self.shape)} with "
                        f"dimension {i + self.ndim} being empty")
        return kernel(self)

    kernel = kernel_takes("adaptive_avg_pool2d" if nd == 2 else "adaptive_avg_pool3d_cpu",
                          FLOATS)
    return check


def adaptive_avg_backward_check(nd: int):
    """The meta kernel's message, which CPU words without its stray spaces."""

    def check(grad_output, self):
        for i in range(1, grad_output.ndim):
            if grad_output.shape[i] == 0:
                return (f"adaptive_avg_pool{nd}d_backward(): Expected grad_output to have "
                        f"non-zero size for non-batch dimensions, but grad_output has sizes "
                        f"{list(grad_output.shape)} with dimension {i} being empty")
        return None

    return check


def _fractional_check(nd: int):
    names = ("height", "width") if nd == 2 else ("time", "height", "width")
    fn = "fractional_max_pool2d()" if nd == 2 else "fractional_max_pool3d_out()"

    def check(self, kernel_size, output_size, random_samples):
        for name, v in (("kernel_size", kernel_size), ("output_size", output_size)):
            if len(v) != nd:
                return (f"fractional_max_pool{nd}d: {name} must either be a single Int or tuple "
                        f"of {'' if nd == 2 else 'three '}Ints")
        shape = list(self.shape)
        if len(shape) not in (nd + 1, nd + 2):
            return f"{fn}: Expected {nd + 1}D or {nd + 2}D tensor, but got: {shape}"
        for i in range(1, len(shape)):
            if shape[i] == 0:
                return (f"{fn}: Expected input to have non-zero size for non-batch dimensions, "
                        f"but got{shape} with dimension {i} being empty.")
        for name, o, k, n in zip(names, output_size, kernel_size, shape[-nd:], strict=True):
            # (CPU's 3-d kernel wants a window to spare: its check is strict)
            if o + k - 1 > n or (nd == 3 and o + k - 1 == n):
                return f"{fn}: pool {name} {k} too large relative to input {name} {n}"
        out = [*shape[:-nd], *output_size]
        if (negative := next((o for o in output_size if o < 0), None)) is not None:
            return f"Trying to create tensor with negative dimension {negative}: {out}"
        if random_samples.dtype != self.dtype:
            return "Expect _random_samples to have the same dtype as input"
        if random_samples.ndim != 3:
            return f"Expect _random_samples to have 3 dimensions, got {random_samples.ndim}"
        batch = shape[0] if len(shape) == nd + 2 else 1
        n, c, d = random_samples.shape
        if n < batch:
            return "Expect _random_samples.size(0) no less then input batch size."
        if c != shape[-nd - 1]:
            return "Expect _random_samples.size(1) equals to input channel size."
        if d != nd:
            return f"Expect _random_samples.size(2) equals to {nd}; got {d}."
        return kernel(self)

    kernel = kernel_takes(f"fractional_max_pool{nd}d_out_frame", FLOATS)
    return check


def _max_unpool_check(nd: int):
    """The decomposition's checks, in CPU's words (c10's dtype names, sizes as lists), then
    CPU's kernel's dtypes."""
    dims = "(height, width)" if nd == 2 else "(depth, height, width)"
    count = "two" if nd == 2 else "three"

    def check(self, indices, output_size, stride=None, padding=None):
        if str(indices.dtype).removeprefix("torch.") != "int64":
            got = f" but got: {scalar_type_name(indices.dtype)}" if nd == 2 else ""
            return f"elements in indices should be type int64{got}"
        shape = list(self.shape)
        sized = [("output_size", output_size, "")]
        if nd == 3:
            sized += [("stride", stride, ":"), ("padding", padding, ":")]
        ndim_error = (f"Input to max_unpooling{nd}d should be a {nd + 1}d or {nd + 2}d Tensor, "
                      f"but got a tensor with {len(shape)} dimensions.")
        if nd == 2 and len(output_size) != 2:
            return (f"There should be exactly two elements {dims} in output_size, but got "
                    f"{len(output_size)} elements.")
        if len(shape) not in (nd + 1, nd + 2):
            return ndim_error
        for name, v, colon in sized if nd == 3 else ():
            if len(v) != 3:
                return (f"There should be exactly {count} elements {dims} in {name}, but "
                        f"got{colon} {len(v)} elements.")
        if shape != list(indices.shape):
            return (f"Expected shape of indices to be same as that of the input tensor ({shape}) "
                    f"but got indices tensor with shape: {list(indices.shape)}")
        for i in range(1, len(shape)):
            if shape[i] <= 0:
                return (f"max_unpooling{nd}d_forward_out_cpu(): Expected input to have non-zero "
                        f"size for non-batch dimensions, but got {shape} with dimension {i} "
                        "being empty.")
        if nd == 3 and min(stride) <= 0:
            return f"strides should be greater than zero, but got stride: {list(stride)}"
        return kernel(self)

    kernel = kernel_takes(f"max_unpool{nd}d", FLOATS)
    return check


CHECKS = {
    **{getattr(_aten, f"max_pool{nd}d_with_indices").default: _max_pool_check(nd)
       for nd in (2, 3)},
    **{getattr(_aten, f"avg_pool{nd}d").default: _avg_pool_check(nd) for nd in (2, 3)},
    _aten._adaptive_avg_pool2d.default: adaptive_avg_check(2),
    _aten._adaptive_avg_pool3d.default: adaptive_avg_check(3),
    _aten._adaptive_avg_pool2d_backward.default: adaptive_avg_backward_check(2),
    _aten._adaptive_avg_pool3d_backward.default: adaptive_avg_backward_check(3),
    _aten.fractional_max_pool2d.default: _fractional_check(2),
    _aten.fractional_max_pool3d.default: _fractional_check(3),
    _aten.max_unpool2d.default: _max_unpool_check(2),
    _aten.max_unpool3d.default: _max_unpool_check(3),
}
