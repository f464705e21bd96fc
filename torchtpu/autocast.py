"""``torch.autocast("tpu")``: PyTorch's accelerator cast policy (CUDA's, XPU's) for 'tpu'.

PyTorch's autocast runs a kernel registered for the device's Autocast key before the backend;
C++ backends register cast-then-redispatch kernels there, and PyTorch ships none for
PrivateUse1. We register Python ones with the policies of ATen's autocast_mode: matmuls and
convolutions in the autocast dtype (bfloat16 by default, as on CPU and TPUs); ops that need
range in float32; reductions that take a dtype accumulate in float32; a few multi-input ops
run in their widest input dtype; every other op falls through unchanged. As in ATen, only
floating tensors on 'tpu' that are not float64 are cast.

Two deviations, both CPU's policy: CUDA's forbids ``binary_cross_entropy`` under autocast,
here it runs in float32 so code that runs on CPU runs here; and ``cross_entropy`` runs in
float32 (on CUDA its log_softmax takes the logits' dtype: bfloat16 logits give a loss
rounded to bfloat16's precision, which XLA may or may not keep inside a fused program).
"""

from __future__ import annotations

import threading

import torch

_KEY = "AutocastPrivateUse1"
_EXCLUDE = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)

LOWER_PRECISION = (
    "_convolution", "_convolution.deprecated", "conv1d", "conv1d.padding", "conv2d",
    "conv2d.padding", "conv3d", "conv3d.padding", "conv_tbc", "conv_transpose1d",
    "conv_transpose2d.input", "conv_transpose3d.input", "convolution", "prelu", "addmm",
    "addmv", "addr", "matmul", "einsum", "mm", "mv", "linalg_vecdot", "linear", "addbmm",
    "baddbmm", "bmm", "chain_matmul", "linalg_multi_dot", "_thnn_fused_lstm_cell",
    "_thnn_fused_gru_cell", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell",
    "_scaled_dot_product_flash_attention", "scaled_dot_product_attention",
)
FLOAT32 = (
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p",
    "reciprocal", "rsqrt", "sinh", "tan", "pow.Tensor_Scalar", "pow.Tensor_Tensor",
    "pow.Scalar", "softplus", "layer_norm", "native_layer_norm", "group_norm",
    "frobenius_norm.dim", "nuclear_norm", "nuclear_norm.dim", "cosine_similarity",
    "poisson_nll_loss", "cosine_embedding_loss", "nll_loss", "nll_loss2d",
    "hinge_embedding_loss", "kl_div", "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss",
    "margin_ranking_loss", "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss",
    "multi_margin_loss", "binary_cross_entropy_with_logits", "dist", "pdist", "cdist",
    "renorm", "logsumexp", "rms_norm", "binary_cross_entropy", "cross_entropy_loss",
    # F.interpolate calls the .vec overloads: eager reaches the listed ones through their
    # decomposition, a traced graph (torch.compile) may not.
    *(f"{name}{overload}" for overload in ("", ".vec") for name in (
        "upsample_nearest1d", "_upsample_nearest_exact1d", "upsample_nearest2d",
        "_upsample_nearest_exact2d", "upsample_nearest3d", "_upsample_nearest_exact3d",
        "upsample_linear1d", "upsample_bilinear2d", "_upsample_bilinear2d_aa",
        "upsample_trilinear3d", "upsample_bicubic2d", "_upsample_bicubic2d_aa")),
)
# Reductions with a dtype argument: float32 unless the caller gave one.
FLOAT32_DTYPE = (
    "prod", "prod.dim_int", "softmax.int", "log_softmax.int", "cumprod", "cumsum",
    "linalg_vector_norm", "linalg_matrix_norm", "linalg_matrix_norm.str_ord", "sum",
    "sum.dim_IntList",
)
# norm's overloads without a dtype redispatch to the one with it.
FLOAT32_APPEND_DTYPE = {"norm.Scalar": "norm.ScalarOpt_dtype",
                        "norm.ScalarOpt_dim": "norm.ScalarOpt_dim_dtype"}
WIDEST = ("addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "vdot", "grid_sampler",
          "index_put", "tensordot", "scatter_add")


