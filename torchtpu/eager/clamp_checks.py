"""CPU's checks for clamp, clamp_min and clamp_max (and the foreach ops that run them).

CPU's meta kernel for clamp by numbers refuses a complex tensor; a tensor that is not floating
it promotes with the numbers, refusing an in-place clamp that changes its dtype (in C++'s type
names: "long int") and then a complex result. A floating tensor keeps its dtype (a number's
imaginary part is refused by value, number_checks.py). clamp_min and clamp_max by a number
refuse a complex one first. Clamp by tensors leaves the result type to TensorIterator (an
in-place cast refused in c10's names: "Long") and a complex result to the kernel it runs:
clamp, maximum or minimum.
"""

from __future__ import annotations

import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND as _KIND
from torch._prims_common import elementwise_dtypes

from ..ops.dtypes import as_meta, cpp_name, scalar_type_name, to_torch_dtype
from .kernel_dtypes import broadcast_shape

_aten = torch.ops.aten
_NONE = "torch.clamp: At least one of 'min' or 'max' must not be None"


def _complex_error() -> NotImplementedError:
    return NotImplementedError("clamp is not supported for complex types")


def _is_complex(x) -> bool:
    return isinstance(x, complex) or hasattr(x, "dtype") and to_torch_dtype(x.dtype).is_complex


def _result(*operands) -> torch.dtype:
    metas = [torch.empty(x.shape, dtype=x.dtype, device="meta") if isinstance(x, torch.Tensor)
             else as_meta(x) for x in operands if x is not None]
    return elementwise_dtypes(*metas, type_promotion_kind=_KIND.NO_OPMATH)[1]


def _by_numbers(inplace: bool):
    def check(self, min=None, max=None) -> Exception | None:  # noqa: A002
        if min is None and max is None:
            return RuntimeError(_NONE)
        if _is_complex(self):
            return _complex_error()
        if not to_torch_dtype(self.dtype).is_floating_point:
            dtype = _result(self, min, max)
            if inplace and dtype != to_torch_dtype(self.dtype):
                return RuntimeError(f"result type {scalar_type_name(dtype)} can't be cast to "
                                    f"the desired output type {cpp_name(self.dtype)}")
            if dtype.is_complex:
                return _complex_error()
            if dtype == torch.bool:  # (CPU's kernels by numbers are not built for bools)
                kernel = ("clamp_scalar_cpu" if min is not None and max is not None else
                          "clamp_min_scalar_cpu" if min is not None else "clamp_max_scalar_cpu")
                return NotImplementedError(f'"{kernel}" not implemented for \'Bool\'')
        return None

    return check


def _by_number(inplace: bool, side: str):
    def check(self, bound) -> Exception | None:
        if _is_complex(self) or _is_complex(bound):
            return _complex_error()
        return _by_numbers(inplace)(self, **{side: bound})

    return check


def _by_tensors(inplace: bool, clamp: bool = True, kernel: str = "clamp_cpu"):
    def check(self, min=None, max=None) -> Exception | None:  # noqa: A002
        if clamp and min is None and max is None:
            return RuntimeError(_NONE)
        if clamp and _is_complex(self):
            return _complex_error()
        if broadcast_shape(self, min, max) is None:
            return None  # (TensorIterator's shape error comes first: the meta kernel's)
        dtype = _result(self, min, max)
        if inplace and not torch.can_cast(dtype, to_torch_dtype(self.dtype)):
            return RuntimeError(f"result type {scalar_type_name(dtype)} can't be cast to the "
                                f"desired output type {scalar_type_name(self.dtype)}")
        both = not clamp or min is not None and max is not None
        # (clamp's own kernel, by two tensors, is not built for bools either)
        if dtype.is_complex or dtype == torch.bool and clamp and both:
            name = kernel if both else "maximum_cpu" if min is not None else "minimum_cpu"
            return NotImplementedError(f'"{name}" not implemented for '
                                       f"'{scalar_type_name(dtype)}'")
        return None

    return check


def _one_tensor(inplace: bool, kernel: str):
    check = _by_tensors(inplace, clamp=False, kernel=kernel)
    return lambda self, other: check(self, other)


CLAMP_CHECKS = {
    **{getattr(_aten, "clamp" + tail).default: _by_numbers(bool(tail)) for tail in ("", "_")},
    **{getattr(_aten, "clamp" + tail).Tensor: _by_tensors(bool(tail)) for tail in ("", "_")},
    **{getattr(_aten, f"clamp_{side}{tail}").default: _by_number(bool(tail), side)
       for side in ("min", "max") for tail in ("", "_")},
    **{getattr(_aten, f"clamp_{side}{tail}").Tensor: _one_tensor(bool(tail), kernel)
       for side, kernel in (("min", "maximum_cpu"), ("max", "minimum_cpu"))
       for tail in ("", "_")},
}
