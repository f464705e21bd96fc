"""Keys for the in-process cache of compiled programs.

Labelled parts hashed together, so two graphs share a program only if everything that
shapes the XLA program is equal: the graph's code, its inputs' shapes, dtypes and strides,
the platform, the flags that change compiled code and the compile options.
"""

from __future__ import annotations

import hashlib

import torch
from torch import fx

from .. import config
from ..runtime import platform


def _describe(val) -> str:
    if isinstance(val, torch.Tensor):
        return f"{val.dtype}{list(val.shape)}/{list(val.stride())}/{val.device}"
    return type(val).__name__ if isinstance(val, torch.SymInt) else repr(val)


def graph_key(gm: fx.GraphModule, kind: str, options: tuple = ()) -> str:
    """The key of an ATen graph of ``kind`` ('forward', 'backward', 'inference')."""
    inputs = [_describe(n.meta.get("val")) for n in gm.graph.nodes if n.op == "placeholder"]
    # A graph with tensor constants is only equal to itself: the values are not in its code.
    identity = str(id(gm)) if any(n.op == "get_attr" for n in gm.graph.nodes) else ""
    parts = {
        "kind": kind,
        "code": gm.code,
        "inputs": "|".join(inputs),
        "constants": identity,
        "platform": platform.platform(),
        "flags": repr(config.compile_key()),
        "options": repr(options),
        "default_dtype": str(torch.get_default_dtype()),  # read by rules as they are traced
        "matmul_precision": torch.get_float32_matmul_precision(),
    }
    h = hashlib.sha256()
    for label, value in parts.items():
        h.update(f"{label}={value}\n".encode())
    return h.hexdigest()