def _eligible(x) -> bool:
    return (isinstance(x, torch.Tensor) and x.is_floating_point() and x.dtype != torch.float64
            and x.device.type == "tpu")


def _cast(x, dtype):
    if _eligible(x) and x.dtype != dtype:
        return x.to(dtype)
    if isinstance(x, (list, tuple)):
        return type(x)(_cast(v, dtype) for v in x)
    return x


def _widest(args, kwargs) -> torch.dtype:
    dtype = _get_dtype("tpu")
    for x in (*args, *kwargs.values()):
        for t in x if isinstance(x, (list, tuple)) else (x,):
            if _eligible(t) and t.dtype == torch.float32:
                return torch.float32
    return dtype


def _casting(op, dtype_of):
    def kernel(*args, **kwargs):
        dtype = dtype_of(args, kwargs)
        args, kwargs = _cast(args, dtype), {k: _cast(v, dtype) for k, v in kwargs.items()}
        with torch._C._ExcludeDispatchKeyGuard(_EXCLUDE):
            return op(*args, **kwargs)

    return kernel


def _float32_dtype(op):
    at = [a.name for a in op._schema.arguments].index("dtype")

    def kernel(*args, **kwargs):
        given = args[at] if len(args) > at else kwargs.get("dtype")
        if args and _eligible(args[0]) and given is None:
            args, kwargs = args[:at], {**kwargs, "dtype": torch.float32}
        with torch._C._ExcludeDispatchKeyGuard(_EXCLUDE):
            return op(*args, **kwargs)

    return kernel


def _float32_appended(with_dtype):
    def kernel(*args, **kwargs):
        dtype = torch.float32 if args and _eligible(args[0]) else args[0].dtype
        with torch._C._ExcludeDispatchKeyGuard(_EXCLUDE):
            return with_dtype(*args, **kwargs, dtype=dtype)

    return kernel


def _overload(name: str):
    packet, _, overload = name.partition(".")
    packet = getattr(torch.ops.aten, packet, None)
    return getattr(packet, overload or "default", None) if packet is not None else None


def _low(args, kwargs):
    return _get_dtype("tpu")


def _float32(args, kwargs):
    return torch.float32


def register(lib: torch.library.Library) -> torch.library.Library:
    """Install the autocast kernels on ``lib``; returns the fallthrough library to keep."""
    fallthrough = torch.library.Library("_", "IMPL")
    fallthrough.fallback(torch.library.fallthrough_kernel, _KEY)
    kernels = {}
    for names, make in ((LOWER_PRECISION, lambda op: _casting(op, _low)),
                        (FLOAT32, lambda op: _casting(op, _float32)),
                        (FLOAT32_DTYPE, _float32_dtype),
                        (WIDEST, lambda op: _casting(op, _widest))):
        for name in names:
            op = _overload(name)
            if op is not None:  # an op of another torch version
                kernels[name] = make(op)
    for name, with_dtype in FLOAT32_APPEND_DTYPE.items():
        kernels[name] = _float32_appended(_overload(with_dtype))
    for name, kernel in kernels.items():
        lib.impl(name, kernel, _KEY)
    torch.get_autocast_dtype, torch.set_autocast_dtype = get_autocast_dtype, set_autocast_dtype
    return fallthrough


# The raw per-thread setting (the kernels read it inside an autocast region, which set it).
_get_dtype, _set_dtype = torch.get_autocast_dtype, torch.set_autocast_dtype
_thread = threading.local()


def get_autocast_dtype(device_type: str) -> torch.dtype:
    """``torch.get_autocast_dtype``, tpu's default bfloat16 (CPU's; float16, PyTorch's for a
    PrivateUse1 device, is slow or absent on TPUs) in every thread: PyTorch keeps the setting
    per thread, and a new thread starts at float16."""
    if device_type == "tpu" and not getattr(_thread, "chosen", False):
        set_autocast_dtype("tpu", torch.bfloat16)
    return _get_dtype(device_type)


def set_autocast_dtype(device_type: str, dtype: torch.dtype) -> None:
    if device_type == "tpu":
        _thread.chosen = True
    _set_dtype(device_type, dtype)


# Dynamo folds torch's own getter to its value at trace time: the same for ours.
get_autocast_dtype._dynamo_marked_constant = True
