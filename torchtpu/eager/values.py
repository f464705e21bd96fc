"""Moving between dispatch arguments (tensors) and rule arguments (jax arrays)."""

from __future__ import annotations

import numpy as np
import torch

from ..runtime.transfer import to_device
from ..tensor import TpuTensor, read, wrap


def unwrap(x):
    """A dispatch argument as a rule argument: tensors become arrays, int lists tuples."""
    t = type(x)
    if t is TpuTensor:
        return x._storage.value if x._direct else read(x)
    if t is list or t is tuple:
        if any(isinstance(v, torch.Tensor) for v in x):
            return [None if v is None else unwrap(v) for v in x]
        return tuple(x)
    if isinstance(x, torch.Tensor):
        return _foreign(x)
    if t is int and x >= 2**63:
        return np.uint64(x)  # (jax reads a Python int as int64: a uint64 past its range)
    return x


def call_unwrapped(run, args, kwargs):
    """``run`` on the rule arguments for these dispatch arguments."""
    a = [unwrap(x) for x in args]
    if kwargs:
        return run(*a, **{k: unwrap(v) for k, v in kwargs.items()})
    return run(*a)


def _foreign(x: torch.Tensor):
    if isinstance(x, TpuTensor):
        return read(x)
    if x.device.type == "cpu" and x.dim() == 0:
        # PyTorch lets CPU scalars (0-d tensors) mix with accelerator tensors.
        return to_device(x)
    if is_compressed(x):
        # A tpu CSR/CSC tensor beside a dense one: the op reached the dense tensor's
        # dispatch (the Python key comes first); its kernel is sparse_compressed's.
        raise CompressedOperand
    raise RuntimeError(f"{MIXED_DEVICES}, tpu:0 and {x.device}!")


def is_compressed(x) -> bool:
    """A sparse CSR or CSC tpu tensor (sparse_compressed.py)."""
    return isinstance(x, torch.Tensor) and x.layout in (torch.sparse_csr, torch.sparse_csc) \
        and x.device.type == "tpu"


class CompressedOperand(Exception):
    """An op's argument is a sparse compressed tpu tensor (see ``_foreign``)."""


MIXED_DEVICES = "Expected all tensors to be on the same device, but found at least two devices"


def wrap_out(out):
    """Rule outputs as tensors: arrays become fresh TpuTensors, containers keep their type."""
    t = type(out)
    if t is tuple or t is list:
        return t(wrap_out(o) for o in out)
    if out is None:
        return None
    return wrap(out)
