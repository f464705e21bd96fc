"""The dtypes CPU's kernels are built for.

XLA computes most ops for any dtype (the floor of a complex number, a bool's softplus), where
CPU's kernel for the op is compiled for some dtypes only and raises for the others. A user's
code that runs on tpu must fail on CPU too, with the same words, so these ops refuse what CPU's
refuse. Read off CPU by calling each op with bool and complex tensors.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..ops.dtypes import cpp_name, result_type, scalar_type_name, to_jax_dtype

_aten = torch.ops.aten


def _numpy_dtype(dtype) -> np.dtype:
    """A torch or jax dtype as numpy's (rules see arrays, decompositions tensors)."""
    return np.dtype(to_jax_dtype(dtype) if isinstance(dtype, torch.dtype) else dtype)


def _kind(dtype) -> str:
    """numpy's kind of a dtype, with the half-width floats apart: h float16, B bfloat16."""
    dtype = _numpy_dtype(dtype)
    return {"float16": "h", "bfloat16": "B"}.get(dtype.name, dtype.kind)


def kernel_refuses(kernel: str, kinds: str):
    """CPU's kernel is not built for these dtype kinds (numpy's: b bool, i/u integers, f
    float32/64, c complex; h float16, B bfloat16)."""

    def check(self, *_, **__) -> NotImplementedError | None:
        if _kind(self.dtype) in kinds:
            return NotImplementedError(
                f'"{kernel}" not implemented for \'{scalar_type_name(self.dtype)}\'')
        return None

    return check


def result_refuses(kernel: str, kinds: str):
    """As ``kernel_refuses``, for a binary op's result dtype, which CPU's kernel is dispatched
    on (``1 << x`` of a float x, atan2 of a real and a complex)."""

    def check(self, other, *_, **__) -> NotImplementedError | None:
        if broadcast_shape(self, other) is None:
            return None  # TensorIterator's shape error comes first (the meta kernel's)
        if isinstance(self, torch.Tensor) or isinstance(other, torch.Tensor):  # decomposed ops'
            dtype = torch.result_type(self, other)
        else:
            dtype = result_type(self, other)
        if _kind(dtype) in kinds:
            return NotImplementedError(
                f'"{kernel}" not implemented for \'{scalar_type_name(dtype)}\'')
        return None

    return check


def broadcast_shape(*operands) -> tuple[int, ...] | None:
    """The shape the operands that have one (not numbers or None) broadcast to; None where
    they do not broadcast, whose error is the op's own (its meta kernel's)."""
    try:
        return tuple(torch.broadcast_shapes(
            *(tuple(x.shape) for x in operands if hasattr(x, "shape"))))
    except RuntimeError:
        return None


def not_for_bool(kernel: str, *tensors) -> NotImplementedError | None:
    if any(t.dtype == bool for t in tensors):
        return NotImplementedError(f'"{kernel}" not implemented for \'Bool\'')
    return None


def same_dtype(self, other, *_, **__) -> str | None:
    """CPU's kernels that take their operands in one dtype (linalg_cross, grid_sampler)."""
    if self.dtype != other.dtype:
        return (f"expected scalar type {scalar_type_name(self.dtype)} but found "
                f"{scalar_type_name(other.dtype)}")
    return None


def _refuses(kind: str, error: Exception):
    def check(self, *_, **__) -> Exception | None:
        return error if _kind(self.dtype) == kind else None

    return check


def _first(*checks):
    return lambda *args, **kwargs: next((e for c in checks if (e := c(*args, **kwargs))), None)


def _unsupported_complex(name: str):
    return _refuses("c", NotImplementedError(f"{name} is not supported for complex inputs"))


def _soft_margin_loss(self, target, *_):
    # CPU computes into an output of the input's dtype, which its float result cannot cast to
    if _kind(self.dtype) not in "iu":
        return None
    result = torch.result_type(self, target)
    if not (result.is_floating_point or result.is_complex):
        result = torch.get_default_dtype()
    return RuntimeError(f"result type {scalar_type_name(result)} can't be cast to the desired "
                        f"output type {scalar_type_name(self.dtype)}")


def _rrelu(self, noise, lower=None, upper=None, training=False, *_):
    # in evaluation its slope is fixed: CPU runs leaky_relu's kernel
    kernel = "rrelu_with_noise_out_cpu" if training else "leaky_relu_cpu"
    return kernel_refuses(kernel, "biuc")(self)


