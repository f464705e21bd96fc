"""The dtypes of ``out=`` tensors CPU's kernels take, and their words for one they refuse.

Most ATen kernels with an out= form take only an out of their result's dtype: structured
kernels check it as they set their output up ("Expected out tensor to have dtype float, but
got double instead"), and the TensorIterator kernels that ask all operands to share one dtype
(neg, floor, the activations) say "Found dtype Double but expected Float". Pointwise maths
that casts its result (sin, add, comparisons), reductions that compute in their out's dtype
(sum over dims, mean, cumsum), concatenation and the factories take any out their result
casts to safely; ``mutation._store`` refuses an unsafe cast. The tables below were read off
CPU's kernels by calling each out= form with an out of another dtype.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..ops.dtypes import cpp_name, scalar_type_name

# TensorIterator kernels built to check that every operand has one dtype.
_ONE_DTYPE = frozenset({
    "abs", "absolute", "bitwise_not", "ceil", "clamp.out", "clamp_min.out", "clamp_max.out",
    "conj_physical", "elu", "fix", "floor", "frac", "gelu", "hardshrink", "hardsigmoid",
    "hardswish", "hardtanh", "leaky_relu", "mish", "neg", "negative", "round", "sgn", "sign",
    "silu", "softplus", "softshrink", "special_round", "trunc", "binary_cross_entropy",
    "soft_margin_loss", "rrelu_with_noise",
})
# Pointwise ops whose kernels are structured or copy: their result's dtype only.
_POINTWISE_EXACT = frozenset({"relu", "celu", "clone", "isnan", "isinf", "_conj_physical"})
# Non-pointwise kernels that cast their result into any out it casts to safely.
_CASTING = frozenset({
    "sum.IntList_out", "nansum", "prod.int_out", "std", "var", "std_mean", "var_mean",
    "cumsum", "cumprod", "logsumexp", "mean.out", "mse_loss", "smooth_l1_loss", "huber_loss",
    "addr", "bernoulli.out", "glu", "_to_copy", "_fft_c2r", "mvlgamma",
    "floor_divide", "normal.Tensor_float_out", "normal.float_Tensor_out",
    "normal.Tensor_Tensor_out",
})


def _name(op: str) -> str:
    return op.split(".")[0]


def _expected_scalar(op, self, out, result):
    return f"expected scalar type {scalar_type_name(result)} but found {scalar_type_name(out)}"


def _expected_scalar_type(op, self, out, result):
    return f"expected scalar_type {scalar_type_name(result)} but found {scalar_type_name(out)}"


def _same_scalar_type(op, self, out, result):
    return f"{_name(op)}(): self and result must have the same scalar type"


def _not_boolean(op, self, out, result):
    return f"{_name(op)} does not support non-boolean outputs."


def _object_of_scalar_type(op, self, out, result):
    return (f"Expected object of scalar type {scalar_type_name(result)} but got scalar type "
            f"{scalar_type_name(out)} for argument 'out'")


def _result_dtype(op, self, out, result):
    return (f"result dtype {scalar_type_name(out)} does not match input dtype "
            f"{scalar_type_name(self)}")


def _bool_result(op, self, out, result):
    if out == torch.bool or out == torch.uint8 == self:
        return None
    return f"{_name(op)} only supports bool tensor for result, got: {scalar_type_name(out)}"


def _searchsorted(op, self, out, result):
    return ("torch.searchsorted(): output tensor's dtype is wrong, it can only be Int(int32) or "
            "Long(int64) depending on whether out_int32 flag is True, but we got output "
            f"tensor's dtype {scalar_type_name(out)} and out_int32 flag is "
            f"{result == torch.int32}")


def _castable(what: str, name: str = "result"):
    def check(op, self, out, result):
        if torch.can_cast(result, out):
            return None
        return (f"{what}: Expected {name} to be safely castable from {scalar_type_name(result)} "
                f"dtype, but got {name} with dtype {scalar_type_name(out)}")

    return check


def _cat(op, self, out, result):
    if torch.can_cast(result, out):
        return None
    return TypeError(f"torch.cat(): input types can't be cast to the desired output type "
                     f"{scalar_type_name(out)}")


def _can_cast_self(op, self, out, result):
    if torch.can_cast(result, out):
        return None
    return ("Expected canCast( typeMetaToScalarType(self.dtype()), typeMetaToScalarType("
            "out.dtype())) to be true, but got false.  (Could this error message be improved?  "
            "If so, please report an enhancement request to PyTorch.)")


def _floating(op, self, out, result):
    if out.is_floating_point or out.is_complex:
        return None
    return ("logsumexp(): Expected floating point type for result tensor, but got: "
            f"{scalar_type_name(out)}")


def _complex_fft(op, self, out, result):
    if result.is_complex and not out.is_complex:
        return f"fft expects a complex output tensor, but got {scalar_type_name(out)}"
    return None


Check = Callable[[str, torch.dtype, torch.dtype, torch.dtype], "str | Exception | None"]
# Kernels that check an out's dtype with words of their own (None: CPU takes it); they run
# only for an out of another dtype than the result's.
_OWN_WORDS: dict[str, Check] = {
    "multinomial": lambda op, s, o, r: f"multinomial expects Long tensor out, got: "
                                       f"{scalar_type_name(o)}",
    "amax": lambda op, s, o, r: (f"Expected the dtype for input and out to match, but got "
                                 f"{scalar_type_name(s)} for input's dtype and "
                                 f"{scalar_type_name(o)} for out's dtype."),
    "complex": _object_of_scalar_type, "polar": _object_of_scalar_type,
    "dot": _result_dtype, "vdot": _result_dtype,
    "addbmm": lambda op, s, o, r: (f"self and mat2 must have the same dtype, but got "
                                   f"{scalar_type_name(o)} and {scalar_type_name(r)}"),
    "masked_select": _same_scalar_type, "index_select": _same_scalar_type,
    "take": lambda op, s, o, r: (f"take(): self and out expected to have the same dtype, but got "
                                 f"self.dtype = {scalar_type_name(s)} and out.dtype = "
                                 f"{scalar_type_name(o)}"),
    "narrow_copy": lambda op, s, o, r: (
        "Expected self.dtype() == output.dtype() to be true, but got false.  (Could this error "
        "message be improved?  If so, please report an enhancement request to PyTorch.)"),
    "ormqr": lambda op, s, o, r: (f"torch.ormqr: Expected input and result to have the same "
                                  f"dtype, but input has dtype{scalar_type_name(s)} and result "
                                  f"has dtype {scalar_type_name(o)}"),
    # (ATen's meta checks an out for complex before it compares the dtypes)
    "heaviside": lambda op, s, o, r: (
        "heaviside is not yet implemented for complex tensors." if o.is_complex else
        "heaviside is not yet implemented for tensors with different dtypes."),
    "log_sigmoid_forward": _expected_scalar, "linalg_solve_triangular": _expected_scalar,
    "im2col": _expected_scalar, "_slow_conv2d_forward": _expected_scalar,
    "reflection_pad1d": _expected_scalar, "reflection_pad2d": _expected_scalar,
    "reflection_pad3d": _expected_scalar,
    "logcumsumexp": _expected_scalar_type, "cummax": _expected_scalar_type,
    "cummin": _expected_scalar_type,
    "where": lambda op, s, o, r: (f"Expected out type to be {scalar_type_name(r)} but got "
                                  f"{scalar_type_name(o)}"),
    "nonzero": lambda op, s, o, r: (f"nonzero: Expected out tensor to have scalar type Long but "
                                    f"got scalar type{scalar_type_name(o)}"),
    "all": _bool_result, "any": _bool_result,
    "hash_tensor": lambda op, s, o, r: (f"Expected result to be of dtype uint64, but got "
                                        f"{scalar_type_name(o)}"),
    "histc": lambda op, s, o, r: (f"torch.histogram: input tensor and hist tensor should have "
                                  f"the same dtype, but got input {cpp_name(s)} and hist "
                                  f"{cpp_name(o)}"),
    "searchsorted": _searchsorted, "bucketize": _searchsorted,
    "signbit": _not_boolean, "isposinf": _not_boolean, "isneginf": _not_boolean,
    "nan_to_num": lambda op, s, o, r: (f"nan_to_num: dtype of out: {scalar_type_name(o)} should "
                                       f"be same as input: {scalar_type_name(s)}"),
    "kthvalue": lambda op, s, o, r: "output values must be of same type as input",
    "mode": lambda op, s, o, r: (f"expected scalar type '{scalar_type_name(r)}' but got "
                                 f"'{scalar_type_name(o)}' for values output"),
    "median.dim_values": lambda op, s, o, r: (
        f"Expected tensor for 'values' to have the same type as tensor for argument #2 'self'; "
        f"but type torch.{scalar_type_name(o)}Tensor does not equal "
        f"torch.{scalar_type_name(s)}Tensor (while checking arguments for median)"),
    "frexp": lambda op, s, o, r: (f"torch.frexp() expects mantissa to have dtype {cpp_name(r)} "
                                  f"but got {cpp_name(o)}"),
    "adaptive_avg_pool2d": lambda op, s, o, r: (f"expected dtype {cpp_name(r)} for `output` but "
                                                f"got dtype {cpp_name(o)}"),
    "quantile": lambda op, s, o, r: "quantile() out tensor must be same dtype as the input tensor",
    "nanquantile": lambda op, s, o, r: ("quantile() out tensor must be same dtype as the input "
                                        "tensor"),
    "cholesky": _castable("cholesky"), "cholesky_inverse": _castable("cholesky_inverse"),
    "cholesky_solve": _castable("cholesky_solve"), "linalg_pinv": _castable("linalg.pinv"),
    "linalg_householder_product": _castable("torch.linalg.householder_product"),
    "linalg_eigvals": _castable("torch.linalg.eigvals", "eigenvalues"),
    "linalg_eig": _castable("torch.linalg.eig", "eigenvalues"),
    "linalg_matrix_rank": _castable("torch.linalg.matrix_rank"),
    # a floating input's nansum runs in the out's dtype, which CPU's kernel must be floating
    "nansum": lambda op, s, o, r: NotImplementedError(
        f'"nansum_cpu" not implemented for \'{scalar_type_name(o)}\'')
    if s is not None and s.is_floating_point and not o.is_floating_point else None,
    "mean.dtype_out": lambda op, s, o, r: None if torch.can_cast(r, o) else (
        f"mean.dtype_out(): input types can't be cast to the desired output type "
        f"{scalar_type_name(o)}"),
    "logsumexp": _floating, "_fft_r2c": _complex_fft, "_fft_c2c": _complex_fft,
    **dict.fromkeys(("cat", "_chunk_cat", "stack", "hstack", "vstack", "dstack", "column_stack"),
                    _cat),
    "max.unary_out": _can_cast_self, "min.unary_out": _can_cast_self,
    # (draws into its out: out.normal_(), then scales and shifts it)
    "normal": lambda op, s, o, r: None if o.is_floating_point or o.is_complex else (
        NotImplementedError(f'"normal_kernel_cpu" not implemented for \'{scalar_type_name(o)}\'')),
}
_OWN_WORDS["amin"] = _OWN_WORDS["amax"]
_OWN_WORDS["nanmedian.dim_values"] = _OWN_WORDS["median.dim_values"]


def _median_indices(op, self, out, result):
    return (f"Expected tensor for argument #1 'indices' to have scalar type Long; but got "
            f"torch.{scalar_type_name(out)}Tensor instead (while checking arguments for median)")


# The same for their second output (indices, frexp's exponent).
_SECOND_WORDS: dict[str, Check] = {
    "mode": lambda op, s, o, r: (f"expected scalar type '{scalar_type_name(r)}' but got "
                                 f"'{scalar_type_name(o)}' for indices output"),
    "kthvalue": lambda op, s, o, r: "output indices must be of scalar type Long",
    "median.dim_values": _median_indices, "nanmedian.dim_values": _median_indices,
    "cummax": _expected_scalar_type, "cummin": _expected_scalar_type,
    "linalg_eig": _castable("torch.linalg.eig", "eigenvectors"),
    "frexp": lambda op, s, o, r: (f"torch.frexp() expects exponent to have int dtype but got "
                                  f"{cpp_name(o)}"),
}


# Kernels that check their out's dtype before their arguments: their result's dtype, from
# the input's (nansum's, whose sum then runs in the out's dtype).
_CHECKED_FIRST = {"multinomial": lambda self: torch.int64, "nonzero": lambda self: torch.int64,
                  "nansum": lambda self: self}


def refuse_out_dtype_first(func, self, out: torch.Tensor) -> None:
    """``refuse_out_dtype`` for the kernels that check their out before all else."""
    result_of = _CHECKED_FIRST.get(func._schema.name.removeprefix("aten::"))
    result = result_of(self) if result_of is not None else None
    if result is not None:
        refuse_out_dtype(func, False, self, out, result)


def refuse_out_dtype(func, pointwise: bool, self, out: torch.Tensor, result: torch.dtype,
                     position: int = 0) -> None:
    """Raise CPU's error when ``func`` cannot write its ``result`` dtype into ``out``.

    ``self`` is the op's first tensor's dtype (None without one); ``position`` is ``out``'s
    among the op's outputs (kernels check their first two in their own words)."""
    overload = func._schema.name.removeprefix("aten::") + "." + func._overloadname
    packet = overload.split(".")[0]
    got = out.dtype
    words = {0: _OWN_WORDS, 1: _SECOND_WORDS}.get(position, {})
    check = words.get(overload) or words.get(packet)
    if check is not None:
        message = check(overload, self, got, result) if got != result else None
    elif got == result or packet in _CASTING or overload in _CASTING:
        message = None
    elif (packet in _ONE_DTYPE or overload in _ONE_DTYPE) and not (
            packet in ("abs", "absolute") and self is not None and self.is_complex):
        message = f"Found dtype {scalar_type_name(got)} but expected {scalar_type_name(result)}"
    elif pointwise and packet not in _POINTWISE_EXACT:
        message = None
    else:
        message = (f"Expected out tensor to have dtype {cpp_name(result)}, but got "
                   f"{cpp_name(got)} instead")
    if message:
        raise message if isinstance(message, Exception) else RuntimeError(message)

