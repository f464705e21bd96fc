"""Checkpoints: master weights + AdamW moments + step counts as safetensors, never pickle.

Files are written atomically (temporary file, fsync, os.replace, fsync of the directory), so
a run killed while saving leaves the previous checkpoint whole. Tensors are streamed to disk
one at a time from the host store, so saving needs no second copy of the model in memory.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from safetensors import safe_open

if TYPE_CHECKING:
    from torchtpu.offload.engine import OffloadEngine

FORMAT = "torchtpu-offload-v1"
_DTYPES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16",
           torch.int64: "I64", torch.int32: "I32", torch.uint8: "U8", torch.float64: "F64"}


def _write_bytes(f, data: memoryview) -> None:
    # the one place bytes hit the file: tests make it fail midway to simulate a kill
    f.write(data)


def write_safetensors(path: str | os.PathLike, tensors: Mapping[str, torch.Tensor],
                      metadata: Mapping[str, str] | None = None) -> None:
    """Write `tensors` to `path` atomically in the safetensors format, streaming each tensor."""
    path = Path(path)
    header: dict = {"__metadata__": dict(metadata)} if metadata else {}
    offset = 0
    for name, t in tensors.items():
        nbytes = t.numel() * t.element_size()
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)  # the format wants the data 8-byte aligned
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    for stale in path.parent.glob(f".{path.name}.tmp-*"):
        stale.unlink(missing_ok=True)  # left by an earlier run that was killed mid-save
    try:
        with open(tmp, "wb") as f:
            _write_bytes(f, memoryview(len(blob).to_bytes(8, "little")))
            _write_bytes(f, memoryview(blob))
            for t in tensors.values():
                flat = t.detach().contiguous().reshape(-1).view(torch.uint8)
                _write_bytes(f, memoryview(flat.numpy()))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # make the rename itself durable
    finally:
        os.close(dir_fd)


def _groups(engine: OffloadEngine):
    return [engine.resident, *engine.blocks]


def save(engine: OffloadEngine, path: str | os.PathLike) -> None:
    """Save master weights, AdamW moments and step counts of every group."""
    engine.synchronize()
    tensors = {}
    for g in _groups(engine):
        tensors[f"{g.name}.weights"] = g.weights
        tensors[f"{g.name}.exp_avg"] = g.exp_avg
        tensors[f"{g.name}.exp_avg_sq"] = g.exp_avg_sq
    meta = {"format": FORMAT, "step": str(engine.step_count),
            "group_steps": json.dumps({g.name: g.step for g in _groups(engine)})}
    write_safetensors(path, tensors, meta)


def load(engine: OffloadEngine, path: str | os.PathLike) -> None:
    """Restore a checkpoint written by `save` into `engine`'s host store, in place."""
    engine.synchronize()
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
        if meta.get("format") != FORMAT:
            raise ValueError(f"{path}: not a {FORMAT} checkpoint (format={meta.get('format')})")
        steps = json.loads(meta["group_steps"])
        names = set(f.keys())
        for g in _groups(engine):
            for part in ("weights", "exp_avg", "exp_avg_sq"):
                key = f"{g.name}.{part}"
                dst = getattr(g, part)
                if key not in names:
                    raise ValueError(f"{path}: missing tensor {key}")
                src = f.get_tensor(key)
                if src.shape != dst.shape or src.dtype != dst.dtype:
                    raise ValueError(f"{path}: {key} is {src.dtype}{list(src.shape)}, the "
                                     f"engine expects {dst.dtype}{list(dst.shape)}")
                dst.copy_(src)
            g.step = steps[g.name]
    engine.step_count = int(meta["step"])
    engine.invalidate_device_copies()


def export_hf(engine: OffloadEngine, directory: str | os.PathLike) -> Path:
    """Write a Hugging Face checkpoint directory: config.json + model.safetensors."""
    engine.synchronize()
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    config = engine.adapter.hf_config()
    if config is None:
        raise ValueError("offload: this model's adapter cannot describe a HF config")
    tensors = engine.adapter.hf_state_dict()
    write_safetensors(directory / "model.safetensors", tensors, {"format": "pt"})
    cfg_path = directory / "config.json"
    tmp = cfg_path.with_name(".config.json.tmp")
    with open(tmp, "w") as f:
        json.dump(config, f, indent=2, default=str)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, cfg_path)
    return directory
