"""CPU's argument checks for losses, norms and pooling (meta_errors.py's table takes these):
the checks PyTorch's meta kernels and decompositions skip, or make in another order."""

from __future__ import annotations

import numpy as np
import torch

from ..ops.dtypes import scalar_type_name, to_jax_dtype
from .kernel_dtypes import RESIZING, resizing_refuses


def _kind(dtype) -> str:
    """numpy's kind of a torch or a jax dtype: b bool, i/u integers, f/V floats, c complex."""
    return np.dtype(to_jax_dtype(dtype) if isinstance(dtype, torch.dtype) else dtype).kind


def _not_implemented(kernel: str, dtype) -> NotImplementedError:
    return NotImplementedError(f'"{kernel}" not implemented for \'{scalar_type_name(dtype)}\'')


def _floating_kernel(kernel: str, dtype) -> NotImplementedError | None:
    """CPU's kernels built for the floating dtypes only (AT_DISPATCH_FLOATING_TYPES_AND2)."""
    return _not_implemented(kernel, dtype) if _kind(dtype) in "biuc" else None


def bce_check(self, target, *_):
    """CPU's kernel reads the target in the input's dtype (int multi-hot labels are refused;
    PyTorch's decomposition would take them)."""
    if target.dtype != self.dtype:
        return (f"Found dtype {scalar_type_name(target.dtype)} but expected "
                f"{scalar_type_name(self.dtype)}")
    return None


def bce_with_logits_check(self, target, *_):
    """CPU's kernel computes in place into a buffer of the target's dtype."""
    if not self.dtype.is_floating_point:
        return NotImplementedError(
            f'"log_sigmoid_cpu" not implemented for \'{scalar_type_name(self.dtype)}\'')
    if target.dtype == torch.bool:
        return ("Subtraction, the `-` operator, with two bool tensors is not supported. Use "
                "the `^` or `logical_xor()` operator instead.")
    if not target.dtype.is_floating_point:
        return (f"result type {scalar_type_name(self.dtype)} can't be cast to the desired "
                f"output type {scalar_type_name(target.dtype)}")
    return None


def _target_dtype_check(target) -> str | None:
    name = str(target.dtype).removeprefix("torch.")  # a torch or a jax dtype
    if name not in ("int64", "uint8"):
        return (f"expected target dtype to be Long or Byte, but got "
                f"{scalar_type_name(target.dtype)}")
    return None


def nll_check(self, target, weight=None, *_) -> Exception | str | None:
    """nll_loss_forward's meta checks in CPU's order (the Python meta kernel checks the
    sizes first and words them otherwise), then the kernel's dtypes."""
    if not 1 <= self.ndim <= 2:
        return "input tensor should be 1D or 2D"
    if target.ndim > 1:
        return "0D or 1D target tensor expected, multi-target not supported"
    if error := _target_dtype_check(target):
        return error
    if self.ndim == 1 and target.ndim == 1 and target.shape[0] != 1:
        return ValueError("For 1D input, 1D target must have size 1, but got target size: "
                          f"{target.shape[0]}")
    if self.ndim == 2 and target.ndim == 1 and self.shape[0] != target.shape[0]:
        return f"size mismatch (got input: {list(self.shape)}, target: {list(target.shape)})"
    classes = self.shape[-1]
    if weight is not None and (weight.ndim != 1 or weight.shape[0] != classes):
        return (f"weight tensor should be defined either for all {classes} classes or no "
                f"classes but got weight tensor of shape: {list(weight.shape)}")
    return (_floating_kernel("nll_loss_out_frame", self.dtype)
            or _weight_dtype_check(self, weight))


def nll2d_check(self, target, weight=None, *_) -> Exception | str | None:
    # CPU's 2-d kernel then reads the target as int64 only.
    return (_target_dtype_check(target)
            or _floating_kernel("nll_loss2d_forward_out_frame", self.dtype)
            or _weight_dtype_check(self, weight)
            or ("expected scalar type Long but found Byte" if "uint8" in str(target.dtype)
                else None))


def _weight_dtype_check(self, weight) -> str | None:
    """CPU's kernels read the class weights as the input's dtype (the meta kernels do not
    look: a float16 weight for float32 input would be cast)."""
    if weight is not None and weight.dtype != self.dtype:
        return (f"expected scalar type {scalar_type_name(self.dtype)} but found "
                f"{scalar_type_name(weight.dtype)}")
    return None