def _softshrink(self, lambd=0.5):
    """CPU's softshrink_check: the kernel's dtypes, then lambda within the input dtype's range
    (numbers as c10 prints them: six significant digits)."""
    if (refused := kernel_refuses("softshrink_check", "biuc")(self)) is not None:
        return refused
    high = float(torch.finfo(self.dtype).max)
    if not 0 <= lambd <= high:
        return (f"lambda must be in range [0, {high:g}] for input dtype "
                f"{scalar_type_name(self.dtype)}, but found {float(lambd):g}")
    return None


def _result_refused(kernel: str, kinds: str):
    """CPU's kernel, dispatched on the result's dtype (the op's dtype argument), is not built
    for these kinds."""

    def check(self, *_, dtype=None, **__) -> NotImplementedError | None:
        if dtype is not None and _kind(dtype) in kinds:
            return NotImplementedError(f'"{kernel}" not implemented for '
                                       f'\'{scalar_type_name(dtype)}\'')
        return None

    return check


def _heaviside(self, values) -> str | None:
    """ATen's heaviside: its kernel is built for neither complex nor mixed dtypes (a 0-d values
    is not promoted either)."""
    if "c" in (_kind(self.dtype), _kind(values.dtype)):
        return "heaviside is not yet implemented for complex tensors."
    if _numpy_dtype(self.dtype) != _numpy_dtype(values.dtype):
        return "heaviside is not yet implemented for tensors with different dtypes."
    return None


def _ldexp(self, other) -> NotImplementedError | None:
    """CPU's ldexp of a floating self runs a kernel dispatched on the exponent's dtype, which
    is not built for bool (an integer self takes a bool exponent: it multiplies by a power)."""
    if _kind(self.dtype) in "fhB" and _kind(other.dtype) == "b":
        return NotImplementedError('"ldexp_cpu_exp" not implemented for \'Bool\'')
    return None


def _addcmul(self, tensor1, tensor2, *_, **__) -> NotImplementedError | None:
    if all(_kind(t.dtype) == "b" for t in (self, tensor1, tensor2)):
        return NotImplementedError('"addcmul_cpu_out" not implemented for \'Bool\'')
    return None


# CPU's words: C++'s, with the two spaces the meta kernel's message lacks.
_ADDCDIV_OF_INTEGERS = (
    "Integer division with addcdiv is no longer supported, and in a future  release addcdiv "
    "will perform a true division of tensor1 and tensor2. The historic addcdiv behavior can be "
    "implemented as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for "
    "integer inputs and as (input + value * tensor1 / tensor2) for float inputs. The future "
    "addcdiv behavior is just the latter implementation: (input + value * tensor1 / tensor2), "
    "for all dtypes.")


def _addcdiv(self, tensor1, tensor2, *_, **__) -> RuntimeError | None:
    """Integer tensors (bools too, for CPU) divided: refused."""
    if all(_kind(t.dtype) in "biu" for t in (tensor1, tensor2)):
        return RuntimeError(_ADDCDIV_OF_INTEGERS)
    return None


def _inplace_scan(kernel: str):
    """cumsum_/cumprod_: CPU's kernel writes self in its own dtype, which a dtype must match."""
    def check(self, dim, *, dtype=None) -> Exception | None:
        if dtype is not None and _numpy_dtype(dtype) != _numpy_dtype(self.dtype):
            return RuntimeError(f"Bad in-place call: input tensor dtype {cpp_name(self.dtype)} "
                                f"and output tensor dtype {cpp_name(dtype)} should match")
        return kernel_refuses(kernel, "b")(self)

    return check


def _eig(self) -> Exception | None:
    """CPU's eig asks for the complex type of an integer input before dispatching."""
    if _kind(self.dtype) in "biu":
        return RuntimeError(f"Unknown Complex ScalarType for {scalar_type_name(self.dtype)}")
    return kernel_refuses("linalg_eig_out_cpu", "hB")(self)


_NO_COMPLEX_CLAMP = _refuses("c", NotImplementedError("clamp is not supported for complex types"))

