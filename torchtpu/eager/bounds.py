"""Index bounds and value checks: PyTorch's CPU errors where XLA would compute a value.

XLA clamps out-of-range gather/scatter indices where PyTorch's CPU kernels raise. Checking
needs the index values on the host: strict and debug eager wait for the index (flag
``check_indices``); fused eager records the check and raises at the sync point that runs it
(``deferred``, deferred_checks.py); a torch.compile graph computes its checks in its program
(``traced_checks``) and raises at a later sync point, as fused eager does. Each op raises
CPU's exception type and message, and accepts CPU's range (some ops take negative indices,
some do not). binary_cross_entropy's probabilities are checked so too (logits passed to
BCELoss gave NaN where CPU raises), masked_scatter's count of source elements, integer
divisors (by zero), max_unpool's indices, and the parameter tensors of random ops
(multinomial's weights, bernoulli's p, normal's std, poisson's rate), segment_reduce's
lengths, and the matrices LAPACK refuses: a NaN for svd, any non-finite value for eig
(XLA's factorisations return NaN factors).
"""

from __future__ import annotations

import math
import platform
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import jax.numpy as jnp
import numpy as np
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._pytree import tree_flatten, tree_leaves, tree_map, tree_unflatten

from .. import config
from ..ops.dtypes import to_jax_dtype
from ..ops.registry import LOWERINGS
from ..runtime import execute
from ..runtime.execute import executable
from ..tensor import read
from . import deferred_checks
from .call_site import user_line
from .kernel_dtypes import broadcast_shape
from .pooling_checks import CHECKS as POOLING_CHECKS
from .reduction_checks import histc_range_error
from .values import unwrap
from .views import meta_like

aten = torch.ops.aten


def _traced(x) -> bool:
    """A CPU tensor in a compiled graph (a constant it captured): its value is the program's."""
    return isinstance(x, torch._subclasses.fake_tensor.FakeTensor)


def _on_device(x) -> bool:
    """A tpu tensor: a TpuTensor in eager, a fake one in a compiled graph (traced_checks)."""
    return isinstance(x, torch.Tensor) and x.device.type == "tpu"


@dataclass(frozen=True)
class _Spec:
    # (args, kwargs) -> [(index tensor, dim, size, ignore_index or None)]
    pairs: Callable
    negative: bool  # whether -size <= index < 0 is valid (counts from the end)
    error: type
    message: Callable[[int, int, int, int], str]  # (bad value, dim, size, its flat position)
    # (args, kwargs) -> the _Spec of CPU's other kernel path for these args, if it checks
    # otherwise
    path: Callable | None = None
    low: int | None = None  # the lowest valid index, if not 0 (or -size where negative)


def _dim_index(args, kwargs):
    """Ops called as (self, dim, index, ...)."""
    self, dim, index = args[0], args[1], args[2]
    if self.dim() == 0:  # CPU indexes it as one element
        return [(index, 0, 1, None)]
    return [(index, dim % self.dim(), self.shape[dim % self.dim()], None)]


def _indices_list(args, kwargs):
    # CPU's message counts the dimension among the index tensors (a k-dim mask counts k),
    # not among self's dimensions: x[:, :, i] reports "dimension 0".
    self, indices = args[0], args[1]
    out, dim, pos = [], 0, 0
    for idx in indices:
        if idx is None:
            dim += 1
            continue
        if idx.dtype in (torch.bool, torch.uint8):  # masks (uint8: deprecated, still one)
            dim, pos = dim + idx.dim(), pos + idx.dim()
            continue
        if dim < self.dim():
            out.append((idx, pos, self.shape[dim], None))
        dim, pos = dim + 1, pos + 1
    return out


def _embedding(args, kwargs):
    weight, indices = args[0], args[1]
    if weight.dim() != 2:
        return []  # the op's own check says 'weight' must be 2-D
    return [(indices, 0, weight.shape[0], None)]


def _flat(args, kwargs):
    return [(args[1], 0, args[0].numel(), None)]


def _nll_target(args, kwargs):
    self, target = args[0], args[1]
    ignore = args[4] if len(args) > 4 else kwargs.get("ignore_index", -100)
    classes = self.shape[1] if self.dim() > 1 else self.shape[0]
    return [(target, 1, classes, ignore)]


