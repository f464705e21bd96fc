"""CPU's wording for errors PyTorch's meta kernels word their own way.

Shape inference runs PyTorch's meta kernels, so invalid input raises PyTorch's exception. Some
meta kernels are Python references whose messages differ from the CPU kernels' ("Attempting
to broadcast a dimension..." where CPU says "The size of tensor a (3) must match..."); users
and their tests know CPU's, so those few are reworded here.
"""

from __future__ import annotations

import ast
import math
import re
import warnings
from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np
import torch

from ..ops.dtypes import cpp_name, scalar_type_name, to_torch_dtype
from ..ops.reduction import check_nonempty
from . import (
    conv_checks,
    distance_checks,
    fft_checks,
    foreach_checks,
    indexing_checks,
    matmul_checks,
    nn_checks,
    pooling_checks,
)
from .clamp_checks import CLAMP_CHECKS
from .kernel_dtypes import (
    KERNEL_DTYPE_CHECKS,
    kernel_refuses,
    not_for_bool,
    result_refuses,
    same_dtype,
)
from .number_checks import overflow_error
from .reduction_checks import (
    arg_reduction_check,
    histc_range,
    nonempty_check,
    repeated_dim,
)

_MATMUL = re.compile(r"a and b must have same reduction dim, but got \[(.*)\] X \[(.*)\]")
_CAT = re.compile(r"Sizes of tensors must match except in dimension (\d+)\. "
                  r"Expected (\d+) in dimension \d+ but got (\d+) for tensor number (\d+)")
_DTYPE = re.compile(r"torch\.(\w+)")
# Meta kernels' dtype checks (linalg's, solvers') that print a dtype as Python does.
_NAMING_DTYPES = ("tensor as input", "could not infer output dtype", "to have the same dtype",
                   "does not match input dtype", "convertible without narrowing",
                   "Low precision dtypes not supported", "only supports floating-point dtypes")
# squareCheckInputs: the meta kernel's wording, then CPU's (LinearAlgebraUtils.h)
_SQUARE_NDIM = re.compile(r"(\S+): The input tensor must have at least 2 dimensions, got \d+$")
# CPU's vector_norm message lacks the space after the dimension
_EMPTY_NORM_DIM = re.compile(r"(linalg\.vector_norm cannot compute the \S+ norm on the "
                             r"dimension -?\d+) (because this dimension is empty)")
_TORCH_SIZE = re.compile(r"torch\.Size\((\[[^\]]*\])\)")
_MV = re.compile(r"size mismatch, got input \((\d+)x(\d+)\), vec \((\d+)\)")
# lerp's meta check, which prints dtypes as Python does; CPU's as c10 does, without the comma
_LERP_DTYPE = re.compile(r"expected dtype torch\.(\w+) for `(\w+)`, but got dtype torch\.(\w+)$")
_META_TYPE = re.compile(r"\bMeta(\w+)Type\{")  # a meta tensor as c10 prints it: MetaFloatType{
_INDEX_ADD = re.compile(r"Number of indices \((\d+)\) should be equal to tensor\.size\(dim\) "
                        r"\((\d+)\), for dim=(-?\d+)")
_NDIM = re.compile(r"Number of dimensions of tensors must match\.  Expected (\d+)-D tensors, "
                   r"but got (\d+)-D")
# Checks whose condition CPU's also fails, worded otherwise.
_SCATTERS_FROM_TENSOR = frozenset(
    getattr(torch.ops.aten, name).default if overload == "default"
    else getattr(getattr(torch.ops.aten, name), overload)
    for name, overload in (("scatter", "src"), ("scatter_", "src"), ("scatter", "reduce"),
                           ("scatter_", "reduce"), ("scatter_add", "default"),
                           ("scatter_add_", "default"), ("scatter_reduce", "two"),
                           ("scatter_reduce_", "two")))
_SCATTER_REDUCES = (torch.ops.aten.scatter_reduce.two, torch.ops.aten.scatter_reduce_.two)
_SCATTER_REDUCTIONS = "reduce argument must be either sum, prod, mean, amax or amin."
_SAME_CHECK = {
    "torch.ormqr: tau.shape[-1] must be less than or equal to input.shape[-1]":
        "torch.ormqr: tau.shape[-1] must be equal to min(other.shape[-2], input.shape[-1])",
}