# (op name, CPU's kernel name, dtype kinds it is not built for); the default overload.
_KERNELS = [
    ("aminmax", "aminmax_cpu", "c"), ("bitwise_not", "bitwise_not_cpu", "fhBc"),
    ("elu", "elu_cpu", "biuc"), ("celu", "elu_cpu", "biuc"), ("digamma", "digamma", "c"),
    ("erf", "erf_vml_cpu", "c"), ("erfc", "erfc_vml_cpu", "c"), ("erfinv", "erfinv_vml_cpu", "c"),
    ("frac", "frac_cpu", "biuc"), ("gelu", "GeluKernelImpl", "biuc"),
    ("glu_jvp", "glu_jvp_cpu", "biuhBc"),
    ("geqrf", "geqrf_cpu", "biuhB"), ("hardshrink", "hardshrink_cpu", "biuc"),
    ("hardsigmoid", "hardsigmoid_cpu", "biuc"), ("hardswish", "hardswish_cpu", "biuc"),
    ("hash_tensor", "xor_sum_cpu", "c"), ("i0", "i0_vml_cpu", "c"),
    ("leaky_relu", "leaky_relu_cpu", "biuc"), ("lgamma", "lgamma_vml_cpu", "c"),
    ("linalg_lu", "lu_cpu", "biuhB"), ("linalg_lu_factor_ex", "lu_cpu", "biuhB"),
    ("_linalg_svd", "linalg_svd_cpu", "hB"), ("linalg_qr", "geqrf_cpu", "hB"),
    ("log_sigmoid_forward", "log_sigmoid_cpu", "biuc"),
    ("logit", "logit_cpu", "c"), ("mish", "mish_cpu", "biuc"), ("mode", "mode_cpu", "c"),
    ("poisson", "poisson_cpu", "biuc"), ("random", "random_kernel_cpu", "c"),
    ("silu", "silu_cpu", "biu"), ("softplus", "softplus_cpu", "biuc"),
    ("softshrink", "softshrink_check", "biuc"), ("trace", "trace", "b"),
    ("unique_consecutive", "unique", "c"), ("threshold", "threshold_cpu", "bc"),
    ("round", "round_vml_cpu", "bc"), ("hardtanh_backward", "hardshrink_backward_cpu", "biuc"),
    ("_trilinear", "bmm", "b"),
    # nn kernels built for floating dtypes (the half ones cuda takes are taken)
    ("glu", "glu_cpu", "biuc"), ("_prelu_kernel", "prelu_cpu", "biuc"),
    ("multi_margin_loss", "multi_margin_loss_cpu_kernel", "biuc"),
    ("multilabel_margin_loss_forward", "multilabel_margin_loss_forward_out_frame", "biuc"),
    ("im2col", "im2col_out_cpu", "iu"), ("col2im", "col2im_out_cpu", "iu"),
    ("_pdist_forward", "pdist", "hB"),
    # LAPACK-backed kernels: float32/64 and complex only (integers fail the ops' own checks
    # first where they have one)
    ("_linalg_det", "lu_cpu", "hB"), ("_linalg_solve_ex", "lu_cpu", "hB"),
    ("linalg_cholesky_ex", "cholesky_cpu", "hB"), ("_linalg_eigh", "linalg_eigh_cpu", "biuhB"),
    ("linalg_solve_triangular", "triangular_solve_cpu", "biuhB"),
    ("linalg_householder_product", "orgqr_cpu", "biuhB"),
    ("special_entr", "entr_cpu", "c"), ("special_i0e", "i0e_cpu", "c"),
    ("special_i1", "i1_cpu", "c"), ("special_i1e", "i1e_cpu", "c"),
    *((f"special_{f}", f"{f}_cpu", "hBc") for f in (
        "airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "erfcx", "log_ndtr",
        "ndtri", "modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0",
        "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
        "spherical_bessel_j0")),
]