def _margin_target(args, kwargs):
    self, target = args[0], args[1]
    return [(target, 0, self.shape[-1] if self.dim() else 1, None)]


def _bounds(value, dim, size, at):
    return f"index {value} is out of bounds for dimension {dim} with size {size}"


def _indexed(value, dim, size, at):
    if size == 0:  # (CPU's words for a dimension there is no index into)
        return "index is out of bounds for dimension with size 0"
    return _bounds(value, dim, size, at)


def _in_self(value, dim, size, at):
    return "index out of range in self"


def _take(value, dim, size, at):
    return f"out of range: tried to access index {value} on a tensor of {size} elements."


def _target(value, dim, size, at):
    return f"Target {value} is out of bounds."


def _index_copy(value, dim, size, at):
    return "index_copy_(): " + _bounds(value, dim, size, at)


def _bag_indices(args, kwargs):
    """embedding_bag's indices; the "dim" slot says whether CPU's generic kernel reads them
    rather than its fast path (float, half and bfloat16 rows with unit column stride, sum or
    mean, no padding_idx): the two word the error differently."""
    weight, indices = args[0], args[1]
    if weight.dim() != 2:
        return []
    mode = args[4] if len(args) > 4 else kwargs.get("mode", 0)
    padding_idx = args[8] if len(args) > 8 else kwargs.get("padding_idx", -1)
    fast = (weight.dtype in (torch.float32, torch.float16, torch.bfloat16) and mode in (0, 1)
            and padding_idx < 0 and weight.stride(1) == 1)
    return [(indices, not fast, weight.shape[0], None)]


def _bag(value, generic, size, at):
    if not generic:
        return (f"Index {at} of input takes value {value} which is not in the valid range "
                f"[0, {size})")
    return f"embedding_bag: Expected idx >= 0 && idx < num_embeddings but found idx to be {value}"


_GATHER = _Spec(_dim_index, False, RuntimeError, _bounds)
_INDEX = _Spec(_indices_list, True, IndexError, _indexed)
_DIM = _Spec(_dim_index, True, IndexError, _bounds)
# index_select of a self of two dimensions or more along dim 1, or of an empty one: CPU's
# fast path checks with its own words.
_SELECT_DIM1 = _Spec(_dim_index, False, RuntimeError,
                     lambda value, dim, size, at: f"INDICES element is out of DATA bounds, "
                                                  f"id={value} axis_dim={size}")
_SELECT = _Spec(_dim_index, False, IndexError, _in_self)
_UNCHECKED = _Spec(lambda args, kwargs: [], False, IndexError, _in_self)


def _index_select_path(args, kwargs) -> _Spec | None:
    self, dim = args[0], args[1]
    if self.dim() <= 1:
        return None
    if self.numel() == 0 and self.shape[dim % self.dim()] == 0:
        return _UNCHECKED  # CPU refuses the empty axis first (meta_errors.py)
    return _SELECT_DIM1 if dim % self.dim() == 1 or self.numel() == 0 else None


_INDEX_SELECT = _Spec(_dim_index, False, IndexError, _in_self, _index_select_path)
_ADD_LOW_RANK = _Spec(lambda args, kwargs: [(args[2], 0, args[0].numel(), None)], False,
                      IndexError, _in_self)


def _index_add_path(args, kwargs) -> _Spec | None:
    """CPU's index_add of a self of two dimensions or more (and elements) adds by scatter_add
    (whose bounds message is the default) only along the first or last dimension with alpha
    1; otherwise it adds slice by slice, checking each index as index_select does."""
    self, dim = args[0], args[1]
    if self.dim() <= 1:
        return _ADD_LOW_RANK
    if self.numel() == 0:
        return _UNCHECKED  # it returns before reading an index
    alpha = kwargs.get("alpha", 1)
    if isinstance(alpha, bool) or alpha != 1 or dim % self.dim() not in (0, self.dim() - 1):
        return _SELECT
    return None


