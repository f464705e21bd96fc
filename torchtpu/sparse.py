"""Sparse COO tensors on tpu.

A sparse tpu tensor is a wrapper subclass with PyTorch's ``sparse_coo`` layout on ``tpu:0``
holding three things: ``indices`` (a tpu int64 tensor, ``[sparse_dim, nnz]``), ``values`` (a
tpu tensor, ``[nnz, *dense_shape]``) and the coalesced flag. It has no op set of its own: its
``__torch_dispatch__`` computes each op it knows with ordinary tpu ops on the indices and
values, so strict, fused and debug eager run them through the one lowering registry. Autograd
runs above it with PyTorch's own formulas (mm's, to_dense's, the constructor's). An op it does
not know is refused with a ``NotImplementedError`` naming the op and the layout, never
computed wrong. The ops themselves are in ``sparse_ops.py``.

Sparse tensors reach tpu through the dense tensor's dispatch (``eager/special.py``): the
constructor ``_sparse_coo_tensor_with_dims_and_tensors`` arriving with tpu indices and values
(``torch.sparse_coo_tensor(..., device="tpu")``, ``cpu_sparse.to("tpu")``), and
``dense.to_sparse()``; the empty constructor (``_sparse_coo_tensor_with_dims``) through a
``SparsePrivateUse1`` kernel (backend.py).
"""

from __future__ import annotations

import math

import torch

from .tensor import DEVICE, TpuTensor

aten = torch.ops.aten
REPORT = "https://github.com/torchtpu/torchtpu/issues"


class SparseTensor(torch.Tensor):
    """A sparse COO tensor on the 'tpu' device. Users never construct it directly."""

    # (no Python-level wrapping of results: ~40 us per op, and nothing to add)
    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        from .sparse_ops import OPS

        handler = OPS.get(func)
        if handler is None:
            raise refused(func)
        if func not in _ACROSS_DEVICES:
            _check_devices(func, args)
        return handler(*args, **(kwargs or {}))

    def __repr__(self, *, tensor_contents=None) -> str:
        from ._print import tensor_repr

        return tensor_repr(self)

    def __reduce_ex__(self, protocol):
        # PyTorch's form for a sparse tensor: its indices and values (tpu tensors, which
        # pickle as their CPU copies), rebuilt by torch.sparse_coo_tensor on load.
        # (Tensor.__reduce_ex__ would pickle a storage-less PrivateUse1 tensor as numpy.)
        torch.utils.hooks.warn_if_has_hooks(self)
        args = (self.layout, (self._i, self._v, self.size(), self._coalesced))
        return (torch._utils._rebuild_sparse_tensor, args)

    def tolist(self):
        return self.cpu().tolist()  # (CPU's own refusal)

    def numpy(self, *, force: bool = False):
        raise TypeError(f"can't convert {self.device} device type tensor to numpy. Use "
                        "Tensor.cpu() to copy the tensor to host memory first.")


SparseTensor.__name__ = "Tensor"  # messages name it as on CPU


# Ops that take a tensor of another device (copies), as on CPU and cuda.
_ACROSS_DEVICES = {aten.copy_.default, aten._to_copy.default}


def _check_devices(func, args) -> None:
    """cuda's refusal of a tensor on another device (a 0-d CPU one is a number)."""
    for a in args:
        if isinstance(a, torch.Tensor) and a.device.type != "tpu" and (a.dim() or a.is_sparse):
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at "
                               f"least two devices, tpu:0 and {a.device}! (when checking "
                               f"argument in method {func})")


def make(indices: torch.Tensor, values: torch.Tensor, size, coalesced: bool) -> SparseTensor:
    """A sparse tpu tensor holding ``indices`` and ``values`` (aliased, not copied)."""
    t = torch.Tensor._make_wrapper_subclass(SparseTensor, tuple(size), dtype=values.dtype,
                                            layout=torch.sparse_coo, device=DEVICE)
    t._i, t._v, t._coalesced = indices, values, bool(coalesced)
    return t


def set_size(s, size) -> None:
    """Give the wrapper ``s`` the sizes ``size`` in place: CPU's generic set_ kernel writes a
    tensor's sizes whatever its layout, here over a placeholder storage of the new size that
    holds no memory."""
    size = tuple(size)
    if size != tuple(s.shape):
        strides = [math.prod(size[d + 1:]) for d in range(len(size))]
        room = torch.Tensor._make_wrapper_subclass(
            TpuTensor, (math.prod(size),), dtype=s.dtype, device=DEVICE).untyped_storage()
        aten.set_.source_Storage_storage_offset.redispatch(_CPU, s, room, 0, size, strides)


_CPU = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)


def refused(func) -> NotImplementedError:
    return NotImplementedError(
        f"torchtpu: {func} is not supported for sparse COO tensors (layout=torch.sparse_coo) "
        f"on tpu. Supported: construction, coalesce, indices/values, to_dense, to_sparse, "
        f"to_sparse_csr/csc, mm/addmm/matmul/bmm/hspmm with a dense operand, sparse @ sparse, "
        f"add, sub, mul (by a number, a dense or a sparse tensor), div by a number, neg, "
        f"zero-preserving functions (abs, sqrt, pow...), sum, any, softmax, smm/sspaddmm, "
        f"transpose, permute, unsqueeze, narrow_copy, select/index_select/unbind, cat/stack, "
        f"sparse_resize_, clone, detach, zeros_like and copies. Convert with .to_dense() or "
        f".cpu(), and please report it at {REPORT} with this message.")


