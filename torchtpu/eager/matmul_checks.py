"""CPU's argument checks for the matrix products, in CPU's order.

The meta kernels promote mixed dtypes where CPU multiplies only like ones, and check dtypes
before shapes where CPU checks shapes first; a check here leaves bad shapes to the meta
kernel where its shape errors are CPU's. The quantized products' (``_int_mm``,
``_scaled_mm``, ``_weight_int8pack_mm``) meta kernels check cuda's constraints instead (a
column-major ``mat2``, sizes divisible by 16)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ..ops.dtypes import cpp_name, scalar_type_name, to_torch_dtype
from ..tensor import contiguous_strides
from .kernel_dtypes import not_for_bool, same_dtype

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


_W8 = "_weight_int8pack_mm_cpu :"


def _weight_int8pack_mm_check(self, mat2, scales) -> Exception | str | None:
    """CPU's, in its order (the strides only where the tensors are: CHECKED_ON_TENSORS)."""
    for m in (self, mat2):
        if m.ndim < 2:  # (CPU reads both sizes first)
            return IndexError(f"Dimension out of range (expected to be in range of "
                              f"[{-max(m.ndim, 1)}, {max(m.ndim, 1) - 1}], but got 1)")
    k, n = self.shape[1], mat2.shape[0]
    dtype = to_torch_dtype(self.dtype)
    if dtype not in (torch.float32, torch.float16, torch.bfloat16):
        return f"{_W8} expect A to be either 32-bit or 16-bit float tensor."
    if isinstance(self, torch.Tensor) and self.stride(-1) != 1:
        return f"{_W8} A must be contiguous on the last dimension."
    if self.ndim != 2:
        return f"{_W8} expect A to be 2D tensor."
    if to_torch_dtype(mat2.dtype) != torch.int8:
        return f"{_W8} expect B to be int8 tensor."
    if not _contiguous(mat2):
        return f"{_W8} expect B to be contiguous."
    if mat2.shape[1] != k:
        return f"{_W8} expect B.size(1) == {k}"
    if scales.ndim != 1 or scales.shape[0] != n:
        return f"{_W8} expect scales to be 1d tensor with size {n}"
    if to_torch_dtype(scales.dtype) != dtype:
        return (f"expected scalar type {scalar_type_name(dtype)} but found "
                f"{scalar_type_name(scales.dtype)}")
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


def _expand_message(shape: Sequence[int], target: Sequence[int]) -> str | None:
    """CPU's expand_size message, when ``shape`` does not expand to ``target``."""
    lead = len(target) - len(shape)
    for i in range(len(target) - 1, lead - 1, -1):
        size = shape[i - lead]
        if size not in (1, target[i]):
            return (f"The expanded size of the tensor ({target[i]}) must match the existing "
                    f"size ({size}) at non-singleton dimension {i}.  Target sizes: "
                    f"{list(target)}.  Tensor sizes: {list(shape)}")
    return None


def addmm_expand(self, mat1, mat2, *_) -> str | None:
    # CPU expands self to the product's shape
    return _expand_message(self.shape, (mat1.shape[0], mat2.shape[1]))


def _mm_dtypes(m1, m2) -> Exception | str | None:
    """mm's kernel: like dtypes, then not bools."""
    if m1.dtype != m2.dtype:
        return (f"expected m1 and m2 to have the same dtype, but got: {cpp_name(m1.dtype)} != "
                f"{cpp_name(m2.dtype)}")
    return not_for_bool("addmm_impl_cpu_", m1, m2)


# Matrix products: CPU multiplies only like dtypes (their meta kernels promote instead).
# Where CPU checks the shapes before a dtype, a check leaves bad shapes to the meta kernel,
# whose shape errors are CPU's.
def _mm_check(self, mat2):
    for name, m in (("self", self), ("mat2", mat2)):
        if m.ndim != 2:
            return f"{name} must be a matrix"
    if self.shape[1] != mat2.shape[0]:
        return None
    return _mm_dtypes(self, mat2)


def _addmm_check(self, mat1, mat2, *_):
    # CPU compares self with mat2 first, then mat1 with mat2; the shapes, then the kernel
    for name, t in (("self", self), ("mat1", mat1)):
        if t.dtype != mat2.dtype:
            return (f"{name} and mat2 must have the same dtype, but got "
                    f"{scalar_type_name(t.dtype)} and {scalar_type_name(mat2.dtype)}")
    if mat1.ndim != 2 or mat2.ndim != 2 or mat1.shape[1] != mat2.shape[0] or addmm_expand(
            self, mat1, mat2):
        return None
    return not_for_bool("addmm_impl_cpu_", self, mat1, mat2)


def _addmv_shapes(shape, mat, vec) -> str | None:
    """addmv's meta checks (``shape``: self's), CPU's before its dtypes (a meta kernel
    checks dtypes first). mv is addmv into a vector of mat's rows."""
    shape = (mat.shape[0],) if shape is None and mat.ndim else shape
    if mat.ndim != 2 or vec.ndim != 1 or len(shape) > 1:
        return f"vector + matrix @ vector expected, got {len(shape)}, {mat.ndim}, {vec.ndim}"
    if mat.shape[1] != vec.shape[0] or math.prod(shape) not in (1, mat.shape[0]):
        return (f"size mismatch, got input ({shape[0] if shape else 1}), mat "
                f"({mat.shape[0]}x{mat.shape[1]}), vec ({vec.shape[0]})")
    return None


