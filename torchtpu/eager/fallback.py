"""Ops with no rule and no decomposition: a clear error, or (opted in) the CPU."""

from __future__ import annotations

import torch
from torch.utils._pytree import tree_map

from .. import config
from ..debug import counters as metrics
from ..runtime.transfer import to_device, to_host
from ..tensor import TpuTensor, read, wrap, write
from .values import CompressedOperand, is_compressed

REPORT = "https://github.com/torchtpu/torchtpu/issues"


def describe(args, kwargs) -> str:
    """Input dtypes and shapes, as a user reads them: float32[2, 3], int64[5], 2.0, ..."""

    def one(x):
        if isinstance(x, torch.Tensor):
            return f"{str(x.dtype).removeprefix('torch.')}{list(x.shape)}@{x.device}"
        if isinstance(x, (list, tuple)):
            return "[" + ", ".join(one(v) for v in x) + "]"
        if isinstance(x, (torch.UntypedStorage, torch.TypedStorage)):
            return type(x).__name__  # its repr reads its values: this op again
        return repr(x)

    parts = [one(a) for a in args] + [f"{k}={one(v)}" for k, v in kwargs.items()]
    return ", ".join(parts)


def handler(func):
    def missing(args, kwargs):
        if any(is_compressed(a) for a in args):
            raise CompressedOperand  # (its kernel, if any, is sparse_compressed's)
        if config.get("cpu_fallback"):
            return run_on_cpu(func, args, kwargs)
        raise NotImplementedError(
            f"torchtpu: the ATen op {func} has no lowering rule and no decomposition "
            f"(called with {describe(args, kwargs)}). Set TORCHTPU_CPU_FALLBACK=1 to run it "
            f"on the CPU, and please report it at {REPORT} with this message."
        )

    return missing


def run_on_cpu(func, args, kwargs, reason: str = "fallback"):
    """Run ``func`` on CPU copies, write mutated inputs back, move outputs to the device.
    Counted under ``reason`` in the metrics."""
    metrics.count(reason, func)
    to_cpu = lambda x: to_host(read(x)) if isinstance(x, TpuTensor) else x  # noqa: E731
    cpu_args, cpu_kwargs = tree_map(to_cpu, (list(args), dict(kwargs)))
    out = func(*cpu_args, **cpu_kwargs)
    schema = func._schema
    originals = {}
    for i, a in enumerate(schema.arguments):
        if a.alias_info is None or not a.alias_info.is_write:
            continue
        orig = args[i] if i < len(args) and not a.kwarg_only else kwargs.get(a.name)
        new = cpu_args[i] if i < len(args) and not a.kwarg_only else cpu_kwargs.get(a.name)
        pairs = zip(orig, new, strict=False) if isinstance(orig, (list, tuple)) else [(orig, new)]
        for o, n in pairs:
            if isinstance(o, TpuTensor):
                write(o, to_device(n))
                originals[id(n)] = o
    def moved(x):
        if not isinstance(x, torch.Tensor):
            return x
        return originals[id(x)] if id(x) in originals else wrap(to_device(x))

    return tree_map(moved, out)