def check_as_cpu(op, args: Sequence, kwargs: dict | None = None) -> None:
    """CPU's argument checks for an op whose meta kernel checks less, or in another order."""
    if (at := _DIM_AT.get(op)) is not None:
        dim = (kwargs or {}).get(at) if isinstance(at, str) else (args[at:] or [None])[0]
        if dim is not None:
            _check_dim(dim, len(args[0].shape))
    check = _CPU_CHECKS.get(op)
    kw = (kwargs or {}) if op in _WITH_KWARGS else {}
    if check is not None and (error := check(*args, **kw)):
        raise error if isinstance(error, Exception) else RuntimeError(error)


def has_cpu_check(op) -> bool:
    return op in _DIM_AT or op in _CPU_CHECKS


def _check_dim(dim: int, ndim: int) -> None:
    """c10's maybe_wrap_dim: a 0-d tensor takes dims -1 and 0."""
    top = max(ndim, 1)
    if not -top <= dim < top:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-top}, "
                         f"{top - 1}], but got {dim})")


def as_cpu_accepts(op, meta_args: list) -> list:
    """Meta arguments for an op whose meta kernel refuses what CPU's kernel accepts."""
    adapt = _CPU_ACCEPTS.get(op)
    return meta_args if adapt is None else adapt(meta_args)


def _uint8_condition(args: list) -> list:
    if isinstance(args[0], torch.Tensor) and args[0].dtype == torch.uint8:
        warnings.warn("where received a uint8 condition tensor. This behavior is deprecated "
                      "and will be removed in a future version of PyTorch. Use a boolean "
                      "condition instead.", UserWarning, stacklevel=2)
        return [args[0].bool(), *args[1:]]
    return args


def _byte_target(at: int):
    # CPU's nll_loss takes uint8 targets; the meta kernels' gather and scatter do not.
    def adapt(args: list) -> list:
        target = args[at]
        if isinstance(target, torch.Tensor) and target.dtype == torch.uint8:
            return [*args[:at], target.long(), *args[at + 1:]]
        return args

    return adapt


def _reduction_alias(args: list) -> list:
    # CPU's scatter_reduce also takes "max" and "min" (for amax and amin)
    if len(args) > 4 and args[4] in ("max", "min"):
        return [*args[:4], "a" + args[4], *args[5:]]
    return args


def _wrapped_norm_dims(args: list) -> list:
    # vector_norm's reference checks an empty input's dims unwrapped: a negative dim counts as
    # empty though its size is not (CPU's kernel wraps it first); an empty one stays as given,
    # for CPU's message
    x, dim = args[0], (args[2:3] or [None])[0]
    if not isinstance(x, torch.Tensor) or x.ndim == 0 or not isinstance(dim, (list, tuple)):
        return args
    dim = [d + x.ndim if -x.ndim <= d < 0 and x.shape[d] else d for d in dim]
    return [*args[:2], dim, *args[3:]]


_CPU_ACCEPTS = {torch.ops.aten.where.self: _uint8_condition,
                **dict.fromkeys(_SCATTER_REDUCES, _reduction_alias),
                torch.ops.aten.linalg_vector_norm.default: _wrapped_norm_dims,
                torch.ops.aten.nll_loss_forward.default: _byte_target(1),
                torch.ops.aten.nll_loss2d_forward.default: _byte_target(1),
                torch.ops.aten.nll_loss_backward.default: _byte_target(2),
                torch.ops.aten.nll_loss2d_backward.default: _byte_target(2)}