_ADD = _Spec(_dim_index, False, RuntimeError, _bounds, _index_add_path)
_COPY = _Spec(_dim_index, False, IndexError, _index_copy)
_BAG = _Spec(_bag_indices, False, RuntimeError, _bag)
_TAKE = _Spec(_flat, True, IndexError, _take)
_TARGET = _Spec(_nll_target, False, IndexError, _target)
_MARGIN = _Spec(_margin_target, False, RuntimeError, lambda *_: "target out of range")
# (-1 ends a row's targets; CPU checks the whole target's minimum and maximum)
_MULTILABEL = _Spec(_margin_target, False, RuntimeError,
                    lambda *_: "argument #2 'target' is out of range", low=-1)
_SPECS: dict = {
    aten.multi_margin_loss.default: _MARGIN,
    aten.multilabel_margin_loss_forward.default: _MULTILABEL,
    aten.index.Tensor: _INDEX,
    aten.index_put.default: _INDEX,
    aten.index_put_.default: _INDEX,
    aten._index_put_impl_.default: _INDEX,
    aten.index_select.default: _INDEX_SELECT,
    aten.index_reduce.default: _SELECT,
    aten.index_reduce_.default: _SELECT,
    aten.embedding.default: _Spec(_embedding, False, IndexError, _in_self),
    aten._embedding_bag.default: _BAG,
    aten._embedding_bag_forward_only.default: _BAG,
    aten.gather.default: _GATHER,
    aten.index_add.default: _ADD,
    aten.index_add_.default: _ADD,
    aten.index_copy.default: _COPY,
    aten.index_copy_.default: _COPY,
    aten.index_fill.int_Scalar: _DIM,
    aten.index_fill.int_Tensor: _DIM,
    aten.index_fill_.int_Scalar: _DIM,
    aten.index_fill_.int_Tensor: _DIM,
    aten.take.default: _TAKE,
    aten.put.default: _TAKE,
    aten.put_.default: _TAKE,
    aten.nll_loss_forward.default: _TARGET,
    aten.nll_loss2d_forward.default: _TARGET,
}
_SPECS.update({op: _GATHER for op in (
    aten.scatter.src, aten.scatter.value, aten.scatter.reduce, aten.scatter.value_reduce,
    aten.scatter_.src, aten.scatter_.value, aten.scatter_.reduce, aten.scatter_.value_reduce,
    aten.scatter_add.default, aten.scatter_add_.default, aten.scatter_reduce.two,
    aten.scatter_reduce_.two)})


@executable()
def _outside_unit(x):
    return jnp.any(~((x >= 0) & (x <= 1)))  # NaN too


@executable(static_argnums=(1, 2))
def _more_ones_than(mask, shape, n: int):
    return jnp.sum(jnp.broadcast_to(mask, shape), dtype=jnp.int64) > n


_SHORT_SOURCE = "Number of elements of source < number of ones in mask"


def _source_count(args) -> tuple | None:
    """masked_scatter's (mask, its broadcast shape, the source's element count) when CPU
    counts the mask's ones against the source."""
    self, mask, source = args[0], args[1], args[2]
    if _on_device(mask) and mask.dtype == torch.bool:
        return mask, tuple(torch.broadcast_shapes(self.shape, mask.shape)), source.numel()
    return None


@executable(static_argnums=(1,))
def _any_zero(x, dtype):
    return jnp.any(x.astype(dtype) == 0)


def _integer_divisor(args, kwargs):
    """Integer //, %, fmod and div(rounding_mode=...): the divisor and the result's dtype,
    which CPU's kernel converts it to (int8 by 256 or by 2**31 divides by a wrapped 0), when
    the division is an integer one; else None. (By zero CPU raises; XLA gives a value.)"""
    self, other = args[0], args[1]
    if "rounding_mode" in kwargs and kwargs["rounding_mode"] is None:
        return None  # true division: a float result
    result = torch.result_type(self, other)
    if result.is_floating_point or result.is_complex or result == torch.bool:
        return None  # no integer division (bool: CPU's kernels refuse it, before any value)
    shape = broadcast_shape(self, other)
    if shape is None:
        return None  # the op's own shape check raises
    if not math.prod(shape):
        return None  # an empty result divides nothing: CPU's kernel never sees the zero
    return other, result


def _no_zero_divisor(divisor, dtype: torch.dtype) -> None:
    """A divisor that is a number or a host tensor, checked at once."""
    if isinstance(divisor, torch.Tensor):
        zero = bool((divisor.to(dtype) == 0).any())
    else:
        zero = int(divisor) % 2 ** torch.iinfo(dtype).bits == 0
    if zero:
        raise RuntimeError("ZeroDivisionError")


