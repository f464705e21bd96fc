"""CPU's checks of ``cdist``'s kernels, which their meta kernels skip.

``torch.cdist`` reaches ``_cdist_forward`` for every shape, but CPU's ``cdist_impl`` runs its
kernel only when there is something to compute and the matrix-product form was not chosen:
that kernel is built for float32 and float64 alone (cuda's too), and reads both inputs in the
first one's dtype. Half and bfloat16 distances would otherwise work on tpu and fail on CPU.
"""

from __future__ import annotations

import math

import torch

from ..ops.dtypes import cpp_name, scalar_type_name, to_torch_dtype
from .kernel_dtypes import kernel_refuses

_aten = torch.ops.aten

_HALF_WIDTH = "hB"
# (cdist's compute_mode: 0 uses the product form past 25 rows, 1 always, 2 never)
_PRODUCT_ALWAYS, _PRODUCT_NEVER = 1, 2


def _same_as(first, *others) -> str | None:
    """The kernel's reads of ``others`` as ``first``'s dtype: CPU's data_ptr<scalar_t>."""
    want = to_torch_dtype(first.dtype)
    for t in others:
        if to_torch_dtype(t.dtype) != want:
            return (f"expected scalar type {scalar_type_name(want)} but found "
                    f"{scalar_type_name(t.dtype)}")
    return None


def _batch(x1, x2) -> int:
    return math.prod(torch.broadcast_shapes(tuple(x1.shape[:-2]), tuple(x2.shape[:-2])))


def _cdist_forward_check(x1, x2, p, compute_mode=None) -> Exception | str | None:
    if (x1.ndim < 2 or x2.ndim < 2 or x1.shape[-1] != x2.shape[-1] or p < 0
            or not all(to_torch_dtype(x.dtype).is_floating_point for x in (x1, x2))):
        return None  # (the meta kernel's checks, with CPU's words)
    r1, r2, columns = x1.shape[-2], x2.shape[-2], x1.shape[-1]
    if r1 == 0 or r2 == 0 or _batch(x1, x2) == 0 or columns == 0:
        return None  # an empty or zero result, made without the kernel
    mode = compute_mode or 0
    if p == 2 and (mode == _PRODUCT_ALWAYS or (mode != _PRODUCT_NEVER and max(r1, r2) > 25)):
        if x1.dtype != x2.dtype:  # _euclidean_dist's matrix product
            return ("expected m1 and m2 to have the same dtype, but got: "
                    f"{cpp_name(x1.dtype)} != {cpp_name(x2.dtype)}")
        return None
    return kernel_refuses("cdist", _HALF_WIDTH)(x1) or _same_as(x1, x2)


def _cdist_backward_check(grad, x1, x2, p, cdist) -> Exception | str | None:
    if 0 in (x1.shape[-2], x2.shape[-2], x1.shape[-1]) or _batch(x1, x2) == 0:
        return None  # zeros, made without the kernel
    return kernel_refuses("cdist_backward", _HALF_WIDTH)(x1) or _same_as(x1, grad, x2, cdist)


CHECKS = {_aten._cdist_forward.default: _cdist_forward_check,
          _aten._cdist_backward.default: _cdist_backward_check}