# Binary ops: (op name, CPU's kernel name, kinds of the result dtype it is not built for); every
# overload with both operands (the Scalar ones too).
_BINARY_KERNELS = [
    ("floor_divide", "div_floor_cpu", "bc"), ("remainder", "remainder_cpu", "bc"),
    ("fmod", "fmod_cpu", "bc"), ("atan2", "atan2_cpu", "c"), ("hypot", "hypot_cpu", "biuc"),
    ("copysign", "copysign_cpu", "c"), ("nextafter", "nextafter_cpu", "biuc"),
    ("logaddexp", "logaddexp_cpu", "biu"), ("logaddexp2", "logaddexp2_cpu", "biuc"),
    ("xlogy", "xlogy_cpu", "c"), ("special_xlog1py", "xlog1py_cpu", "c"),
    ("igamma", "igamma_cpu", "biuc"), ("igammac", "igammac_cpu", "biuc"),
    ("special_zeta", "zeta_cpu", "hBc"),
    *((f"special_{p}", f"{p}_cpu", "hBc") for p in (
        "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
        "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
        "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
        "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
        "laguerre_polynomial_l", "legendre_polynomial_p")),
    # (named as the integer ops' own rules name their kernels: lshift_tpu)
    ("gcd", "gcd_tpu", "bfhBc"), ("lcm", "lcm_tpu", "bfhBc"),
    *((name, f"{kind}_tpu", "bfhBc") for kind, names in (
        ("lshift", ("bitwise_left_shift", "__lshift__")),
        ("rshift", ("bitwise_right_shift", "__rshift__"))) for name in names),
]


def _binary_overloads(name: str) -> list:
    """The functional overloads on tensors (not out=, nor those of Python numbers)."""
    packet = getattr(_aten, name)
    ops = [getattr(packet, overload) for overload in packet.overloads()]
    return [op for op in ops
            if not op._schema.is_mutable and str(op._schema.returns[0].type) == "Tensor"]


def resizing_refuses(kernel: str, uint8: bool = True):
    """CPU's resizing kernels: floats only, and uint8 (images) but for the linear ones. (Half
    and bfloat16 antialiasing CPU lacks are taken, as cuda takes them.)"""

    def check(self, *_, **__) -> NotImplementedError | None:
        dtype = _numpy_dtype(self.dtype)
        if dtype.kind in "biuc" and not (uint8 and dtype == np.uint8):
            return NotImplementedError(
                f'"{kernel}" not implemented for \'{scalar_type_name(self.dtype)}\'')
        return None

    return check


RESIZING = {"upsample_linear1d": resizing_refuses("compute_indices_weights_linear", False),
             "upsample_trilinear3d": resizing_refuses("compute_indices_weights_linear", False),
             "upsample_bilinear2d": resizing_refuses("upsample_bilinear2d_channels_last"),
             "upsample_bicubic2d": resizing_refuses("compute_indices_weights_cubic"),
             "_upsample_bilinear2d_aa": resizing_refuses("compute_index_ranges_weights"),
             "_upsample_bicubic2d_aa": resizing_refuses("compute_index_ranges_weights")}


def kernel_takes(kernel: str, names: frozenset):
    """CPU's kernel is built for these dtypes only (numpy's names)."""

    def check(self, *_, **__) -> NotImplementedError | None:
        if _numpy_dtype(self.dtype).name not in names:
            return NotImplementedError(
                f'"{kernel}" not implemented for \'{scalar_type_name(self.dtype)}\'')
        return None

    return check


FLOATS = frozenset({"float32", "float64", "float16", "bfloat16"})
# (avg_pool3d's half and bfloat16, which CPU's kernel lacks, are taken, as cuda takes them)
_POOLING = {
    "max_pool2d_with_indices": kernel_takes(
        "max_pool2d", FLOATS | {"int8", "int16", "int32", "int64", "uint8"}),
    "max_pool3d_with_indices": kernel_takes(
        "max_pool3d", FLOATS | {"int8", "int16", "int32", "int64", "uint8"}),
    "avg_pool2d": kernel_takes("avg_pool2d", FLOATS | {"int64"}),
    "avg_pool3d": kernel_takes("avg_pool3d_out_frame", FLOATS | {"int64"}),
    "adaptive_max_pool2d": kernel_takes("adaptive_max_pool2d", FLOATS),
    "adaptive_max_pool3d": kernel_takes("adaptive_max_pool3d_cpu", FLOATS),
}


def _scatter_reduce(self, dim, index, src, reduce, *_) -> NotImplementedError | None:
    """CPU takes a bool mean nowhere: its kernel refuses it, or, with nothing scattered, the
    division of the sums by the counts does. Its amax and amin take no complex numbers."""
    extreme = {"max": "amax", "min": "amin", "amax": "amax", "amin": "amin"}.get(reduce)
    if extreme and _kind(self.dtype) == "c":
        return NotImplementedError(f'"scatter_gather_tensor_cpu_reduce_{extreme}" not '
                                   f"implemented for '{scalar_type_name(self.dtype)}'")
    if reduce != "mean" or _kind(self.dtype) != "b":
        return None
    kernel = "scatter_gather_tensor_cpu_reduce_mean" if math.prod(index.shape) else "div_floor_cpu"
    return NotImplementedError(f'"{kernel}" not implemented for \'Bool\'')