@executable()
def _below_zero(x):
    return jnp.any(~(x >= 0))  # NaN too


@executable()
def _not_finite(x):
    return jnp.any(~jnp.isfinite(x))


_EIG_NOT_FINITE = "torch.linalg.eig: input tensor should not contain infs or NaNs."


def _flagged_arguments(func, args) -> list:
    """``func``'s tensor arguments that a flag checks: [(tensor, flag, CPU's message)]."""
    out = []
    for position, flag, message in _FLAGGED.get(func, ()):
        t = args[position] if len(args) > position else None
        if _on_device(t) and t.numel():
            out.append((t, flag, message))
    return out


_P_IN = ("Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error message "
         "be improved?  If so, please report an enhancement request to PyTorch.)")
_STD = "normal expects all elements of std >= 0.0"
# op -> [(argument position, executable flagging a bad value, CPU's message)]
_FLAGGED = {
    aten.binary_cross_entropy.default: [
        (0, _outside_unit, "all elements of input should be between 0 and 1"),
        (1, _outside_unit, "all elements of target should be between 0 and 1")],
    aten.bernoulli.default: [(0, _outside_unit, _P_IN)],
    aten.bernoulli_.Tensor: [(1, _outside_unit, _P_IN)],
    aten.normal.Tensor_Tensor: [(1, _below_zero, _STD)],
    aten.normal.float_Tensor: [(1, _below_zero, _STD)],
    aten.poisson.default: [
        (0, _below_zero, "invalid Poisson rate, expected rate to be non-negative")],
    aten.linalg_eig.default: [(0, _not_finite, _EIG_NOT_FINITE)],
}


def _multinomial_probs(args, kwargs):
    """multinomial's probabilities when CPU checks their values (after its argument checks,
    which the rule makes), and whether its one-pass path does (one draw, or none replaced)."""
    probs, n = args[0], args[1] if len(args) > 1 else kwargs["num_samples"]
    replacement = args[2] if len(args) > 2 else kwargs.get("replacement", False)
    if (not _on_device(probs) or probs.dim() not in (1, 2) or probs.numel() == 0
            or not probs.is_floating_point() or n <= 0 or probs.shape[-1] > 2 ** 24
            or (not replacement and n > probs.shape[-1])):
        return None
    return probs, not replacement or n == 1


@executable()
def _distribution_faults(probs):
    """Whether the probabilities break CPU's rules; the first invalid entry's flat position
    (-1: none), whether it is negative, and the first all-zero row (-1: none)."""
    rows = probs.reshape(-1, probs.shape[-1])
    negative = ~(rows >= 0)  # NaN too
    invalid = negative | ~jnp.isfinite(rows)
    zero_sum = ~invalid.any(axis=1) & (rows == 0).all(axis=1)
    bad = jnp.where(invalid.any(), jnp.argmax(invalid.reshape(-1)), -1)
    zero = jnp.where(zero_sum.any(), jnp.argmax(zero_sum), -1)
    return invalid.any() | zero_sum.any(), bad, negative.reshape(-1)[jnp.maximum(bad, 0)], zero