def cpu_wording(op, error: RuntimeError, args: Sequence) -> RuntimeError | None:
    """CPU's message for ``error``, raised while checking ``op`` on ``args`` (arrays and
    static values, in schema order), or None when it already reads as CPU's."""
    text = str(error)
    tensors = [x for a in args for x in (a if isinstance(a, (list, tuple)) else (a,))
               if hasattr(x, "shape") and hasattr(x, "dtype")]
    shapes = [tuple(x.shape) for x in tensors]
    if text.startswith("('") and (parts := _message_parts(text)):
        return RuntimeError("".join(parts))
    if "without overflow" in text and text.startswith("could not convert") and tensors:
        return overflow_error(str(tensors[0].dtype))
    if text.startswith("Mask must be bool or uint8") and len(tensors) > 1:
        return RuntimeError("masked_scatter_ only supports boolean masks, but got mask with "
                            f"dtype {scalar_type_name(tensors[1].dtype)}")
    if m := _NDIM.match(text):
        return RuntimeError(f"Tensors must have same number of dimensions: got {m.group(1)} "
                            f"and {m.group(2)}")
    if text in _SAME_CHECK:
        return RuntimeError(_SAME_CHECK[text])
    if text.startswith("Expected index ") and op in _SCATTERS_FROM_TENSOR:
        # CPU checks the index against self and src at once, in one message
        self, dim, index, src = args[:4]
        return RuntimeError(
            f"Expected index {list(index.shape)} to be no larger than self {list(self.shape)} "
            f"apart from dimension {dim % max(len(self.shape), 1)} and to be no larger size "
            f"than src {list(src.shape)}")
    if text == _SCATTER_REDUCTIONS and op in _SCATTER_REDUCES:
        return RuntimeError(f"{text[:-1]}, got {args[4]}")
    if text == "duplicate value in the list of dims" and tensors:
        return RuntimeError(repeated_dim(len(tensors[0].shape), args) or text)
    if m := _MV.match(text):
        rows, cols, n = m.groups()
        return RuntimeError(f"size mismatch, got input ({rows}), mat ({rows}x{cols}), vec ({n})")
    if "to have thesame number" in text:  # the dot meta kernel's typo
        return RuntimeError(text.replace("thesame", "the same"))
    if text.startswith("Attempting to broadcast a dimension"):
        if (order := _BROADCAST_ORDER.get(op)) is not None:
            return RuntimeError(order(*args) or text)
        if len(args) > 1 and all(isinstance(a, (list, tuple)) for a in args[:2]):
            pairs = (_broadcast_message([a.shape, b.shape])
                     for a, b in zip(*args[:2], strict=False))
            return RuntimeError(next(filter(None, pairs), None) or text)  # foreach: a pair
        return RuntimeError(_broadcast_message(shapes) or text)
    if m := _MATMUL.match(text):
        a, b = (x.replace(", ", "x") for x in m.groups())
        return RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a} and {b})")
    if m := _CAT.match(text):
        dim, want, got, i = m.groups()
        return RuntimeError(f"Sizes of tensors must match except in dimension {dim}. Expected "
                            f"size {want} but got size {got} for tensor number {i} in the list.")
    if "torch.Size([" in text:  # Python meta kernels print a size so, CPU as a list
        return RuntimeError(_TORCH_SIZE.sub(r"\1", text))
    if _META_TYPE.search(text):  # PyTorch's own meta kernels print a CPU tensor's type
        return RuntimeError(_META_TYPE.sub(r"torch.\1Tensor{", text))
    if text.startswith("linalg.inv_ex:"):  # CPU's inv_ex checks as linalg.inv
        text = text.replace("linalg.inv_ex:", "linalg.inv:", 1)
        return cpu_wording(op, RuntimeError(text), args) or RuntimeError(text)
    if m := _SQUARE_NDIM.match(text):
        return RuntimeError(f"{m.group(1)}: The input tensor A must have at least 2 dimensions.")
    if _EMPTY_NORM_DIM.match(text):
        return RuntimeError(_EMPTY_NORM_DIM.sub(r"\1\2", text))
    if m := _INDEX_ADD.match(text):
        return RuntimeError("index_add_(): Number of indices ({}) should be equal to "
                            "source.size(dim): ({}), for dim: {}".format(*m.groups()))
    if m := _LERP_DTYPE.match(text):
        want, name, got = m.groups()
        return RuntimeError(f"expected dtype {cpp_name(getattr(torch, want))} for `{name}` but "
                            f"got dtype {cpp_name(getattr(torch, got))}")
    if "torch." in text and any(s in text for s in _NAMING_DTYPES):  # c10 names them
        return RuntimeError(_DTYPE.sub(lambda m: _c10_name(m.group(1)), text))
    return None


def _message_parts(text: str) -> tuple | None:
    """A meta kernel's message given as a tuple of strings (addcdiv's), printed as one."""
    try:
        parts = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None
    return parts if isinstance(parts, tuple) and all(isinstance(p, str) for p in parts) else None


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