def layer_norm_shapes(self, normalized_shape, weight=None, bias=None, *_) -> str | None:
    """CPU's _check_layer_norm_inputs (the meta kernel words the input's check otherwise)."""
    shape = list(normalized_shape)
    if not shape:
        return ("Expected normalized_shape to be at least 1-dimensional, i.e., containing at "
                f"least one element, but got normalized_shape = {shape}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and list(t.shape) != shape:
            return (f"Expected {name} to be of same shape as normalized_shape, but got {name} "
                    f"of shape {list(t.shape)} and normalized_shape = {shape}")
    if self.ndim < len(shape) or list(self.shape[self.ndim - len(shape):]) != shape:
        dims = "".join(f", {n}" for n in shape)
        return (f"Given normalized_shape={shape}, expected input with shape [*{dims}], but got "
                f"input of size{list(self.shape)}")
    return None


def layer_norm_kernel(self, *_) -> NotImplementedError | None:
    return _floating_kernel("LayerNormKernelImpl", self.dtype)


def _mse_check(self, target, *_) -> NotImplementedError | None:
    # (decomposed: torch tensors) the kernel runs in the promoted dtype
    return _floating_kernel("mse_cpu", torch.result_type(self, target))


def _smooth_l1_check(self, target, reduction=1, beta=1.0) -> Exception | str | None:
    if beta < 0:
        return "smooth_l1_loss does not support negative values for beta."
    return _floating_kernel("smooth_l1_cpu", torch.result_type(self, target))


def _huber_check(self, target, reduction=1, delta=1.0) -> Exception | str | None:
    if delta <= 0:
        return "huber_loss does not support non-positive values for delta."
    return _floating_kernel("huber_cpu", torch.result_type(self, target))


# The dtypes CPU's padding kernels are built for (AT_DISPATCH_ALL_TYPES_AND_COMPLEX_AND2).
_PADDED_DTYPES = {torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.complex64,
                  torch.complex128, torch.uint8, torch.int8, torch.int16, torch.int32,
                  torch.int64}


def padding_check(kind: str, nd: int):
    """CPU's checks of reflection_pad{nd}d / replication_pad{nd}d in its order: the padding's
    length, the input's dims (only a batch may be empty), a reflection past the input, the
    output's size, then the kernel's dtypes. The decompositions check none of them (a
    reflection past the input read wrong values)."""
    name = f"{kind}_pad{nd}d"

    def check(self, padding) -> Exception | str | None:
        shape, padding = list(self.shape), list(padding)
        if len(padding) != 2 * nd:
            got = f", but got: {len(padding)}" if kind == "reflection" else ""
            return f"padding size is expected to be {2 * nd}{got}"
        batched = len(shape) == nd + 2
        if not (batched or len(shape) == nd + 1) or 0 in shape[batched:]:
            return (f"Expected {nd + 1}D or {nd + 2}D (batch mode) tensor with possibly 0 batch "
                    f"size and other non-zero dimensions for input, but got: {shape}")
        pairs = [(len(shape) - 1 - i, padding[2 * i], padding[2 * i + 1]) for i in range(nd)]
        for i, (d, lo, hi) in enumerate(pairs):
            if kind == "reflection" and not (lo < shape[d] and hi < shape[d]):
                return (f"Argument #{4 + 2 * i}: Padding size should be less than the "
                        f"corresponding input dimension, but got: padding ({lo}, {hi}) at "
                        f"dimension {d} of input {shape}")
        out = list(shape)
        for d, lo, hi in pairs:
            out[d] += lo + hi
        spatial = range(len(shape) - nd, len(shape))
        # (CPU's 2-d and 3-d kernels refuse an output only when no spatial size is positive)
        if all(out[d] < 1 for d in spatial):
            names = "DHW"[3 - nd:]
            given = [f"{n}: {shape[d]}" for n, d in zip(names, spatial, strict=True)]
            if nd > 1:
                given[-2] += ","
            space = " " if (nd, kind) == (2, "replication") else ""
            wanted = " ".join(f"{n}: {out[d]}" for n, d in zip(names, spatial, strict=True))
            return f"input ({' '.join(given)}{space}) is too small. Calculated output {wanted}"
        # A negative size beside a positive one fails where CPU allocates the output: its 2-d
        # reflection resizes (the size's product overflows; with an empty batch CPU returns a
        # negative size, which no tensor here can have), the others create it.
        if (negative := next((n for n in out if n < 0), None)) is not None:
            if (nd, kind) == (2, "reflection") and 0 not in out:
                return "numel: integer multiplication overflow"
            return f"Trying to create tensor with negative dimension {negative}: {out}"
        if self.dtype not in _PADDED_DTYPES:
            return _not_implemented(name, self.dtype)
        return None

    return check


_aten = torch.ops.aten

# Decompositions (torch tensors in) that run these checks first (dispatch.py).
DECOMPOSED = {
    _aten.mse_loss.default: _mse_check,
    _aten.smooth_l1_loss.default: _smooth_l1_check,
    _aten.huber_loss.default: _huber_check,
    **{getattr(_aten, f"{kind}_pad{nd}d").default: padding_check(kind, nd)
       for kind in ("reflection", "replication") for nd in (1, 2, 3)},
}


def resize_check(dtype_check):
    """CPU's order for the resizing ops: the spatial sizes, then an empty input (only an empty
    batch may be), then the kernel's dtypes; the meta kernel checks the first two the other way
    round and hands torch._check an int for the second, and the linear rules divide by the
    output size before any check."""

    def check(self, output_size, *_, **__):
        nd = len(self.shape) - 2
        if len(output_size) == nd and (0 in self.shape[2:] or 0 in output_size):
            names = "DHW"[3 - nd:]
            given, wanted = (", ".join(f"{n}: {v}" for n, v in zip(names, s, strict=True))
                             for s in (self.shape[2:], output_size))
            joint = " and" if nd == 1 else ""  # (CPU's 1-d message says "and"; 2-d, 3-d not)
            return (f"Input and output sizes should be greater than 0, but got input ({given})"
                    f"{joint} output ({wanted})")
        if 0 in self.shape and 0 in self.shape[1:]:
            return (f"Non-empty {len(self.shape)}D data tensor expected but got a tensor with "
                    f"sizes {list(self.shape)}")
        return dtype_check(self)

    return check


def _nearest_dtypes(self):
    nd = len(self.shape) - 2
    kernel = "upsample_nearest2d_channels_last" if nd == 2 else "compute_indices_weights_nearest"
    return resizing_refuses(kernel)(self)


nearest_upsample_check = resize_check(_nearest_dtypes)
# the linear, cubic and antialiased ones (their lowerings are in meta_errors.py's table)
RESIZE_CHECKS = {getattr(_aten, name).default: resize_check(dtype_check)
                 for name, dtype_check in RESIZING.items()}


# (upsample_nearest's own, with a lowering, are checked in meta_errors.py)
DECOMPOSED.update({getattr(_aten, f"_upsample_nearest_exact{nd}d").default:
                   nearest_upsample_check for nd in (1, 2, 3)})


def embedding_check(weight, indices, *_) -> str | None:
    """CPU's checks in its order and wording (the meta kernel prints the dtype as Python
    does)."""
    if weight.ndim != 2:
        return "'weight' must be 2-D"
    if str(indices.dtype).removeprefix("torch.") not in ("int64", "int32"):
        return ("Expected tensor for argument #1 'indices' to have one of the following scalar "
                f"types: Long, Int; but got torch.{scalar_type_name(indices.dtype)}Tensor "
                "instead (while checking arguments for embedding)")
    return None


def embedding_bag_check(weight, indices, offsets, *_) -> str | None:
    """CPU's _embedding_bag_cpu_impl's rank checks, in its order (the meta kernel has none,
    and the rule would fail on the shapes)."""
    nd = len(indices.shape)
    if nd not in (1, 2):
        return f"input has to be a 1D or 2D Tensor, but got Tensor of dimension {nd}"
    if nd == 1 and len(offsets.shape) != 1:
        return f"offsets has to be a 1D Tensor, but got Tensor of dimension {len(offsets.shape)}"
    if len(weight.shape) != 2:
        return f"weight has to be a 2D Tensor, but got Tensor of dimension {len(weight.shape)}"
    return None


def leaky_relu_backward_check(grad_output, self, negative_slope, self_is_result) -> str | None:
    """An in-place forward left only its result, whose sign a negative slope flipped: CPU's
    kernel refuses it (the rule takes the slope as a static argument, so this sees it)."""
    if self_is_result and negative_slope < 0:
        return ("In-place leakyReLu backward calculation is triggered with a negative slope "
                "which is not supported. This is caused by calling in-place forward function "
                "with a negative slope, please call out-of-place version instead. File an issue "
                "at https://github.com/pytorch/pytorch if you do require supporting in-place "
                "leakRelu backward calculation with negative slope")
    return None
