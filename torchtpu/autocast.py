"""``torch.autocast("tpu")``: matmuls and convolutions in the autocast dtype, the rest as is.

PyTorch's autocast runs a kernel registered for the device's Autocast key before the backend;
C++ backends register cast-then-redispatch kernels there. We register Python ones: ops that
benefit from low precision (matmuls, convolutions, attention) cast their floating inputs to
the autocast dtype; ops that need range (softmax, norms, losses) run in float32; every other
op falls through unchanged.
"""

from __future__ import annotations

import torch

_KEY = "AutocastPrivateUse1"
_EXCLUDE = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)

LOWER_PRECISION = (
    "mm", "bmm", "addmm", "addbmm", "baddbmm", "matmul", "linear", "conv1d", "conv2d",
    "conv3d", "conv_transpose1d", "conv_transpose2d.input", "conv_transpose3d.input",
    "convolution", "_convolution", "prelu", "scaled_dot_product_attention", "einsum",
)
FLOAT32 = (
    "softmax.int", "log_softmax.int", "layer_norm", "group_norm", "native_layer_norm",
    "cross_entropy_loss", "nll_loss", "mse_loss", "binary_cross_entropy_with_logits",
    "cumsum", "logsumexp", "norm.Scalar", "rsqrt", "exp", "log", "pow.Tensor_Scalar",
)


def _cast(x, dtype):
    if isinstance(x, torch.Tensor) and x.is_floating_point() and x.dtype != dtype:
        return x.to(dtype)
    if isinstance(x, (list, tuple)):
        return type(x)(_cast(v, dtype) for v in x)
    return x


def _kernel(op, to_float32: bool):
    def kernel(*args, **kwargs):
        dtype = torch.float32 if to_float32 else torch.get_autocast_dtype("tpu")
        args, kwargs = _cast(args, dtype), {k: _cast(v, dtype) for k, v in kwargs.items()}
        with torch._C._ExcludeDispatchKeyGuard(_EXCLUDE):
            return op(*args, **kwargs)

    return kernel


def _overload(name: str):
    packet, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten, packet), overload or "default")


def register(lib: torch.library.Library) -> torch.library.Library:
    """Install the autocast kernels on ``lib``; returns the fallthrough library to keep."""
    fallthrough = torch.library.Library("_", "IMPL")
    fallthrough.fallback(torch.library.fallthrough_kernel, _KEY)
    for names, to_float32 in ((LOWER_PRECISION, False), (FLOAT32, True)):
        for name in names:
            lib.impl(name, _kernel(_overload(name), to_float32), _KEY)
    return fallthrough
