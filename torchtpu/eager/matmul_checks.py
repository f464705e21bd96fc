"""CPU's argument checks for the quantized matrix products (``_int_mm``, ``_scaled_mm``),
whose meta kernels check cuda's constraints instead (a column-major ``mat2``, sizes
divisible by 16)."""

from __future__ import annotations

import math

import torch

from ..ops.dtypes import cpp_name, scalar_type_name, to_torch_dtype
from ..tensor import contiguous_strides

_aten = torch.ops.aten
_FLOAT8 = {torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz}


def _int_mm_check(self, mat2) -> str | None:
    for name, m in (("self", self), ("mat2", mat2)):
        if m.ndim != 2:
            return f"int_mm_out_cpu: Expected {name} to be of dimension 2 but got {m.ndim}"
        if m.dtype.kind not in "iu" or m.dtype.itemsize != 1:
            return (f"int_mm_out_cpu: Expected {name} dtype to be int8 or uint8 but got "
                    f"{cpp_name(m.dtype)}")
    if self.shape[1] != mat2.shape[0]:
        return ("int_mm_out_cpu: self.size(1) needs to match mat2.size(0) but got "
                f"{self.shape[1]} and {mat2.shape[0]}")
    return None


def _scaled_mm_check(self, mat2, scale_a, scale_b, bias=None, scale_result=None,
                     out_dtype=None, use_fast_accum=False) -> Exception | str | None:
    """CPU's: per-tensor scales on both sides, or contiguous ones per row of ``self`` and
    per column of ``mat2``, then the matrices' shapes. (A lowering rule's arrays have no
    strides: dispatch runs this check on the tensors too, ``CHECKED_ON_TENSORS``.)"""
    if not (_scaling(self, scale_a, None) and _scaling(mat2, scale_b, None) or (
            self.ndim == 2 and mat2.ndim == 2 and _scaling(self, scale_a, (self.shape[0], 1))
            and _scaling(mat2, scale_b, (1, mat2.shape[1]))
            and _contiguous(scale_a) and _contiguous(scale_b))):
        return ValueError(_invalid_scaling(self, mat2, scale_a, scale_b))
    for name, m in (("mat1", self), ("mat2", mat2)):
        if m.ndim != 2:
            return f"{name} must be a matrix"
    if self.shape[1] != mat2.shape[0]:
        return (f"mat_a and mat_b shapes cannot be multiplied ({self.shape[0]}x{self.shape[1]} "
                f"and {mat2.shape[0]}x{mat2.shape[1]})")
    if scale_result is not None and (math.prod(scale_result.shape) != 1
                                     or to_torch_dtype(scale_result.dtype) != torch.float32):
        return "scale_result must be a float scalar"
    if bias is not None and math.prod(bias.shape) != mat2.shape[1]:
        return f"Bias must be size {mat2.shape[1]} but got {math.prod(bias.shape)}"
    return None


def _scaling(m, scale, rows: tuple | None) -> bool:
    """Float8 scaled by a float32 singleton (``rows`` None) or by one of shape ``rows``."""
    if to_torch_dtype(m.dtype) not in _FLOAT8 or to_torch_dtype(scale.dtype) != torch.float32:
        return False
    return math.prod(scale.shape) == 1 if rows is None else tuple(scale.shape) == rows


def _contiguous(scale) -> bool:
    return scale.is_contiguous() if isinstance(scale, torch.Tensor) else True


def _invalid_scaling(a, b, scale_a, scale_b) -> str:
    def described(name, scale):
        stride = (scale.stride() if isinstance(scale, torch.Tensor)
                  else contiguous_strides(scale.shape))
        return (f"{name}.dtype()={scalar_type_name(scale.dtype)}, {name}.size()="
                f"{_list(scale.shape)}, {name}.stride()={_list(stride)}")

    rows, columns = a.shape[0] if a.ndim else 1, b.shape[1] if b.ndim > 1 else 1
    return ("Invalid scaling configuration.\n"
            "- For TensorWise scaling, a and b should be float8, scales should be float and "
            "singletons.\n"
            f"- For RowWise scaling, a and b should be float8, scales should be float, scale_a "
            f"should be ({rows}, 1) and scale_b should be (1, {columns}), and both should be "
            f"contiguous.\nGot mat_a.dtype()={scalar_type_name(a.dtype)}, "
            f"{described('scale_a', scale_a)}, mat_b.dtype()={scalar_type_name(b.dtype)}, "
            + described("scale_b", scale_b).replace(", scale_b.stride", " and scale_b.stride"))


def _list(values) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


CHECKS = {_aten._int_mm.default: _int_mm_check, _aten._scaled_mm.default: _scaled_mm_check}
# Checks that read strides, which only the tensors (not a rule's arrays) carry.
CHECKED_ON_TENSORS = {_aten._scaled_mm.default}