def unmultipliable(a, b, op: str = "") -> RuntimeError:
    """CPU's error for matrices whose inner sizes differ (``op``: a prefix some kernels add)."""
    return RuntimeError(f"{op}mat1 and mat2 shapes cannot be multiplied ({a.shape[-2]}x"
                        f"{a.shape[-1]} and {b.shape[-2]}x{b.shape[-1]})")


def is_sparse_tpu(x) -> bool:
    return type(x) is SparseTensor


# --- entry points from the dense tensor's dispatch (eager/special.py) ---

def construct(args, kwargs):
    """``_sparse_coo_tensor_with_dims_and_tensors`` with tpu indices and values: PyTorch's
    shape checks (its meta kernel), then the tensor, aliasing them as CPU's does."""
    sparse_dim, dense_dim, size, indices, values = args
    kwargs = dict(kwargs)
    coalesced = kwargs.pop("is_coalesced", None)
    layout = kwargs.get("layout")
    if layout not in (None, torch.sparse_coo):
        raise refused(aten._sparse_coo_tensor_with_dims_and_tensors.default)
    meta = dict(kwargs, device="meta")
    aten._sparse_coo_tensor_with_dims_and_tensors.default(
        sparse_dim, dense_dim, size, indices.to("meta"), values.to("meta"), **meta)
    if indices.device.type != values.device.type:  # (an accelerator's check, in its words)
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least "
                           f"two devices, {indices.device} and {values.device}!")
    dtype = kwargs.get("dtype")
    if dtype is not None and values.dtype != dtype:
        values = values.to(dtype)
    if coalesced is None:  # CPU's default: fewer than two entries are coalesced
        coalesced = indices.shape[1] < 2
    return make(indices, values, size, coalesced)


def construct_empty(sparse_dim, dense_dim, size, *, dtype=None, layout=None, device=None,
                    pin_memory=None):
    """``_sparse_coo_tensor_with_dims`` on tpu (``torch.sparse_coo_tensor(size=...)``,
    ``zeros_like``): no entries."""
    dtype = dtype or torch.get_default_dtype()
    indices = torch.zeros((sparse_dim, 0), dtype=torch.int64, device=DEVICE)
    values = torch.zeros((0, *size[sparse_dim:]), dtype=dtype, device=DEVICE)
    return make(indices, values, size, True)


def validate(args, kwargs):
    """``_validate_sparse_coo_tensor_args`` (check_invariants=True, torch.load): CPU's own
    checks, on the host copy of the indices (the values' contents are not read)."""
    indices, values, size, *rest = (*args, *kwargs.values())
    stand_in = torch.zeros((), dtype=values.dtype).expand(values.shape)
    return aten._validate_sparse_coo_tensor_args.default(indices.cpu(), stand_in, size, *rest)


def spdiags(args, kwargs):
    """``torch.sparse.spdiags`` of tpu diagonals: CPU's kernel lays out the entries (its
    checks, their order, the output layout) over each diagonal element's position, and the
    values are gathered from those positions on the device."""
    diagonals, offsets, *rest = args
    positions = torch.arange(diagonals.numel()).view(diagonals.shape)
    laid = aten._spdiags.default(positions, offsets.cpu(), *rest, **kwargs)
    coo = laid.layout is torch.sparse_coo
    values = diagonals.flatten()[(laid._values() if coo else laid.values()).to(diagonals.device)]
    if coo:
        return make(laid._indices().to(DEVICE), values, laid.shape, laid.is_coalesced())
    members = (laid.crow_indices(), laid.col_indices()) if laid.layout is torch.sparse_csr \
        else (laid.ccol_indices(), laid.row_indices())
    return aten._sparse_compressed_tensor_unsafe.default(
        *(m.to(DEVICE) for m in members), values, laid.shape, dtype=values.dtype,
        layout=laid.layout, device=DEVICE)


def to_sparse(args, kwargs):
    """A dense tpu tensor's ``_to_sparse`` (``dense.to_sparse()``, ``to_sparse(sparse_dim)``):
    the positions whose entries are not all zero, sorted, and their values; coalesced."""
    self, *rest = args
    sparse_dim = rest[0] if rest else None
    layout = kwargs.get("layout")
    if layout in (torch.sparse_csr, torch.sparse_csc) and kwargs.get("blocksize") is None:
        from .sparse_compressed import from_dense

        return from_dense(self, layout, kwargs.get("dense_dim"))
    if layout not in (None, torch.sparse_coo) or kwargs.get("blocksize") is not None:
        raise NotImplementedError(
            f"torchtpu: tpu has no {layout} layout; sparse COO, CSR and CSC tensors are "
            f"supported. Please report it at {REPORT}.")
    if sparse_dim is None:
        dense_dim = kwargs.get("dense_dim")
        sparse_dim = self.dim() - (dense_dim or 0)
    if not 0 <= sparse_dim <= self.dim():
        raise RuntimeError(f"dense_to_sparse: sparse_dim argument must be in [0,{self.dim()}] "
                           f"range, but {sparse_dim} is given")
    nonzero = self != 0
    if sparse_dim < self.dim():
        nonzero = nonzero.flatten(sparse_dim).any(-1) if self.numel() else \
            torch.zeros(self.shape[:sparse_dim], dtype=torch.bool, device=DEVICE)
    indices = nonzero.nonzero().t().contiguous()
    values = self[tuple(indices)] if sparse_dim else self.unsqueeze(0)[:indices.shape[1]]
    return make(indices, values.contiguous(), self.shape, True)