def _bce_with_logits_order(self, target, weight=None, pos_weight=None, *_) -> str | None:
    # CPU's formula meets pos_weight with the target first, the weight last
    shapes = [t.shape for t in (pos_weight, target, self, weight) if t is not None]
    return _broadcast_message(shapes)


def _c10_name(name: str) -> str:
    dtype = getattr(torch, name, None)
    return scalar_type_name(dtype) if isinstance(dtype, torch.dtype) else f"torch.{name}"


def _bool_subtraction(self, other, *_) -> str | None:
    """ATen's sub_check (a bool number counts as a bool operand)."""
    bools = [isinstance(x, bool) or str(getattr(x, "dtype", None)) == "bool"
             for x in (self, other)]
    if all(bools):
        return ("Subtraction, the `-` operator, with two bool tensors is not supported. Use "
                "the `^` or `logical_xor()` operator instead.")
    if any(bools):
        return ("Subtraction, the `-` operator, with a bool tensor is not supported. If you "
                "are trying to invert a mask, use the `~` or `logical_not()` operator instead.")
    return None


def _softmax_check(kernel: str):
    def check(self, dim, *_):
        if self.dtype.kind in "iubc":
            last = dim % max(self.ndim, 1) == max(self.ndim, 1) - 1
            name = f"{kernel}_lastdim_kernel_impl" if last else f"{kernel}_kernel_impl"
            return NotImplementedError(
                f'"{name}" not implemented for \'{scalar_type_name(self.dtype)}\'')
        return None

    return check


def _shuffle_common(op: str, self, factor_name: str, factor: int) -> str | None:
    if self.ndim < 3:
        return (f"{op} expects input to have at least 3 dimensions, but got input "
                f"with {self.ndim} dimension(s)")
    if factor <= 0:
        return f"{op} expects a positive {factor_name}, but got {factor}"
    return None


def _pixel_shuffle_check(self, upscale_factor):
    if message := _shuffle_common("pixel_shuffle", self, "upscale_factor", upscale_factor):
        return message
    if self.shape[-3] % (upscale_factor * upscale_factor):
        return ("pixel_shuffle expects its input's 'channel' dimension to be divisible by the "
                f"square of upscale_factor, but input.size(-3)={self.shape[-3]} is not "
                f"divisible by {upscale_factor * upscale_factor}")
    return None


def _pixel_unshuffle_check(self, downscale_factor):
    if message := _shuffle_common("pixel_unshuffle", self, "downscale_factor",
                                  downscale_factor):
        return message
    for dim, side in ((-2, "height"), (-1, "width")):
        if self.shape[dim] % downscale_factor:
            return (f"pixel_unshuffle expects {side} to be divisible by downscale_factor, but "
                    f"input.size({dim})={self.shape[dim]} is not divisible by "
                    f"{downscale_factor}")
    return None


