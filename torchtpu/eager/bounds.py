"""Index bounds checks for debug mode.

XLA clamps out-of-range gather/scatter indices where PyTorch's CPU kernels raise IndexError.
Checking needs the index values on the host, a sync strict mode will not pay for; debug mode
is synchronous anyway, so there an out-of-range index raises as on CPU.
"""

from __future__ import annotations

import numpy as np
import torch

from ..tensor import TpuTensor, read

aten = torch.ops.aten


# PyTorch's CPU kernels raise IndexError, except gather/scatter, which raise RuntimeError.
_RUNTIME_ERROR = {aten.gather.default, aten.scatter.src, aten.scatter.value, aten.scatter_.src,
                  aten.scatter_.value, aten.scatter_add.default, aten.scatter_add_.default}


def _dim_index(dim_pos: int, index_pos: int):
    def pairs(args, kwargs):
        self, dim, index = args[0], args[dim_pos], args[index_pos]
        if self.dim() == 0:
            return []
        return [(index, dim % self.dim(), self.shape[dim % self.dim()])]

    return pairs


def _indices_list(args, kwargs):
    self, indices = args[0], args[1]
    out, dim = [], 0
    for idx in indices:
        if idx is None:
            dim += 1
            continue
        if idx.dtype == torch.bool:
            dim += idx.dim()
            continue
        out.append((idx, dim, self.shape[dim]))
        dim += 1
    return out


def _embedding(args, kwargs):
    weight, indices = args[0], args[1]
    return [(indices, 0, weight.shape[0])]


_CHECKS = {
    aten.index.Tensor: _indices_list,
    aten.index_put.default: _indices_list,
    aten.index_put_.default: _indices_list,
    aten.index_select.default: _dim_index(1, 2),
    aten.gather.default: _dim_index(1, 2),
    aten.scatter.src: _dim_index(1, 2),
    aten.scatter.value: _dim_index(1, 2),
    aten.scatter_.src: _dim_index(1, 2),
    aten.scatter_.value: _dim_index(1, 2),
    aten.scatter_add.default: _dim_index(1, 2),
    aten.scatter_add_.default: _dim_index(1, 2),
    aten.index_add.default: _dim_index(1, 2),
    aten.index_add_.default: _dim_index(1, 2),
    aten.index_copy.default: _dim_index(1, 2),
    aten.index_fill.int_Scalar: _dim_index(1, 2),
    aten.embedding.default: _embedding,
}


def check(func, args, kwargs) -> None:
    """Raise PyTorch's IndexError if an index tensor of ``func`` is out of range."""
    pairs = _CHECKS.get(func)
    if pairs is None:
        return
    for index, dim, size in pairs(args, kwargs):
        if not isinstance(index, TpuTensor) or index.numel() == 0:
            continue
        values = np.asarray(read(index))
        bad = values[(values >= size) | (values < -size)]
        if bad.size:
            error = RuntimeError if func in _RUNTIME_ERROR else IndexError
            raise error(
                f"index {int(bad.flat[0])} is out of bounds for dimension {dim} with size {size}"
            )