def _addmv_dtypes(result, mat, vec):
    dtypes = [to_torch_dtype(d) for d in (result, mat.dtype, vec.dtype)]
    if len(set(dtypes)) > 1:
        names = [scalar_type_name(d) for d in dtypes]
        return f"addmv input tensors must have the same dtype, but got {names[0]}, " \
               f"{names[1]}, and {names[2]}"
    return not_for_bool("addmv_impl_cpu", mat, vec)


def _three_d(batch1, batch2) -> str | None:
    for name, b in (("batch1", batch1), ("batch2", batch2)):
        if b.ndim != 3:
            return f"{name} must be a 3D tensor"
    return None


def _batch_shapes(batch1, batch2) -> str | None:
    """bmm's and baddbmm's meta checks, CPU's before its dtypes."""
    if message := _three_d(batch1, batch2):
        return message
    expected = [batch1.shape[0], batch1.shape[2]]
    if list(batch2.shape[:2]) != expected:
        return (f"Expected size for first two dimensions of batch2 tensor to be: "
                f"[{expected[0]}, {expected[1]}] but got: [{batch2.shape[0]}, "
                f"{batch2.shape[1]}].")
    return None


def _bmm_dtypes(self, mat2):
    # the kernel is chosen by self's dtype, then it reads mat2 as that dtype
    return not_for_bool("bmm", self) or same_dtype(self, mat2)


def _bmm_check(self, mat2):
    return _batch_shapes(self, mat2) or _bmm_dtypes(self, mat2)


def _matmul_check(self, other):
    """A user's matmul runs PyTorch's composite, whose dot, mv, mm or bmm checks the dtypes;
    aten.matmul reaches its rule from decompositions (_euclidean_dist's), which check the
    product it folds into here."""
    if self.ndim == 0 or other.ndim == 0:
        return None  # (the meta kernel's check)
    if self.ndim == 1 and other.ndim == 1:
        return _dot_check(self, other)
    if other.ndim == 1:
        return _addmv_dtypes(other.dtype, self, other)
    if other.ndim == 2:
        return _mm_dtypes(self, other)
    return _bmm_dtypes(self, other)  # (batched and broadcast: the folded bmm's shapes fit)


def _baddbmm_check(self, batch1, batch2, *_, **__):
    if message := _batch_shapes(batch1, batch2):
        return message
    if self.ndim <= 3 and (message := _expand_message(
            self.shape, (batch1.shape[0], batch1.shape[1], batch2.shape[2]))):
        return message
    if self.dtype != batch1.dtype:
        return (f"Input dtypes must be the same, got: input {cpp_name(self.dtype)}, batch1: "
                f"{cpp_name(batch1.dtype)}, batch2: {cpp_name(batch2.dtype)}")
    return not_for_bool("baddbmm", self) or same_dtype(batch1, batch2)


def _addbmm_check(self, batch1, batch2, *_, **__):
    """CPU's addbmm runs addmm_ on each batch: its checks, self against mat2 first, after
    its own checks of the shapes."""
    if message := _three_d(batch1, batch2):
        return message
    if self.ndim <= 2 and (message := _expand_message(self.shape,
                                                      (batch1.shape[1], batch2.shape[2]))):
        return message
    if batch1.shape[0] != batch2.shape[0]:
        return (f"batch1 and batch2 must have same number of batches, got {batch1.shape[0]} "
                f"and {batch2.shape[0]}")
    if batch1.shape[2] != batch2.shape[1]:
        return (f"Incompatible matrix sizes for bmm ({batch1.shape[1]}x{batch1.shape[2]} and "
                f"{batch2.shape[1]}x{batch2.shape[2]})")
    for names, a, b in (("self and mat2", self, batch2), ("mat1 and mat2", batch1, batch2)):
        if a.dtype != b.dtype:
            return (f"{names} must have the same dtype, but got {scalar_type_name(a.dtype)} "
                    f"and {scalar_type_name(b.dtype)}")
    return not_for_bool("addmm_impl_cpu_", self)


def _dot_check(self, other, *_):
    if self.ndim != 1 or other.ndim != 1:  # (CPU's dot_check looks at the dims first)
        return f"1D tensors expected, but got {self.ndim}D and {other.ndim}D tensors"
    if self.dtype != other.dtype:
        return ("dot : expected both vectors to have same dtype, but found "
                f"{scalar_type_name(self.dtype)} and {scalar_type_name(other.dtype)}")
    if self.shape != other.shape:
        return None
    return not_for_bool("dot", self)


PRODUCT_CHECKS = {
    _aten.mm.default: _mm_check,
    _aten.addmm.default: _addmm_check,
    _aten.mv.default: lambda mat, vec: (_addmv_shapes(None, mat, vec)  # into vec's dtype
                                        or _addmv_dtypes(vec.dtype, mat, vec)),
    _aten.addmv.default: lambda self, mat, vec, *_: (_addmv_shapes(self.shape, mat, vec)
                                                     or _addmv_dtypes(self.dtype, mat, vec)),
    _aten.bmm.default: _bmm_check,
    _aten.baddbmm.default: _baddbmm_check,
    _aten.addbmm.default: _addbmm_check,
    _aten.dot.default: _dot_check,
    _aten.vdot.default: _dot_check,
    _aten.matmul.default: _matmul_check,
}


CHECKS = {_aten._int_mm.default: _int_mm_check, _aten._scaled_mm.default: _scaled_mm_check,
          _aten._weight_int8pack_mm.default: _weight_int8pack_mm_check, **PRODUCT_CHECKS}
# Checks that read strides, which only the tensors (not a rule's arrays) carry.
CHECKED_ON_TENSORS = {_aten._scaled_mm.default, _aten._weight_int8pack_mm.default}