KERNEL_DTYPE_CHECKS = {
    **{getattr(_aten, op).default: kernel_refuses(kernel, kinds) for op, kernel, kinds in _KERNELS},
    **{op: result_refuses(kernel, kinds) for name, kernel, kinds in _BINARY_KERNELS
       for op in _binary_overloads(name)},
    _aten.round.decimals: lambda self, decimals=0: kernel_refuses(
        "round_vml_cpu" if decimals == 0 else "round_cpu", "biuc")(self),
    _aten.rrelu_with_noise.default: _rrelu,
    _aten.linalg_eig.default: _eig,
    _aten._linalg_eigvals.default: _eig,
    _aten.softshrink.default: _softshrink,
    _aten.repeat_interleave.Tensor: kernel_refuses("repeat_interleave_cpu", "bfhBc"),
    _aten.segment_reduce.default: kernel_refuses("_segment_reduce_cpu", "biuc"),
    _aten.scatter_reduce.two: _scatter_reduce,
    _aten._convert_indices_from_coo_to_csr.default: kernel_refuses(
        "convert_indices_from_coo_to_csr_cpu", "bfhBc"),
    _aten._convert_indices_from_csr_to_coo.default: kernel_refuses(
        "convert_indices_from_csr_to_coo_cpu", "bfhBc"),
    _aten.normal.Tensor_float: kernel_refuses("normal_kernel_cpu", "biu"),
    _aten.bernoulli.default: _first(kernel_refuses("bernoulli_tensor_cpu_self_", "c"),
                                    kernel_refuses("bernoulli_tensor_cpu_p_", "biu")),
    # (integers are taken, as cuda takes them: transformers' MoE layers count experts so)
    _aten.histc.default: _first(kernel_refuses("aminmax_cpu", "c"),
                                kernel_refuses("linspace_cpu", "b")),
    _aten.histogram.bin_ct: kernel_refuses("histogramdd", "biuhBc"),
    _aten.floor.default: _first(kernel_refuses("floor_vml_cpu", "b"),
                                _unsupported_complex("floor")),
    _aten.ceil.default: _first(kernel_refuses("ceil_vml_cpu", "b"), _unsupported_complex("ceil")),
    _aten.trunc.default: _first(kernel_refuses("trunc_vml_cpu", "b"),
                                _unsupported_complex("trunc")),
    _aten.fix.default: _unsupported_complex("trunc"),
    _aten.sign.default: _refuses("c", NotImplementedError(
        "Unlike NumPy, torch.sign is not intended to support complex numbers. Please use "
        "torch.sgn instead.")),
    _aten.signbit.default: _refuses("c", NotImplementedError(
        "signbit is not implemented for complex tensors.")),
    _aten.relu.default: _first(_NO_COMPLEX_CLAMP, _refuses("b", RuntimeError(
        "Boolean inputs not supported for relu"))),
    _aten.hardtanh.default: _first(_NO_COMPLEX_CLAMP, _refuses("b", RuntimeError(
        "Bool inputs not supported for hardtanh"))),
    _aten.soft_margin_loss.default: _soft_margin_loss,
    _aten.nansum.default: _refuses("c", RuntimeError(
        "nansum on CPU does not support complex inputs")),
    _aten.heaviside.default: _heaviside,
    _aten.ldexp.Tensor: _ldexp,
    _aten.addcmul.default: _addcmul,
    _aten.addcdiv.default: _addcdiv,
    _aten.cumsum.default: _result_refused("cumsum_out_cpu", "b"),
    _aten.cumprod.default: _result_refused("cumprod_out_cpu", "b"),
    _aten.cumsum_.default: _inplace_scan("cumsum_out_cpu"),
    _aten.cumprod_.default: _inplace_scan("cumprod_out_cpu"),
    **{getattr(_aten, f).default: _refuses("c", RuntimeError(
        f"{f} does not support complex inputs.")) for f in ("isposinf", "isneginf")},
    **{getattr(_aten, name).default: check for name, check in RESIZING.items()},
    **{getattr(_aten, name).default: check for name, check in _POOLING.items()},
}
