"""Known OpInfo failures on tpu, each with a one-line reason.

Keyed by (op, variant, dtype, test): test is "forward", "grad", "errors", "jvp"
(test_forward_ad.py: forward-mode AD tangents) or "gradgrad" (test_gradgrad.py); dtype is
"float32", "bfloat16", "int64", "bool", "complex64", "float64" (or "any" for errors). An entry
whose test passes fails the suite, so this table always tells the truth: remove an entry when
its op is fixed.
Reasons starting "executor:" need a fix outside the lowering rules (torchtpu/eager,
tensor.py). Reasons starting "hardware:" are differences in PyTorch's own CPU result between
host CPUs (its kernels pick another algorithm per instruction set): such an entry may pass.
"""

from __future__ import annotations


def key_of(op: str, variant: str, dtype: str, test: str) -> tuple[str, str, str, str]:
    return (op, variant, dtype, test)

# --- table ---

_BY_REASON: dict[str, list[tuple[str, str, str, str]]] = {
    "harness: a grad test's inputs must be leaves, so a partial view's storage is not rebuilt on tpu and as_strided with a storage_offset reads other elements than on CPU": [  # noqa: E501
        ('as_strided', 'partial_views', 'float32', 'grad'),
    ],
    "random: channel-wise masks drop whole channels, so the elements of a sample are not independent draws and the KS test on elements sees the two draws' different kept-channel counts (the masks are checked channel-uniform with rate p in test_random.py)": [  # noqa: E501
        ('nn.functional.dropout3d', '', 'bfloat16', 'forward'),
        ('nn.functional.dropout3d', '', 'float32', 'forward'),
        ('nn.functional.dropout3d', '', 'float64', 'forward'),
        ('nn.functional.feature_alpha_dropout', 'with_train', 'bfloat16', 'forward'),
        ('nn.functional.feature_alpha_dropout', 'with_train', 'float32', 'forward'),
        ('nn.functional.feature_alpha_dropout', 'with_train', 'float64', 'forward'),
    ],
    'ties: CPU returns the index its sort leaves last among equal values (not the last position on large inputs); tpu returns the last position': [  # noqa: E501
        ('mode', '', 'bfloat16', 'forward'),
        ('mode', '', 'bool', 'forward'),
        ('mode', '', 'int64', 'forward'),
    ],
    'complex32 (chalf) has no XLA dtype': [
        ('chalf', '', 'bfloat16', 'forward'),
        ('chalf', '', 'complex64', 'forward'),
        ('chalf', '', 'float64', 'forward'),
        ('chalf', '', 'bool', 'forward'),
        ('chalf', '', 'float32', 'forward'),
        ('chalf', '', 'int64', 'forward'),
        ('chalf', '', 'float64', 'jvp'),
        ('chalf', '', 'float64', 'gradgrad'),
    ],
    "float32 rounding: CPU's own result is as far from the float64 one as tpu's; cancellation leaves small elements past the 1e-5 tolerance": [  # noqa: E501
        ('matrix_exp', '', 'float32', 'forward'),
        ('nn.functional.conv2d', '', 'float32', 'forward'),
        ('nn.functional.conv3d', '', 'float32', 'forward'),
        ('nn.functional.conv_transpose3d', '', 'float32', 'forward'),
    ],
    "ties: CPU's unstable sort (the default) leaves equal elements in libstdc++ introsort's order; tpu sorts stably": [  # noqa: E501
        ('argsort', '', 'bfloat16', 'forward'),
        ('argsort', '', 'bool', 'forward'),
        ('sort', '', 'bfloat16', 'forward'),
        ('sort', '', 'bool', 'forward'),
    ],
    "bfloat16 rounding: CPU's transposed conv (im2col/col2im) rounds every kernel tap's contribution to bfloat16; tpu accumulates in float32 and rounds once": [  # noqa: E501
        ('nn.functional.conv_transpose2d', '', 'bfloat16', 'forward'),
        ('nn.functional.conv_transpose3d', '', 'bfloat16', 'forward'),
    ],
    "hardware: bfloat16 rounding as conv_transpose2d's where PyTorch's 1-d transposed conv rounds per kernel tap (seen on the earlier 2-core machines); on an AVX512 one (torch.backends.cpu.get_cpu_capability()) it accumulates in float32 as tpu does and the sample passes": [  # noqa: E501
        ('nn.functional.conv_transpose1d', '', 'bfloat16', 'forward'),
    ],
    'no rule or decomposition for aten._sparse_mm_reduce_impl.default': [
        ('sparse.mm', 'reduce', 'bfloat16', 'forward'),
        ('sparse.mm', 'reduce', 'float32', 'forward'),
        ('sparse.mm', 'reduce', 'float64', 'forward'),
        ('sparse.mm', 'reduce', 'float32', 'grad'),
    ],
    'ties: CPU picks among equal values by its quickselect (kthvalue) or libstdc++ nth_element/partial_sort (topk); tpu takes the first': [  # noqa: E501
        ('kthvalue', '', 'int64', 'forward'),
        ('topk', '', 'bfloat16', 'forward'),
        ('topk', '', 'int64', 'forward'),
    ],
    "bfloat16 rounding: CPU's bicubic/trilinear upsampling rounds between its passes (CPU's own float32 result is as far from it); tpu rounds once": [  # noqa: E501
        ('nn.functional.interpolate', 'bicubic', 'bfloat16', 'forward'),
        ('nn.functional.interpolate', 'trilinear', 'bfloat16', 'forward'),
    ],
    "hardware: float32 rounding: CPU's and tpu's gradients are each ~1e-3 from the float64 one; on the earlier 2-core machines they were further apart than the 1e-4 tolerance, on an AVX512 one CPU's lands within it": [  # noqa: E501
        ('matrix_exp', '', 'float32', 'grad'),
    ],
    "ties: overlapping pooling windows give one unpooled position two inputs (equal primals, their own random tangents); which write lands is unspecified (CPU's loop keeps the last)": [  # noqa: E501
        ('nn.functional.max_unpool2d', '', 'float64', 'jvp'),
    ],
    "executor (deliberate): CPU's flash attention kernel has no forward formula and raises; tpu runs PyTorch's math composite for dual inputs (autograd_formulas.py), the tangent CPU's math backend gives": [  # noqa: E501
        ('nn.functional.scaled_dot_product_attention', '', 'float64', 'jvp'),
    ],
    "tpu has no sparse layout: the sample's sparse CSR input cannot move to tpu": [
        ('sparse.sampled_addmm', '', 'float64', 'jvp'),
        ('sparse.sampled_addmm', '', 'float64', 'gradgrad'),
        ('sparse.mm', 'reduce', 'float64', 'jvp'),
    ],
    'no rule or decomposition for aten.sparse_sampled_addmm.default': [
        ('sparse.sampled_addmm', '', 'float32', 'forward'),
        ('sparse.sampled_addmm', '', 'complex64', 'forward'),
        ('sparse.sampled_addmm', '', 'float64', 'forward'),
        ('sparse.sampled_addmm', '', 'float32', 'grad'),
    ],
    "bfloat16: CPU's matrix_exp overflows to NaN on these samples (its float32 result is finite); tpu computes in float32": [  # noqa: E501
        ('matrix_exp', '', 'bfloat16', 'forward'),
    ],
    'fails: NotImplementedError: "sum_cpu" not implemented for \'ComplexHalf\'': [
        ('chalf', '', 'float32', 'grad'),
    ],
    'random: the low-rank sketch is drawn from the generator; with M given the input is full rank and the approximation depends on it (PyTorch skips test_compare_cpu)': [  # noqa: E501
        ('svd_lowrank', '', 'float32', 'forward'),
        ('svd_lowrank', '', 'complex64', 'forward'),
        ('svd_lowrank', '', 'float64', 'forward'),
    ],
    "hardware: float32 rounding on some hosts: one element of 360 is 2.5e-5 relative from CPU's (the FFTs sum in other orders; this host's CPU result matches)": [  # noqa: E501
        ('fft.hfft2', '', 'complex64', 'forward'),
    ],
    "refused: hermitian=True of a complex matrix (LAPACK's ?hetrf conjugates in every update; tpu's factorisation is the symmetric ?sytrf)": [  # noqa: E501
        ('linalg.ldl_factor', '', 'complex64', 'forward'),
        ('linalg.ldl_factor_ex', '', 'complex64', 'forward'),
        ('linalg.ldl_solve', '', 'complex64', 'forward'),
    ],
}

EXPECTED: dict[tuple[str, str, str, str], str] = {
    key: reason for reason, keys in _BY_REASON.items() for key in keys
}