def _distribution_error(one_pass: bool, width: int, bad: int, negative: int,
                        zero: int) -> RuntimeError | None:
    """CPU's error for those faults: its one-pass path looks at the whole tensor, then at
    zero-sum rows; more draws with replacement go row by row, element by element."""
    sum_error = RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    if one_pass:
        if bad >= 0:
            return RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
        return sum_error if zero >= 0 else None
    if zero >= 0 and (bad < 0 or zero < bad // width):
        return sum_error
    if bad >= 0:
        what = "< 0" if negative else "= infinity or NaN"
        return RuntimeError(
            f"invalid multinomial distribution (encountering probability entry {what})")
    return None


@executable()
def _histc_range(x):
    """Whether the range histc takes from the data (its min and max) is not finite, and that
    range, widened where it is one value as CPU widens it, in the data's dtype."""
    low, high = jnp.min(x), jnp.max(x)
    same = low == high
    low, high = jnp.where(same, low - 1, low), jnp.where(same, high + 1, high)
    same = same & (low == high)
    low = jnp.where(same, jnp.nextafter(low, jnp.array(-jnp.inf, low.dtype)), low)
    high = jnp.where(same, jnp.nextafter(high, jnp.array(jnp.inf, high.dtype)), high)
    if x.size > 1 and _X86:
        # CPU's min/max over several values makes a NaN anew: x86's default NaN, negative
        # (its message prints "-nan"); one value is passed through as it is
        low, high = (jnp.where(jnp.isnan(v), jnp.copysign(jnp.array(jnp.nan, v.dtype), -1), v)
                     for v in (low, high))
    return ~(jnp.isfinite(low) & jnp.isfinite(high)), low, high


_X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")


def _histc_data(args, kwargs):
    """histc's data when it bins over the data's range (min == max)."""
    self = args[0]
    low = args[2] if len(args) > 2 else kwargs.get("min", 0)
    high = args[3] if len(args) > 3 else kwargs.get("max", 0)
    if low != high or not _on_device(self) or self.numel() == 0 or not self.is_floating_point():
        return None
    return self


def _histc_error(low: float, high: float) -> RuntimeError:
    return RuntimeError(histc_range_error(float(low), float(high)))


@executable()
def _outside_last_dim(sorter):
    return jnp.any((sorter < 0) | (sorter >= sorter.shape[-1]))


_SORTER = "torch.searchsorted(): sorter index out of range"


def _sorter(kwargs):
    sorter = kwargs.get("sorter")
    return sorter if _on_device(sorter) and sorter.numel() else None


@executable(static_argnums=(1,))
def _last_outside(indices, size):
    """Whether an index falls outside ``[0, size)``, and the last such index's value."""
    bad = (indices < 0) | (indices >= size)
    flat = jnp.arange(indices.size).reshape(indices.shape)
    at = jnp.max(jnp.where(bad, flat, -1))
    return at >= 0, indices.reshape(-1)[jnp.maximum(at, 0)]


def _unpool_plane(op, args) -> tuple | None:
    """max_unpool's indices and output size when CPU checks the indices' values (after its
    other checks)."""
    indices, output_size = args[1], args[2]
    if _on_device(indices) and indices.numel() and not POOLING_CHECKS[op](*args):
        return indices, output_size
    return None


def _unpool_error(output_size, value: int) -> RuntimeError:
    # (CPU's kernel names the last index outside)
    return RuntimeError(f"Found an invalid max index: {value} (output volumes are of size "
                        f"{'x'.join(str(n) for n in output_size)})")


def _segment_lengths(args, kwargs):
    """segment_reduce's lengths and the size they must sum to, when CPU checks them (not
    ``unsafe``; offsets never are)."""
    data, lengths = args[0], kwargs.get("lengths")
    if kwargs.get("unsafe", False) or not _on_device(lengths) or lengths.numel() == 0:
        return None
    return lengths, data.shape[lengths.dim() - 1]


@executable(static_argnums=(1,))
def _lengths_faults(lengths, size: int):
    negative = jnp.any(lengths < 0)
    return negative | jnp.any(jnp.sum(lengths, axis=-1) != size), negative


@executable()
def _first_nan_matrix(A):
    """Whether a matrix of the batch holds a NaN, and the first that does."""
    bad = jnp.isnan(A).reshape(-1, A.shape[-2] * A.shape[-1]).any(axis=1)
    return bad.any(), jnp.argmax(bad)


_SVDS = (aten._linalg_svd.default, aten.linalg_pinv.atol_rtol_tensor)  # (pinv's rule: an svd)


def _svd_input(func, args, kwargs) -> torch.Tensor | None:
    A = args[0]
    if func not in _SVDS or kwargs.get("hermitian") or not _on_device(A) or not A.numel():
        return None
    return A


def _svd_error(batched: bool, at: int) -> torch.linalg.LinAlgError:
    # LAPACK 3.10's gesdd gives info -4 for a NaN in the matrix (not for an inf alone,
    # which fails to converge with an info of its own)
    where = f"(Batch element {at}): " if batched else ""
    return torch.linalg.LinAlgError(
        f"linalg.svd: {where}The algorithm failed to converge because the input matrix "
        "contained non-finite values.")


def _lengths_error(negative: bool) -> RuntimeError:
    if negative:
        return RuntimeError("lengths contains negative value!")
    return RuntimeError("segment_reduce(): Expected all rows of lengths along axis to sum to "
                        "data.size(lengths.dim()-1) when !unsafe.")


# Ops whose values (not indices) CPU checks.
_DIVISIONS = (
    aten.floor_divide.default, aten.floor_divide.Scalar, aten.floor_divide_.Tensor,
    aten.floor_divide_.Scalar, aten.remainder.Tensor, aten.remainder.Scalar,
    aten.remainder_.Tensor, aten.remainder_.Scalar, aten.remainder.Scalar_Tensor,
    aten.fmod.Tensor, aten.fmod.Scalar, aten.fmod_.Tensor, aten.fmod_.Scalar,
    aten.div.Tensor_mode, aten.div.Scalar_mode, aten.div_.Tensor_mode, aten.div_.Scalar_mode)
_MASKED_SCATTERS = (aten.masked_scatter.default, aten.masked_scatter_.default)
_SEARCHSORTED = (aten.searchsorted.Tensor, aten.searchsorted.Scalar)
_UNPOOLS = (aten.max_unpool2d.default, aten.max_unpool3d.default)


_BAGS = (aten._embedding_bag.default, aten._embedding_bag_forward_only.default)


def _bag_offsets(args) -> tuple | None:
    """embedding_bag's offsets and the number of indices they point into, when CPU reads
    them (after its shape checks, which the op makes)."""
    weight, indices, offsets = args[0], args[1], args[2]
    if (_on_device(offsets) and offsets.dim() == 1 and offsets.numel() and weight.dim() == 2
            and indices.dim() == 1 and not offsets.is_floating_point()):
        return offsets, indices.shape[0], torch.promote_types(indices.dtype, offsets.dtype)
    return None


@executable(static_argnums=(1,))
def _offset_faults(offsets, length: int):
    first, last = offsets[0], offsets[-1]
    return (first != 0) | (last > length), first, last


def _offset_error(length: int, dtype: torch.dtype, first: int, last: int) -> RuntimeError:
    if first != 0:  # (CPU prints offsets[0] as a 0-d tensor of the indices' common type)
        kind = "Int" if dtype == torch.int32 else "Long"
        return RuntimeError("offsets[0] has to be 0, i.e., the first sequence in the mini-batch "
                            f"has to start from position 0. However, got {first}\n"
                            f"[ torch.{kind}Tensor{{}} ]")
    return RuntimeError(f"offsets[-1] can not be greater than input's length {length} but got "
                        f"offsets[-1] of {last}")


def _value_checks(func, args, kwargs, unwrap=unwrap) -> list:
    """The checks of ``func``'s values (its indices aside) for this call, as
    [(executable, its arguments, make_error)]: the executable's first output says whether the
    check failed, ``make_error(its other outputs)`` builds CPU's exception. Strict eager runs
    them before the op; fused eager records them (the values as the op reads them); a
    compiled graph computes them in its program (``unwrap``: its traced array of a tensor)."""
    checks = [(flag, (unwrap(t),), partial(RuntimeError, message))
              for t, flag, message in _flagged_arguments(func, args)]
    if func is aten.multinomial.default and (found := _multinomial_probs(args, kwargs)):
        probs, one_pass = found
        checks.append((_distribution_faults, (unwrap(probs),),
                       partial(_distribution_error, one_pass, probs.shape[-1])))
    if func in _DIVISIONS and (found := _integer_divisor(args, kwargs)) is not None:
        divisor, dtype = found
        if not _on_device(divisor) and not _traced(divisor):
            _no_zero_divisor(divisor, dtype)  # nothing to wait for
        elif divisor.numel():
            checks.append((_any_zero, (unwrap(divisor), to_jax_dtype(dtype)),
                           partial(RuntimeError, "ZeroDivisionError")))
    if func in _MASKED_SCATTERS and (found := _source_count(args)) is not None:
        mask, shape, n = found
        checks.append((_more_ones_than, (unwrap(mask), shape, n),
                       partial(RuntimeError, _SHORT_SOURCE)))
    if func in _SEARCHSORTED and (sorter := _sorter(kwargs)) is not None:
        checks.append((_outside_last_dim, (unwrap(sorter),), partial(RuntimeError, _SORTER)))
    if func is aten.histc.default and (data := _histc_data(args, kwargs)) is not None:
        checks.append((_histc_range, (unwrap(data),), _histc_error))
    if func is aten.segment_reduce.default and (found := _segment_lengths(args, kwargs)):
        lengths, size = found
        checks.append((_lengths_faults, (unwrap(lengths), size), _lengths_error))
    if (A := _svd_input(func, args, kwargs)) is not None:
        checks.append((_first_nan_matrix, (unwrap(A),), partial(_svd_error, A.dim() > 2)))
    if func in _BAGS and (found := _bag_offsets(args)) is not None:
        offsets, length, dtype = found
        checks.append((_offset_faults, (unwrap(offsets), length),
                       partial(_offset_error, length, dtype)))
    if func in _UNPOOLS and (found := _unpool_plane(func, args)) is not None:
        indices, output_size = found
        checks.append((_last_outside, (unwrap(indices), math.prod(output_size)),
                       partial(_unpool_error, output_size)))
    return checks


def _outputs(exe, exe_args) -> tuple:
    outputs = exe(*exe_args)
    return outputs if isinstance(outputs, tuple) else (outputs,)


def _index_pairs(func, args, kwargs):
    """``func``'s integer index tensors to check: (spec, index, dim, size, low, ignore)."""
    spec = _SPECS.get(func)
    if spec is None:
        return
    if spec.path is not None:
        spec = spec.path(args, kwargs) or spec
    for index, dim, size, ignore in spec.pairs(args, kwargs):
        if _on_device(index) and index.numel() and not index.is_floating_point():
            low = spec.low if spec.low is not None else -size if spec.negative else 0
            yield spec, index, dim, size, low, ignore


def check(func, args, kwargs, unwrap=unwrap) -> None:
    """Raise CPU's error if an index tensor of ``func`` holds an out-of-range value, or a
    value CPU checks is invalid."""
    with execute.unrecorded():  # (fused eager's eager rules check at once too)
        for exe, exe_args, make_error in _value_checks(func, args, kwargs, unwrap):
            failed, *found = _outputs(exe, exe_args)
            if bool(failed):
                raise make_error(*(v.item() for v in found))
    for spec, index, dim, size, low, ignore in _index_pairs(func, args, kwargs):
        values = np.asarray(read(index))  # (on the host: index shapes vary, no compile each)
        bad = (values >= size) | (values < low)
        if ignore is not None:
            bad &= values != ignore
        if bad.any():
            at = int(np.flatnonzero(bad)[0])
            raise spec.error(spec.message(int(values.flat[at]), dim, size, at))


# Every op whose indices or values are checked.
_CHECKED = {*_SPECS, *_FLAGGED, *_BAGS, aten.multinomial.default, aten.histc.default,
            aten.segment_reduce.default, *_SVDS, *_DIVISIONS,
            *_MASKED_SCATTERS, *_SEARCHSORTED, *_UNPOOLS}
_BEFORE_SHAPES = {aten.normal.Tensor_Tensor, aten.normal.float_Tensor}


@executable(static_argnums=(1, 2, 3))
def _first_out_of_range(index, size: int, low: int, ignore: int | None):
    """Whether ``index`` holds a value outside ``[low, size)`` (``ignore`` aside); the first
    such value and its flat position."""
    flat = index.reshape(-1)
    bad = flat >= size
    if not jnp.issubdtype(flat.dtype, jnp.unsignedinteger):  # (-2 would wrap to 254)
        bad = bad | (flat < low)
    if ignore is not None:
        bad = bad & (flat != ignore)
    at = jnp.argmax(bad)
    return jnp.any(bad), flat[at], at


def _index_checks(func, args, kwargs, unwrap=unwrap) -> list:
    """The checks of ``func``'s indices, as ``_value_checks`` gives them."""
    return [(_first_out_of_range, (unwrap(index), size, low, ignore),
             partial(_index_error, spec, dim, size))
            for spec, index, dim, size, low, ignore in _index_pairs(func, args, kwargs)]


def _index_error(spec: _Spec, dim: int, size: int, value: int, at: int) -> Exception:
    return spec.error(spec.message(value, dim, size, at))


def deferred(func, handler):
    """Fused eager's ``handler``: ``func``'s index bounds and values checked at the sync point
    that runs it (deferred_checks.py), if it has them."""
    if func not in _CHECKED or not config.get("check_indices"):
        return handler
    rule = LOWERINGS.get(func)
    if rule is not None and rule.eager and not rule.records:
        # it reads its inputs now (multinomial): so do its checks, as strict eager's do
        return checked(func, handler, lambda t: execute.concrete(unwrap(t)))

    def run(args, kwargs):
        checks = _value_checks(func, args, kwargs) + _index_checks(func, args, kwargs)
        out = handler(args, kwargs)  # (recorded once it has: its shape errors first)
        if checks:
            origin = _origin(func)
            for exe, exe_args, make_error in checks:
                deferred_checks.record(_outputs(exe, exe_args), make_error, origin)
        return out

    return run


def _origin(op) -> str:
    return (f"{op}, called at {user_line()} (fused eager checks values when a sync point runs "
            "the op)")


@executable(static_argnums=(1,))
def _class_faults(classes, num_classes: int):
    """Whether one_hot's classes leave [0, num_classes), and whether one is negative (CPU
    checks the minimum first)."""
    negative = jnp.min(classes) < 0
    return negative | (jnp.max(classes) >= num_classes), negative


def _class_error(negative: bool) -> RuntimeError:
    return RuntimeError("Class values must be non-negative." if negative
                        else "Class values must be smaller than num_classes.")


def defer_class_check(classes: torch.Tensor, num_classes: int) -> None:
    """Fused eager's check of one_hot's classes (a composite with no aten op of its own), read
    at the sync point that runs it."""
    deferred_checks.record(_outputs(_class_faults, (unwrap(classes), num_classes)),
                           _class_error, _origin("one_hot"))


def traced_checks(func, fakes: tuple, values: tuple) -> list:
    """A compiled graph's checks of ``func``'s values, computed inside its program:
    [(the check's outputs, make_error)]. ``fakes``: the node's (args, kwargs) as the graph's
    fake tensors; ``values``: the same, as the program's traced arrays."""
    if func not in _CHECKED or not config.get("check_indices"):
        return []
    leaves, spec = tree_flatten(fakes)
    arrays = tree_leaves(values)
    if len(leaves) != len(arrays):
        return []
    leaves = [_with_sizes(f, a) for f, a in zip(leaves, arrays, strict=True)]
    by_fake = {id(t): a for t, a in zip(leaves, arrays, strict=True)
               if isinstance(t, torch.Tensor)}

    def traced(t):
        return by_fake[id(t)]

    args, kwargs = tree_unflatten(leaves, spec)
    checks = _value_checks(func, args, kwargs, traced) + _index_checks(func, args, kwargs, traced)
    return [(_outputs(exe, exe_args), make_error) for exe, exe_args, make_error in checks]


_fake_mode = None


def _with_sizes(fake, value):
    """A graph argument with the sizes this program runs with: under symbolic sizes
    (dynamic shapes) a fake tensor of its array's shape and an int for a SymInt, as the
    checks need them static."""
    global _fake_mode
    if isinstance(fake, torch.SymInt):
        return value
    if not isinstance(fake, torch.Tensor) or all(isinstance(n, int) for n in fake.shape):
        return fake
    if _fake_mode is None:
        _fake_mode = FakeTensorMode()
    with _fake_mode:
        return torch.empty(value.shape, dtype=fake.dtype, device=fake.device)


def checked(func, handler, unwrap=unwrap):
    """``handler`` with ``func``'s index bounds checked first, if it has indices to check."""
    if func not in _CHECKED or not config.get("check_indices"):
        return handler

    def run(args, kwargs):
        try:
            check(func, args, kwargs, unwrap)
        except (IndexError, RuntimeError):
            # CPU checks shapes before index values: a shape error is the one it raises
            # (normal checks its std before broadcasting it).
            if func not in _BEFORE_SHAPES:
                func(*tree_map(meta_like, args), **tree_map(meta_like, kwargs))
            raise
        return handler(args, kwargs)

    return run