def _grid_sampler_check(input, grid, *_):  # noqa: A002
    """check_grid_sampler_common, in CPU's order."""
    if message := same_dtype(input, grid):
        return message
    if grid.shape[0] != input.shape[0]:
        return ("grid_sampler(): expected grid and input to have same batch size, but got "
                f"input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
    if grid.shape[-1] != input.ndim - 2:
        return (f"grid_sampler(): expected grid to have size {input.ndim - 2} in last "
                f"dimension, but got grid with sizes {list(grid.shape)}")
    for i in range(2, input.ndim):
        if input.shape[i] == 0:
            return ("grid_sampler(): expected input to have non-empty spatial dimensions, but "
                    f"input has sizes {list(input.shape)} with dimension {i} being empty")
    return None


def _floating_only(message: str):
    """var/std and var_mean (CPU's check; PyTorch's meta kernels take integers)."""
    def check(self, *_, **__):
        name = str(self.dtype)  # a torch or a jax dtype
        return None if "float" in name or "complex" in name else message

    return check


_VAR = _floating_only("std and var only support floating point and complex dtypes")


def _mean_dtype(self, *_, dtype=None, **__) -> str | None:
    """CPU infers mean's result dtype before it reads the dims (PyTorch's ref, the other way)."""
    name = str(self.dtype)  # a torch or a jax dtype
    if dtype is None and "float" not in name and "complex" not in name:
        return ("mean(): could not infer output dtype. Input dtype must be either a floating "
                f"point or complex dtype. Got: {scalar_type_name(self.dtype)}")
    return None


def _masked_fill_check(self, mask, value=None) -> str | None:
    """CPU's masked_fill: a tensor value's dims first, then the mask's dtype."""
    if getattr(value, "ndim", 0):
        return ("masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                f"{value.ndim} dimension(s).")
    if np.dtype(mask.dtype) != np.bool_:
        return ("masked_fill_ only supports boolean masks, but got mask with dtype "
                f"{cpp_name(mask.dtype)}")
    return None


def _index_select_check(self, dim, index) -> Exception | None:
    if index.ndim > 1:
        return IndexError("index_select(): Index is supposed to be a vector")
    if str(index.dtype) not in ("int32", "int64"):
        return RuntimeError("index_select(): Expected dtype int32 or int64 for index")
    if self.ndim == 0 and math.prod(index.shape) != 1:
        return RuntimeError("index_select(): Index to scalar can have only 1 value, got "
                            f"{math.prod(index.shape)} value(s)")
    if self.ndim > 1 and math.prod(index.shape) and not self.shape[dim % self.ndim]:
        return RuntimeError("index_select(): self indexing axis dim should be positive")
    return None


def _stack_check(tensors, dim=0) -> str | None:
    # The reference's message stops after the first shape.
    for i, t in enumerate(tensors[1:], 1):
        if tuple(t.shape) != tuple(tensors[0].shape):
            return (f"stack expects each tensor to be equal size, but got "
                    f"{list(tensors[0].shape)} at entry 0 and {list(t.shape)} at entry {i}")
    return None


def _norm_dtypes(*at: int):
    """CPU's norms take float32 parameters for a bfloat16/float16 input (ATen's
    mixed_dtype.h: "mixed" when the first parameter's dtype is not the input's), else
    parameters of the input's dtype. ``at``: where the parameters are."""

    def check(x, *args) -> str | None:
        params = [args[i - 1] for i in at if i - 1 < len(args) and hasattr(args[i - 1], "dtype")]
        if not params:
            return None
        if params[0].dtype != x.dtype:
            if x.dtype not in (np.float32, jnp.bfloat16, np.float16):
                return "mixed dtype (CPU): all inputs must share same datatype."
            if any(p.dtype != np.float32 for p in params):
                return "mixed dtype (CPU): expect parameter to have scalar type of Float"
            return None
        return next(filter(None, (same_dtype(x, p) for p in params[1:])), None)

    return check


def _batch_norm_dtypes(*at: int):
    return _first(kernel_refuses("batch_norm", "biuc"), _norm_dtypes(*at))


def _division_refuses(self, other, rounding_mode=None) -> NotImplementedError | None:
    if rounding_mode is None:
        return None
    return result_refuses(f"div_{rounding_mode}_cpu", "bc")(self, other)


def _lerp_dtypes(self, end, weight=None) -> str | None:
    for name, t in (("end", end), ("weight", weight)):
        if hasattr(t, "dtype") and np.dtype(t.dtype) != np.dtype(self.dtype):
            return (f"expected dtype {cpp_name(self.dtype)} for `{name}` but got dtype "
                    f"{cpp_name(t.dtype)}")
    return None


def _order_statistic_check(name: str, kernel: str | None, dim_kernel: str | None):
    """median/nanmedian/kthvalue: an empty reduced dim, then bool or complex (CPU's order)."""

    def check(self, *args) -> Exception | None:
        dim = (args[1] if len(args) > 1 else -1) if name == "kthvalue" else (args or [None])[0]
        if dim is not None and self.ndim:
            check_nonempty(name, self, dim)
        elif dim is None and name == "median" and not math.prod(self.shape):
            return None  # CPU answers NaN (converted to the dtype) before its kernel's dispatch
        return kernel_refuses(kernel if dim is None else dim_kernel, "bc")(self)

    return check


def _topk_check(self, k=None, dim=-1, *_) -> str | None:
    ndim = len(self.shape)
    if k is not None and -max(ndim, 1) <= dim < max(ndim, 1):  # (else the dim's IndexError)
        if not 0 <= k <= (self.shape[dim] if ndim else 1):
            return "selected index k out of range"
    if self.dtype == bool:
        return "topk does not support bool dtypes on CPU"
    return " topk does not support complex dtypes on CPU" if self.dtype.kind == "c" else None


def _where_check(condition, *_) -> str | None:
    if np.dtype(condition.dtype) not in (np.bool_, np.uint8):  # (uint8: deprecated, taken)
        return ("where expected condition to be a boolean tensor, but got a tensor with dtype "
                f"{scalar_type_name(condition.dtype)}")
    return None


def _unordered_complex(message: str):
    """An op that orders values: CPU refuses complex ones with this message."""
    return lambda self, *_: message if self.dtype.kind == "c" else None


def _unordered_complex_pair(name: str):
    def check(self, other, *_) -> str | None:
        if any(getattr(x, "dtype", None) is not None and x.dtype.kind == "c"
               for x in (self, other)):
            return f"{name} not implemented for complex tensors."
        return None

    return check


def _first(*checks):
    """The first error of these checks, in CPU's order."""

    def check(*args):
        return next((e for c in checks if (e := c(*args))), None)

    return check


def _searchsorted_check(sorted_sequence, self, *_, side=None, sorter=None, **__) -> str | None:
    """CPU's searchsorted_pre_check, in its order (sorter's values: bounds.py)."""
    if side is not None and side not in ("left", "right"):
        return f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}"
    if sorter is not None and tuple(sorter.shape) != tuple(sorted_sequence.shape):
        return (f"torch.searchsorted(): boundary and sorter must have the same size, but got "
                f"boundary tensor {list(sorted_sequence.shape)}and got sorter tensor "
                f"{list(sorter.shape)}")
    if sorter is not None and str(sorter.dtype) != "int64":
        return (f"torch.searchsorted(): sorter must be a tensor of long dtype but got dtype "
                f"{scalar_type_name(to_torch_dtype(sorter.dtype))}")
    nd = len(sorted_sequence.shape)
    if nd != 1 and len(getattr(self, "shape", ())) == 0:  # a number or a 0-d tensor
        return (f"torch.searchsorted(): input value can be a scalar only when boundaries tensor "
                f"dimension is 1, but we got boundaries tensor dim({nd}) and input value's "
                f"dim(0) numel(1)")
    return None


def _bucketize_check(self, boundaries, *_, **__) -> str | None:
    if len(boundaries.shape) != 1:
        return f"boundaries tensor must be 1 dimension, but got dim({len(boundaries.shape)})"
    return None


_aten = torch.ops.aten
_DIVISIONS = (_aten.div.Tensor_mode, _aten.div.Scalar_mode)
# checked with their kwargs
_WITH_KWARGS = {*_DIVISIONS, _aten.mean.dim, _aten.round.decimals, _aten.cumsum.default,
                _aten.cumprod.default, _aten.cumsum_.default, _aten.cumprod_.default,
                _aten.searchsorted.Tensor, _aten.searchsorted.Scalar, _aten.index_reduce.default,
                *nn_checks.DECOMPOSED}
# Ops whose meta kernels take any `dim` (the rules wrapped it: softmax(dim=2) of a matrix ran
# on dim 0): where their dim is, a position or a keyword.
_DIM_AT = {_aten._softmax.default: 1, _aten._log_softmax.default: 1, _aten.sort.default: 1,
           _aten.sort.stable: "dim", _aten.index_select.default: 1,
           _aten.index_fill.int_Scalar: 1, _aten.index_fill.int_Tensor: 1,
           _aten.max.dim: 1, _aten.min.dim: 1,
           _aten.argmax.default: 1, _aten.argmin.default: 1}

_UNSCALE_KERNEL = kernel_refuses("_amp_foreach_non_finite_check_and_unscale_cpu", "biuc")


def _unscale_check(grads, found_inf, inv_scale):
    """GradScaler's unscale: CPU's checks of its scalars, then of each gradient's dtype."""
    scalars = (("inv_scale", inv_scale), ("found_inf", found_inf))
    for name, t in scalars:
        if math.prod(t.shape) != 1:
            return f"{name} must be a 1-element tensor."
    for name, t in scalars:
        if t.dtype not in (np.float32, torch.float32):  # (arrays, or tensors in place)
            return f"{name} must be a float tensor."
    return next(filter(None, map(_UNSCALE_KERNEL, grads)), None)


# Ops whose broadcast CPU checks among other shapes, or in another order, than their arguments'.
_BROADCAST_ORDER = {torch.ops.aten.addmm.default: matmul_checks.addmm_expand,
                    torch.ops.aten.binary_cross_entropy_with_logits.default:
                        _bce_with_logits_order}


_CPU_CHECKS = {
    **KERNEL_DTYPE_CHECKS,
    # (the reference's arange of terms refused a negative p in its words; p = 0 summed none)
    _aten.mvlgamma.default:
        lambda self, p: "p has to be greater than or equal to 1" if p < 1 else None,
    _aten.searchsorted.Tensor: _searchsorted_check,
    _aten.searchsorted.Scalar: _searchsorted_check,
    _aten.bucketize.Tensor: _bucketize_check,
    _aten.bucketize.Scalar: _bucketize_check,
    _aten.histc.default: _first(KERNEL_DTYPE_CHECKS[_aten.histc.default], histc_range),
    _aten.index.Tensor: lambda self, indices: None if indices else IndexError(
        "at least one index must be provided"),
    **nn_checks.DECOMPOSED,
    _aten.nll_loss_forward.default: nn_checks.nll_check,
    _aten.linalg_cross.default: same_dtype,
    _aten._amp_foreach_non_finite_check_and_unscale.default: _unscale_check,
    _aten._amp_foreach_non_finite_check_and_unscale_.default: _unscale_check,
    _aten.nll_loss2d_forward.default: nn_checks.nll2d_check,
    _aten.embedding.default: nn_checks.embedding_check,
    _aten._embedding_bag.default: nn_checks.embedding_bag_check,
    _aten._embedding_bag_forward_only.default: nn_checks.embedding_bag_check,
    _aten.leaky_relu_backward.default: nn_checks.leaky_relu_backward_check,
    _aten.var.correction: _VAR, _aten.var.dim: _VAR, _aten.var.default: _VAR,
    _aten.std.correction: _VAR, _aten.std.dim: _VAR, _aten.std.default: _VAR,
    _aten.mean.dim: _mean_dtype,
    _aten.var_mean.correction: _floating_only(
        "var_mean only support floating point and complex dtypes"),
    _aten.std_mean.correction: _floating_only(
        "std_mean only support floating point and complex dtypes"),
    _aten.binary_cross_entropy.default: nn_checks.bce_check,
    _aten.binary_cross_entropy_with_logits.default: nn_checks.bce_with_logits_check,
    _aten.grid_sampler_2d.default: _first(
        _grid_sampler_check, kernel_refuses("grid_sampler_2d_cpu_kernel_impl", "biuc")),
    _aten.grid_sampler_3d.default: _first(
        _grid_sampler_check, kernel_refuses("grid_sampler3d_cpu", "biuc")),
    **pooling_checks.CHECKS,
    **indexing_checks.CHECKS,
    **fft_checks.CHECKS,
    _aten.pixel_shuffle.default: _pixel_shuffle_check,
    **{getattr(_aten, f"upsample_nearest{nd}d").default: nn_checks.nearest_upsample_check
       for nd in (1, 2, 3)},
    **nn_checks.RESIZE_CHECKS,
    _aten.pixel_unshuffle.default: _pixel_unshuffle_check,
    **dict.fromkeys((_aten.sub.Tensor, _aten.sub.Scalar, _aten.rsub.Tensor, _aten.rsub.Scalar),
                    _bool_subtraction),
    _aten.argmax.default: _first(_unordered_complex("argmax(): does not support complex input"),
                                 arg_reduction_check("argmax")),
    _aten.argmin.default: _first(_unordered_complex("argmin(): does not support complex input"),
                                 arg_reduction_check("argmin")),
    _aten._softmax.default: _softmax_check("softmax"),
    _aten._log_softmax.default: _softmax_check("log_softmax"),
    _aten.abs.default: lambda self: not_for_bool("abs_cpu", self),
    _aten.convolution.default: conv_checks.convolution_check,
    _aten.index_select.default: _index_select_check,
    _aten.masked_fill.Scalar: _masked_fill_check,
    _aten.masked_fill.Tensor: _masked_fill_check,
    _aten.native_layer_norm.default: _first(nn_checks.layer_norm_shapes, _norm_dtypes(2, 3),
                                            nn_checks.layer_norm_kernel),
    # (group norm's kernel checks the parameters' dtypes before its own; batch norm's after)
    _aten.native_group_norm.default: _first(_norm_dtypes(1, 2),
                                            kernel_refuses("GroupNormKernelImpl", "biuc")),
    _aten.native_batch_norm.default: _batch_norm_dtypes(1, 2, 3, 4),
    _aten._native_batch_norm_legit.default: _batch_norm_dtypes(1, 2, 3, 4),
    _aten._native_batch_norm_legit.no_stats: _batch_norm_dtypes(1, 2),
    _aten._native_batch_norm_legit_no_training.default: _batch_norm_dtypes(1, 2, 3, 4),
    _aten._batch_norm_with_update.default: _batch_norm_dtypes(1, 2, 3, 4),
    _aten._batch_norm_no_update.default: _batch_norm_dtypes(1, 2, 3, 4),
    _aten.stack.default: _stack_check,
    _aten.masked_select.default: lambda self, mask: (
        "masked_select: expected BoolTensor for mask" if np.dtype(mask.dtype) != np.bool_
        else _broadcast_message([mask.shape, self.shape])),
    # (after its dtypes, which its rule checks)
    **{op: lambda real, imag: _broadcast_message([real.shape, imag.shape]) if (
        real.dtype == imag.dtype and np.dtype(real.dtype).kind == "f") else None
       for op in (_aten.complex.default, _aten.polar.default)},
    # (an eager rule: no meta kernel runs, and jnp's broadcast raised a ValueError)
    _aten.normal.Tensor_Tensor: lambda mean, std, *_: _broadcast_message([mean.shape,
                                                                          std.shape]),
    **CLAMP_CHECKS,
    _aten.max.default: _first(nonempty_check("max"), kernel_refuses("max_all", "c")),
    _aten.min.default: _first(nonempty_check("min"), kernel_refuses("min_all", "c")),
    _aten.max.dim: _first(nonempty_check("max"),
                          _unordered_complex("max(): does not support complex input")),
    _aten.min.dim: _first(nonempty_check("min"),
                          _unordered_complex("min(): does not support complex input")),
    _aten.amax.default: kernel_refuses("max_values_cpu", "c"),
    _aten.amin.default: kernel_refuses("min_values_cpu", "c"),
    _aten.sort.default: _unordered_complex(" Sort does not support complex dtypes on CPU"),
    _aten.sort.stable: _unordered_complex(" Sort does not support complex dtypes on CPU"),
    _aten.cummax.default: kernel_refuses("cummax_cpu", "c"),
    _aten.cummin.default: kernel_refuses("cummin_cpu", "c"),
    **{getattr(_aten, name).default: _unordered_complex_pair(name)
       for name in ("maximum", "minimum", "fmax", "fmin")},
    **{getattr(getattr(_aten, name), overload): result_refuses(f"{name}_cpu", "c")
       for name in ("lt", "le", "gt", "ge") for overload in ("Tensor", "Scalar")},
    # (the meta kernel's dtype checks first, as CPU's)
    _aten.lerp.Scalar: _first(lambda self, end, weight: _lerp_dtypes(self, end),
                              kernel_refuses("lerp_kernel_scalar", "biu")),
    _aten.lerp.Tensor: _first(_lerp_dtypes, kernel_refuses("lerp_kernel_tensor", "biu")),
    _aten.median.default: _order_statistic_check("median", "median_cpu", None),
    _aten.nanmedian.default: _order_statistic_check("median", "median_cpu", None),
    _aten.median.dim: _order_statistic_check("median", None, "median_out"),
    _aten.nanmedian.dim: _order_statistic_check("median", None, "median_out"),
    _aten.kthvalue.default: _order_statistic_check("kthvalue", None, "kthvalue_cpu"),
    _aten.topk.default: _topk_check,
    **dict.fromkeys((_aten.where.self, _aten.where.ScalarSelf, _aten.where.ScalarOther,
                     _aten.where.Scalar), _where_check),
    **matmul_checks.CHECKS,
    **distance_checks.CHECKS,
    **{op: _division_refuses for op in _DIVISIONS},
}
_CPU_CHECKS |= {**foreach_checks.each_tensor(_CPU_CHECKS),
                **foreach_checks.each_tensor(_CPU_CHECKS, in_place=True),
                **foreach_checks.FOREACH_CHECKS}
