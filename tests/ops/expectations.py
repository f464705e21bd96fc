"""Known OpInfo failures on tpu, each with a one-line reason.

Keyed by (op, variant, dtype, test): test is "forward", "grad" or "errors"; dtype is
"float32", "bfloat16", "int64", "bool" (or "any" for errors). An entry whose test passes
fails the suite, so this table always tells the truth: remove an entry when its op is fixed.
Reasons starting "executor:" need a fix outside the lowering rules (torchtpu/eager,
tensor.py); reasons starting "crash" abort the process, so their check runs in a child.
"""

from __future__ import annotations


def key_of(op: str, variant: str, dtype: str, test: str) -> tuple[str, str, str, str]:
    return (op, variant, dtype, test)

# --- table ---
_BY_REASON: dict[str, list[tuple[str, str, str, str]]] = {
    "ties: CPU's unstable sort (the default) leaves equal elements in libstdc++ introsort's "
    "order; tpu sorts stably": [
        ('argsort', '', 'bfloat16', 'forward'),
        ('argsort', '', 'bool', 'forward'),
        ('sort', '', 'bfloat16', 'forward'),
        ('sort', '', 'bool', 'forward'),
    ],
    "ties: CPU picks among equal values by its quickselect (kthvalue) or libstdc++ "
    "nth_element/partial_sort (topk); tpu takes the first": [
        ('kthvalue', '', 'int64', 'forward'),
        ('topk', '', 'bfloat16', 'forward'),
        ('topk', '', 'int64', 'forward'),
    ],
    "bfloat16 rounding: CPU's transposed conv (im2col/col2im) rounds every kernel tap's "
    "contribution to bfloat16; tpu accumulates in float32 and rounds once": [
        ('nn.functional.conv_transpose1d', '', 'bfloat16', 'forward'),
        ('nn.functional.conv_transpose2d', '', 'bfloat16', 'forward'),
        ('nn.functional.conv_transpose3d', '', 'bfloat16', 'forward'),
    ],
    "bfloat16 rounding: CPU's batch norm over a batch of one (instance_norm's reshape) "
    "rounds its statistics differently; one element per sample is past tolerance": [
        ('nn.functional.instance_norm', '', 'bfloat16', 'forward'),
    ],
    "executor: x.conj() (aten._conj, a conj-bit view) is an alias with the base's values, "
    "so the conjugation is lost (fft of real input and hfft conjugate this way)": [
        ('fft.hfft2', '', 'bool', 'forward'),
        ('fft.hfft2', '', 'float32', 'forward'),
        ('fft.hfft2', '', 'float32', 'grad'),
        ('fft.hfft2', '', 'int64', 'forward'),
        ('fft.hfftn', '', 'bool', 'forward'),
        ('fft.hfftn', '', 'float32', 'forward'),
        ('fft.hfftn', '', 'float32', 'grad'),
        ('fft.hfftn', '', 'int64', 'forward'),
        ('fft.ifft', '', 'bool', 'forward'),
        ('fft.ifft', '', 'float32', 'forward'),
        ('fft.ifft', '', 'int64', 'forward'),
        ('fft.ihfft', '', 'bool', 'forward'),
        ('fft.ihfft', '', 'float32', 'forward'),
        ('fft.ihfft', '', 'int64', 'forward'),
        ('fft.ihfft2', '', 'bool', 'forward'),
        ('fft.ihfft2', '', 'float32', 'forward'),
        ('fft.ihfft2', '', 'int64', 'forward'),
        ('fft.ihfftn', '', 'bool', 'forward'),
        ('fft.ihfftn', '', 'float32', 'forward'),
        ('fft.ihfftn', '', 'int64', 'forward'),
        ('linalg.eig', '', 'float32', 'grad'),
    ],
    "executor: out= is written without CPU's checks (out dtype, internal overlap, overlap "
    "with an input)": [
        ('aminmax', '', 'any', 'errors'),
        ('bernoulli', '', 'any', 'errors'),
        ('cat', '', 'any', 'errors'),
        ('complex', '', 'any', 'errors'),
        ('gather', '', 'any', 'errors'),
        ('masked_select', '', 'any', 'errors'),
        ('take', '', 'any', 'errors'),
    ],
    "multinomial: CPU checks the probabilities' values (negative, inf, NaN, zero sum), a "
    "host sync per draw strict mode does not pay (CUDA uses device asserts)": [
        ('multinomial', '', 'any', 'errors'),
    ],
    "float32 rounding: CPU's and tpu's gradients are each ~1e-3 from the float64 one "
    "(ill-conditioned), further apart than the 1e-4 gradient tolerance": [
        ('logcumsumexp', '', 'float32', 'grad'),
        ('matrix_exp', '', 'float32', 'grad'),
    ],
    "random: the sample uses dropout (p=0.5, training=True); CPU's and tpu's generators "
    "draw different masks (PyTorch skips test_compare_cpu for it too)": [
        ('nn.functional.multi_head_attention_forward', '', 'float32', 'grad'),
    ],
    "random: the low-rank sketch is drawn from the generator; with M given the input is "
    "full rank and the approximation depends on it (PyTorch skips test_compare_cpu)": [
        ('svd_lowrank', '', 'float32', 'forward'),
    ],
    "bfloat16 rounding: CPU's bfloat16 grid sampler rounds its intermediates (CPU's own "
    "float32 result is as far from it); tpu computes in float32": [
        ('grid_sampler_2d', '', 'bfloat16', 'forward'),
    ],
    'no rule or decomposition for aten.grid_sampler_3d.default (5-D samples)': [
        ('nn.functional.grid_sample', '', 'bfloat16', 'forward'),
        ('nn.functional.grid_sample', '', 'float32', 'forward'),
    ],
    "bfloat16 rounding: CPU's bicubic/trilinear upsampling rounds between its passes (CPU's "
    "own float32 result is as far from it); tpu rounds once": [
        ('nn.functional.interpolate', 'bicubic', 'bfloat16', 'forward'),
        ('nn.functional.interpolate', 'trilinear', 'bfloat16', 'forward'),
    ],
    "bfloat16: CPU's matrix_exp overflows to NaN on these samples (its float32 result is "
    "finite); tpu computes in float32": [
        ('matrix_exp', '', 'bfloat16', 'forward'),
    ],
    "executor: linspace.out/logspace.out (how PyTorch makes them on tpu) compute the "
    "functional op in the default float dtype, then refuse to cast it into the int64 out": [
        ('linspace', '', 'int64', 'forward'),
        ('logspace', '', 'int64', 'forward'),
    ],
    "float32 rounding: CPU's own result is as far from the float64 one as tpu's; "
    "cancellation leaves small elements past the 1e-5 tolerance": [
        ('matrix_exp', '', 'float32', 'forward'),
        ('nn.functional.conv2d', '', 'float32', 'forward'),
        ('nn.functional.conv3d', '', 'float32', 'forward'),
        ('nn.functional.conv_transpose3d', '', 'float32', 'forward'),
    ],
    "bfloat16 rounding: CPU's 3-D adaptive average pool rounds between its passes (CPU's "
    "own float32 result is as far from it)": [
        ('nn.functional.adaptive_avg_pool3d', '', 'bfloat16', 'forward'),
    ],
    'no rule or decomposition for aten.searchsorted.Scalar': [
        ('searchsorted', '', 'bfloat16', 'forward'),
        ('searchsorted', '', 'float32', 'forward'),
        ('searchsorted', '', 'int64', 'forward'),
    ],
    'no rule or decomposition for aten.embedding_renorm_.default (max_norm samples)': [
        ('nn.functional.embedding', '', 'bfloat16', 'forward'),
        ('nn.functional.embedding', '', 'float32', 'forward'),
    ],
    'no rule or decomposition for aten.index_reduce.default': [
        ('index_reduce', 'amax', 'bfloat16', 'forward'),
        ('index_reduce', 'amax', 'float32', 'forward'),
        ('index_reduce', 'amax', 'float32', 'grad'),
        ('index_reduce', 'amax', 'int64', 'forward'),
        ('index_reduce', 'amin', 'bfloat16', 'forward'),
        ('index_reduce', 'amin', 'float32', 'forward'),
        ('index_reduce', 'amin', 'float32', 'grad'),
        ('index_reduce', 'amin', 'int64', 'forward'),
        ('index_reduce', 'mean', 'bfloat16', 'forward'),
        ('index_reduce', 'mean', 'float32', 'forward'),
        ('index_reduce', 'mean', 'float32', 'grad'),
        ('index_reduce', 'mean', 'int64', 'forward'),
        ('index_reduce', 'prod', 'bfloat16', 'forward'),
        ('index_reduce', 'prod', 'float32', 'forward'),
        ('index_reduce', 'prod', 'float32', 'grad'),
        ('index_reduce', 'prod', 'int64', 'forward'),
    ],
    'executor: in-place shape ops (squeeze_, transpose_) are derived as value writes': [
        ('nanquantile', '', 'float32', 'forward'),
        ('nanquantile', '', 'float32', 'grad'),
        ('nn.functional.linear_cross_entropy', '', 'bfloat16', 'forward'),
        ('nn.functional.linear_cross_entropy', '', 'float32', 'forward'),
        ('nn.functional.linear_cross_entropy', '', 'float32', 'grad'),
        ('quantile', '', 'float32', 'forward'),
        ('quantile', '', 'float32', 'grad'),
    ],
    'no rule or decomposition for aten.segment_reduce.default': [
        ('_segment_reduce', 'lengths', 'bfloat16', 'forward'),
        ('_segment_reduce', 'lengths', 'float32', 'forward'),
        ('_segment_reduce', 'lengths', 'float32', 'grad'),
        ('_segment_reduce', 'offsets', 'bfloat16', 'forward'),
        ('_segment_reduce', 'offsets', 'float32', 'forward'),
        ('_segment_reduce', 'offsets', 'float32', 'grad'),
    ],
    'no rule or decomposition for aten._to_sparse.default': [
        ('to_sparse', '', 'bfloat16', 'forward'),
        ('to_sparse', '', 'bool', 'forward'),
        ('to_sparse', '', 'float32', 'forward'),
        ('to_sparse', '', 'float32', 'grad'),
        ('to_sparse', '', 'int64', 'forward'),
    ],
    'no rule or decomposition for aten.put.default': [
        ('put', '', 'bfloat16', 'forward'),
        ('put', '', 'bool', 'forward'),
        ('put', '', 'float32', 'forward'),
        ('put', '', 'float32', 'grad'),
        ('put', '', 'int64', 'forward'),
    ],
    'complex32 (chalf) has no XLA dtype': [
        ('chalf', '', 'bfloat16', 'forward'),
        ('chalf', '', 'bool', 'forward'),
        ('chalf', '', 'float32', 'forward'),
        ('chalf', '', 'int64', 'forward'),
    ],
    'crash: executor: an op error inside a C++ backward formula aborts the process': [
        ('grid_sampler_2d', '', 'float32', 'grad'),
        ('take', '', 'float32', 'grad'),
        ('nn.functional.grid_sample', '', 'float32', 'grad'),
        ('nn.functional.avg_pool2d', '', 'float32', 'grad'),
        ('nn.functional.local_response_norm', '', 'float32', 'grad'),
        ('nn.functional.avg_pool3d', '', 'float32', 'grad'),
        ('nn.functional.upsample_bilinear', '', 'float32', 'grad'),
        ('lu_solve', '', 'float32', 'grad'),
        ('cdist', '', 'float32', 'grad'),
        ('nn.functional.interpolate', 'bicubic', 'float32', 'grad'),
        ('nn.functional.interpolate', 'bilinear', 'float32', 'grad'),
        ('nn.functional.interpolate', 'linear', 'float32', 'grad'),
        ('nn.functional.interpolate', 'nearest-exact', 'float32', 'grad'),
        ('nn.functional.interpolate', 'trilinear', 'float32', 'grad'),
        ('native_group_norm', '', 'float32', 'grad'),
        ('nn.functional.avg_pool1d', '', 'float32', 'grad'),
        ('nn.functional.multi_margin_loss', '', 'float32', 'grad'),
        ('nn.functional.multilabel_margin_loss', '', 'float32', 'grad'),
    ],
    'executor: resize_ to a new shape is not supported': [
        ('resize_', '', 'bfloat16', 'forward'),
        ('resize_', '', 'bool', 'forward'),
        ('resize_', '', 'float32', 'forward'),
        ('resize_', '', 'int64', 'forward'),
    ],
    'no rule or decomposition for aten._trilinear.default': [
        ('nn.functional.bilinear', '', 'bfloat16', 'forward'),
        ('nn.functional.bilinear', '', 'float32', 'forward'),
        ('nn.functional.bilinear', '', 'float32', 'grad'),
        ('nn.functional.bilinear', '', 'int64', 'forward'),
    ],
    'no rule or decomposition for aten.hash_tensor.default': [
        ('hash_tensor', '', 'bfloat16', 'forward'),
        ('hash_tensor', '', 'bool', 'forward'),
        ('hash_tensor', '', 'float32', 'forward'),
        ('hash_tensor', '', 'int64', 'forward'),
    ],
    'no rule or decomposition for aten.linalg_lstsq.default': [
        ('linalg.lstsq', '', 'float32', 'forward'),
        ('linalg.lstsq', '', 'float32', 'grad'),
        ('linalg.lstsq', 'grad_oriented', 'float32', 'forward'),
        ('linalg.lstsq', 'grad_oriented', 'float32', 'grad'),
    ],
    'no rule or decomposition for aten.nonzero_static.default': [
        ('nonzero_static', '', 'bfloat16', 'forward'),
        ('nonzero_static', '', 'bool', 'forward'),
        ('nonzero_static', '', 'float32', 'forward'),
        ('nonzero_static', '', 'int64', 'forward'),
    ],
    'no rule or decomposition for aten.resize.default': [
        ('resize_as_', '', 'bfloat16', 'forward'),
        ('resize_as_', '', 'bool', 'forward'),
        ('resize_as_', '', 'float32', 'forward'),
        ('resize_as_', '', 'int64', 'forward'),
    ],
    'no rule or decomposition for aten.unique_consecutive.default': [
        ('unique_consecutive', '', 'bfloat16', 'forward'),
        ('unique_consecutive', '', 'bool', 'forward'),
        ('unique_consecutive', '', 'float32', 'forward'),
        ('unique_consecutive', '', 'int64', 'forward'),
    ],
    'no rule or decomposition for aten._sparse_mm_reduce_impl.default': [
        ('sparse.mm', 'reduce', 'bfloat16', 'forward'),
        ('sparse.mm', 'reduce', 'float32', 'forward'),
        ('sparse.mm', 'reduce', 'float32', 'grad'),
    ],
    'no rule or decomposition for aten.fractional_max_pool2d.default': [
        ('nn.functional.fractional_max_pool2d', '', 'bfloat16', 'forward'),
        ('nn.functional.fractional_max_pool2d', '', 'float32', 'forward'),
        ('nn.functional.fractional_max_pool2d', '', 'float32', 'grad'),
    ],
    'no rule or decomposition for aten.fractional_max_pool3d.default': [
        ('nn.functional.fractional_max_pool3d', '', 'bfloat16', 'forward'),
        ('nn.functional.fractional_max_pool3d', '', 'float32', 'forward'),
        ('nn.functional.fractional_max_pool3d', '', 'float32', 'grad'),
    ],
    'no rule or decomposition for aten.grid_sampler_3d.default': [
        ('grid_sampler_3d', '', 'bfloat16', 'forward'),
        ('grid_sampler_3d', '', 'float32', 'forward'),
        ('grid_sampler_3d', '', 'float32', 'grad'),
    ],
    'no rule or decomposition for aten.rrelu_with_noise.default': [
        ('nn.functional.rrelu', '', 'bfloat16', 'forward'),
        ('nn.functional.rrelu', '', 'float32', 'forward'),
        ('nn.functional.rrelu', '', 'float32', 'grad'),
    ],
    'no rule or decomposition for aten.special_airy_ai.default': [
        ('special.airy_ai', '', 'bool', 'forward'),
        ('special.airy_ai', '', 'float32', 'forward'),
        ('special.airy_ai', '', 'int64', 'forward'),
    ],
    'no rule or decomposition for aten.special_bessel_y0.default': [
        ('special.bessel_y0', '', 'bool', 'forward'),
        ('special.bessel_y0', '', 'float32', 'forward'),
        ('special.bessel_y0', '', 'int64', 'forward'),
    ],
    'no rule or decomposition for aten.special_bessel_y1.default': [
        ('special.bessel_y1', '', 'bool', 'forward'),
        ('special.bessel_y1', '', 'float32', 'forward'),
        ('special.bessel_y1', '', 'int64', 'forward'),
    ],
    'no rule or decomposition for aten.special_chebyshev_polynomial_t.default': [
        ('special.chebyshev_polynomial_t', '', 'bool', 'forward'),
        ('special.chebyshev_polynomial_t', '', 'float32', 'forward'),
        ('special.chebyshev_polynomial_t', '', 'int64', 'forward'),
    ],
    'no rule or decomposition for aten.special_chebyshev_polynomial_u.default': [
        ('special.chebyshev_polynomial_u', '', 'bool', 'forward'),
        ('special.chebyshev_polynomial_u', '', 'float32', 'forward'),
        ('special.chebyshev_polynomial_u', '', 'int64', 'forward'),
    ],
    'no rule or decomposition for aten.special_chebyshev_polynomial_v.default': [
        ('special.chebyshev_polynomial_v', '', 'bool', 'forward'),
        ('special.chebyshev_polynomial_v', '', 'float32', 'forward'),
        ('special.chebyshev_polynomial_v', '', 'int64', 'forward'),
    ],
    'no rule or decomposition for aten.special_chebyshev_polynomial_w.default': [
        ('special.chebyshev_polynomial_w', '', 'bool', 'forward'),
        ('special.chebyshev_polynomial_w', '', 'float32', 'forward'),
        ('special.chebyshev_polynomial_w', '', 'int64', 'forward'),
    ],
    'no rule or decomposition for aten.special_hermite_polynomial_h.default': [
        ('special.hermite_polynomial_h', '', 'bool', 'forward'),
        ('special.hermite_polynomial_h', '', 'float32', 'forward'),
        ('special.hermite_polynomial_h', '', 'int64', 'forward'),
    ],
    'no rule or decomposition for aten.special_hermite_polynomial_he.default': [
        ('special.hermite_polynomial_he', '', 'bool', 'forward'),
        ('special.hermite_polynomial_he', '', 'float32', 'forward'),
        ('special.hermite_polynomial_he', '', 'int64', 'forward'),
    ],
    'no rule or decomposition for aten.special_laguerre_polynomial_l.default': [
        ('special.laguerre_polynomial_l', '', 'bool', 'forward'),
        ('special.laguerre_polynomial_l', '', 'float32', 'forward'),
        ('special.laguerre_polynomial_l', '', 'int64', 'forward'),
    ],
    'no rule or decomposition for aten.special_legendre_polynomial_p.default': [
        ('special.legendre_polynomial_p', '', 'bool', 'forward'),
        ('special.legendre_polynomial_p', '', 'float32', 'forward'),
        ('special.legendre_polynomial_p', '', 'int64', 'forward'),
    ],
    'no rule or decomposition for aten.special_modified_bessel_k0.default': [
        ('special.modified_bessel_k0', '', 'bool', 'forward'),
        ('special.modified_bessel_k0', '', 'float32', 'forward'),
        ('special.modified_bessel_k0', '', 'int64', 'forward'),
    ],
    'no rule or decomposition for aten.special_modified_bessel_k1.default': [
        ('special.modified_bessel_k1', '', 'bool', 'forward'),
        ('special.modified_bessel_k1', '', 'float32', 'forward'),
        ('special.modified_bessel_k1', '', 'int64', 'forward'),
    ],
    'no rule or decomposition for aten.special_scaled_modified_bessel_k0.default': [
        ('special.scaled_modified_bessel_k0', '', 'bool', 'forward'),
        ('special.scaled_modified_bessel_k0', '', 'float32', 'forward'),
        ('special.scaled_modified_bessel_k0', '', 'int64', 'forward'),
    ],
    'no rule or decomposition for aten.special_scaled_modified_bessel_k1.default': [
        ('special.scaled_modified_bessel_k1', '', 'bool', 'forward'),
        ('special.scaled_modified_bessel_k1', '', 'float32', 'forward'),
        ('special.scaled_modified_bessel_k1', '', 'int64', 'forward'),
    ],
    'no rule or decomposition for aten.special_shifted_chebyshev_polynomial_t.default': [
        ('special.shifted_chebyshev_polynomial_t', '', 'bool', 'forward'),
        ('special.shifted_chebyshev_polynomial_t', '', 'float32', 'forward'),
        ('special.shifted_chebyshev_polynomial_t', '', 'int64', 'forward'),
    ],
    'no rule or decomposition for aten.special_shifted_chebyshev_polynomial_u.default': [
        ('special.shifted_chebyshev_polynomial_u', '', 'bool', 'forward'),
        ('special.shifted_chebyshev_polynomial_u', '', 'float32', 'forward'),
        ('special.shifted_chebyshev_polynomial_u', '', 'int64', 'forward'),
    ],
    'no rule or decomposition for aten.special_shifted_chebyshev_polynomial_v.default': [
        ('special.shifted_chebyshev_polynomial_v', '', 'bool', 'forward'),
        ('special.shifted_chebyshev_polynomial_v', '', 'float32', 'forward'),
        ('special.shifted_chebyshev_polynomial_v', '', 'int64', 'forward'),
    ],
    'no rule or decomposition for aten.special_shifted_chebyshev_polynomial_w.default': [
        ('special.shifted_chebyshev_polynomial_w', '', 'bool', 'forward'),
        ('special.shifted_chebyshev_polynomial_w', '', 'float32', 'forward'),
        ('special.shifted_chebyshev_polynomial_w', '', 'int64', 'forward'),
    ],
    'no rule or decomposition for torch_nn._linear_cross_entropy_batch_chunked.default': [
        ('nn.functional.linear_cross_entropy', 'chunked', 'bfloat16', 'forward'),
        ('nn.functional.linear_cross_entropy', 'chunked', 'float32', 'forward'),
        ('nn.functional.linear_cross_entropy', 'chunked', 'float32', 'grad'),
    ],
    'no rule or decomposition for torch_nn._linear_cross_entropy_batch_chunked_no_reduction.default': [  # noqa: E501
        ('nn.functional.linear_cross_entropy', 'chunked_none', 'bfloat16', 'forward'),
        ('nn.functional.linear_cross_entropy', 'chunked_none', 'float32', 'forward'),
        ('nn.functional.linear_cross_entropy', 'chunked_none', 'float32', 'grad'),
    ],
    'fails: SystemError: <built-in method run_backward of torch._C._EngineBase object at 0x7f02f69a7010> returned N': [  # noqa: E501
    ],
    'no rule or decomposition for aten._ctc_loss.default': [
        ('nn.functional.ctc_loss', '', 'float32', 'forward'),
        ('nn.functional.ctc_loss', '', 'float32', 'grad'),
    ],
    'no rule or decomposition for aten._embedding_bag_forward_only.default': [
        ('nn.functional.embedding_bag', '', 'bfloat16', 'forward'),
        ('nn.functional.embedding_bag', '', 'float32', 'forward'),
    ],
    'no rule or decomposition for aten._pdist_forward.default': [
        ('nn.functional.pdist', '', 'float32', 'forward'),
        ('nn.functional.pdist', '', 'float32', 'grad'),
    ],
    'no rule or decomposition for aten._upsample_bilinear2d_aa.default': [
        ('_upsample_bilinear2d_aa', '', 'float32', 'forward'),
        ('_upsample_bilinear2d_aa', '', 'float32', 'grad'),
    ],
    'no rule or decomposition for aten.histc.default': [
        ('histc', '', 'bfloat16', 'forward'),
        ('histc', '', 'float32', 'forward'),
    ],
    'no rule or decomposition for aten.linalg_householder_product.default': [
        ('linalg.householder_product', '', 'float32', 'forward'),
        ('linalg.householder_product', '', 'float32', 'grad'),
    ],
    'no rule or decomposition for aten.linalg_ldl_factor_ex.default': [
        ('linalg.ldl_factor', '', 'float32', 'forward'),
        ('linalg.ldl_factor_ex', '', 'float32', 'forward'),
    ],
    'no rule or decomposition for aten.ormqr.default': [
        ('ormqr', '', 'float32', 'forward'),
        ('ormqr', '', 'float32', 'grad'),
    ],
    'no rule or decomposition for aten.sparse_sampled_addmm.default': [
        ('sparse.sampled_addmm', '', 'float32', 'forward'),
        ('sparse.sampled_addmm', '', 'float32', 'grad'),
    ],
    'no rule or decomposition for aten.transpose_.default': [
        ('stft', '', 'float32', 'forward'),
        ('stft', '', 'float32', 'grad'),
    ],
    'no rule or decomposition for prims.gcd.default': [
        ('gcd', '', 'int64', 'forward'),
        ('lcm', '', 'int64', 'forward'),
    ],
    'fails: NotImplementedError: "sum_cpu" not implemented for \'ComplexHalf\'': [
        ('chalf', '', 'float32', 'grad'),
    ],
    "fails: NotImplementedError: Could not run 'aten::_efficientzerotensor' with arguments from the 'tpu' backend. ": [  # noqa: E501
        ('sgn', '', 'float32', 'grad'),
    ],
    "fails: NotImplementedError: Could not run 'aten::tril_indices' with arguments from the 'tpu' backend. This cou": [  # noqa: E501
    ],
    "fails: NotImplementedError: Could not run 'aten::triu_indices' with arguments from the 'tpu' backend. This cou": [  # noqa: E501
    ],
    'fails: SystemError: <built-in method run_backward of torch._C._EngineBase object at 0x7f4be94c7010> returned N': [  # noqa: E501
    ],
    'fails: SystemError: <built-in method run_backward of torch._C._EngineBase object at 0x7f7244ac7010> returned N': [  # noqa: E501
    ],
    'fails: SystemError: <built-in method run_backward of torch._C._EngineBase object at 0x7fac978c7010> returned N': [  # noqa: E501
    ],
    'no rule or decomposition for aten._embedding_bag.default': [
        ('nn.functional.embedding_bag', '', 'float32', 'grad'),
    ],
    'no rule or decomposition for aten._histogramdd_bin_edges.default': [
        ('histogramdd', '', 'float32', 'forward'),
    ],
    'no rule or decomposition for aten.geqrf.default': [
        ('geqrf', '', 'float32', 'forward'),
    ],
    'no rule or decomposition for aten.histogram.bin_ct': [
        ('histogram', '', 'float32', 'forward'),
    ],
    'no rule or decomposition for aten.linalg_ldl_solve.default': [
        ('linalg.ldl_solve', '', 'float32', 'forward'),
    ],
    'no rule or decomposition for prims.convert_element_type.default': [
        ('renorm', '', 'bfloat16', 'forward'),
    ],
    'result dtype differs from CPU: output[0]: dtype torch.float64 on tpu, torch.bfloat16 on CPU': [
        ('logspace', 'tensor_overload', 'bfloat16', 'forward'),
    ],
    'result dtype differs from CPU: output[0]: dtype torch.float64 on tpu, torch.float32 on CPU': [
        ('logspace', 'tensor_overload', 'float32', 'forward'),
    ],
    'result dtype differs from CPU: output[0]: dtype torch.float64 on tpu, torch.int64 on CPU': [
        ('logspace', 'tensor_overload', 'int64', 'forward'),
    ],
}

EXPECTED: dict[tuple[str, str, str, str], str] = {
    key: reason for reason, keys in _BY_REASON.items() for key in keys
}
