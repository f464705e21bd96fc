"""Every torchtpu flag in one table.

Each flag has a name, the environment variable that sets it, a default, a help line, and
whether it changes compiled code (those flags are part of every cache key).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Flag:
    name: str
    default: Any
    help: str
    affects_compile: bool = False

    @property
    def env(self) -> str:
        return "TORCHTPU_" + self.name.upper()


FLAGS: dict[str, Flag] = {
    f.name: f
    for f in [
        Flag("platform", "", "XLA platform: tpu, gpu or cpu; empty picks TPU > GPU > CPU."),
        Flag("eager_mode", "strict",
             "Eager executor: 'strict' (async per op), 'debug' (sync) or 'fused'."),
        Flag("fused_max_ops", 5000, "Fused eager runs what it has recorded at this many ops."),
        Flag("fused_split", True,
             "Fused eager: a sync point forcing one value (loss.item()) runs what that value "
             "needs first and the rest (backward, optimizer step) after it, without waiting; "
             "0: one program per sync point."),
        Flag("check_indices", True,
             "Strict and debug eager read index tensors (gather, scatter, indexing, "
             "embedding, nll_loss targets, max_unpool) to raise CPU's error for an "
             "out-of-range index, "
             "binary_cross_entropy's probabilities outside [0, 1], masked_scatter's source "
             "count, integer division by zero and random ops' parameter tensors "
             "(multinomial, bernoulli, normal, poisson); each such op waits for those values. "
             "Fused eager and torch.compile check them without waiting and raise at a later "
             "sync point. 0: no checks."),
        Flag("cpu_fallback", False, "Run ops that have no lowering on the CPU (counted)."),
        Flag(
            "cpu_async",
            False,
            "On the XLA:CPU platform, dispatch asynchronously (slower per op on small "
            "tensors; overlaps Python with compute on large ones).",
        ),
        Flag(
            "cache_dir",
            "auto",
            "Persistent XLA compile cache folder ('auto': ~/.cache/torchtpu, per user; "
            "empty: off). A second process running the same model starts warm.",
        ),
        Flag("register_device", True,
             "Register the 'tpu' device on import. PyTorch's autograd engine then treats "
             "'tpu' as the process's accelerator, which breaks CUDA backward in the same "
             "process: set 0 to use torchtpu.offload or torchtpu.models on cuda."),
        Flag("coverage_results", "", "Where the OpInfo sweep writes its results for "
             "`python -m torchtpu.debug.coverage`; empty: ~/.cache/torchtpu."),
    ]
}


def _parse(flag: Flag, raw: str) -> Any:
    if isinstance(flag.default, bool):
        return raw.strip().lower() in ("1", "true", "yes", "on")
    if isinstance(flag.default, int):
        return int(raw)
    return raw


def get(name: str) -> Any:
    """The flag's value: the environment variable if set, else its default."""
    flag = FLAGS[name]
    raw = os.environ.get(flag.env)
    return flag.default if raw is None else _parse(flag, raw)


def compile_key() -> tuple:
    """The values of the flags that change compiled code, for cache keys."""
    return tuple((f.name, get(f.name)) for f in FLAGS.values() if f.affects_compile)
