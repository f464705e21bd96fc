"""Before anything is allocated: what the run needs on the host and the device, and whether
it fits. A run that would run out of memory is refused up front with the numbers and the
options that shrink it, instead of dying halfway.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from torchtpu.offload.adapters import ModelAdapter
from torchtpu.offload.config import OffloadConfig

GiB = 1024 ** 3


class PreflightError(MemoryError):
    """The configured run cannot fit; the message says by how much and what to change."""


def host_available_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _unique_numel(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())  # parameters() skips tied duplicates


def _fmt(n: int) -> str:
    return f"{n / GiB:.3f} GiB" if n >= GiB // 8 else f"{n / 2**20:.2f} MiB"


@dataclass
class MemoryPlan:
    """Itemised bytes on each side, and what each side has."""

    host: dict[str, int]
    device: dict[str, int]
    host_available: int | None
    device_available: int | None
    options: list[str] = field(default_factory=list)

    @property
    def host_total(self) -> int:
        return sum(self.host.values())

    @property
    def device_total(self) -> int:
        return sum(self.device.values())

    def report(self) -> str:
        lines = []
        for side, items, have in (("host", self.host, self.host_available),
                                  ("device", self.device, self.device_available)):
            total = sum(items.values())
            have_s = _fmt(have) if have is not None else "unknown"
            lines.append(f"  {side}: needs {_fmt(total)}, has {have_s}")
            lines += [f"    {k:<26} {_fmt(v)}" for k, v in items.items() if v]
        return "\n".join(lines)


def plan_memory(adapter: ModelAdapter, cfg: OffloadConfig, batch: int, seq: int,
                micro_batches: int = 1, host_available: int | None = None,
                device_available: int | None = None) -> MemoryPlan:
    """Bytes the run needs, from parameter counts and shapes only (nothing is allocated)."""
    blocks = adapter.blocks()
    n_blocks = len(blocks)
    p_block = _unique_numel(blocks[0])
    p_res = _unique_numel(adapter.residents())
    p_all = p_block * n_blocks + p_res
    wb = torch.empty(0, dtype=cfg.weights_dtype).element_size()
    ab = 2 if (cfg.autocast_bf16 or cfg.weights_dtype == torch.bfloat16) else 4
    d = adapter.dims()
    hidden, inter, heads, vocab = d["hidden"], d["intermediate"], d["heads"], d["vocab"]
    tokens = batch * seq
    act_block = tokens * hidden * ab  # one block's saved input

    host = {
        "master weights": p_all * wb,
        "gradients (fp32)": p_all * 4,
        "AdamW moments (fp32)": p_all * 8,
        "grad-accum staging": 2 * p_block * 4 if micro_batches > 1 else 0,
        "offloaded activations": n_blocks * act_block if cfg.offload_activations else 0,
    }
    # eager attention materialises the (seq x seq) scores, probabilities and their gradient
    attn = getattr(getattr(adapter.model, "config", None), "_attn_implementation", "eager")
    scores = 3 * batch * heads * seq * seq * ab if attn == "eager" else 0
    device = {
        "block weight slots (2)": 2 * p_block * wb,
        "block grad slots (2)": 2 * p_block * 4,
        "resident weights+grads": p_res * (wb + 4),
        "saved block inputs": (2 if cfg.offload_activations else n_blocks) * act_block,
        # recompute + backward of one block: its internal activations and their gradients
        "block working set": tokens * (16 * hidden + 8 * inter) * ab + scores,
        # at the loss's peak: logits and their shifted copy, the fp32 copy, its log-softmax
        # and that one's gradient (an H200 run at 16k tokens needed more than ab + 8 bytes)
        "head working set": min(tokens, cfg.head_chunk_tokens or tokens) * vocab
        * (2 * ab + 12),
    }
    device["margin (5%)"] = sum(device.values()) // 20
    p = MemoryPlan(host, device, host_available, device_available)
    p.options = _options(p, cfg, n_blocks, act_block, p_all, tokens, wb)
    return p


def _options(p: MemoryPlan, cfg: OffloadConfig, n_blocks: int, act_block: int, p_all: int,
             tokens: int, wb: int) -> list[str]:
    opts = []
    if not cfg.offload_activations and n_blocks > 2:
        opts.append(f"offload_activations=True (--offload-activations): device "
                    f"-{_fmt((n_blocks - 2) * act_block)}, host +{_fmt(n_blocks * act_block)}")
    if wb == 4:
        opts.append(f"weights_dtype=bfloat16 (--bf16-weights): host -{_fmt(p_all * 2)}, "
                    f"device -{_fmt(p.device['block weight slots (2)'] // 2)}")
    if tokens > 1:
        act = p.device["saved block inputs"] + p.device["block working set"] + \
            p.device["head working set"]
        opts.append(f"halve batch or sequence length: device -{_fmt(act // 2)}")
    opts.append("more host RAM / a larger device budget")
    return opts


def check(p: MemoryPlan) -> None:
    """Raise PreflightError when either side does not fit."""
    short = []
    if p.host_available is not None and p.host_total > p.host_available:
        short.append("host")
    if p.device_available is not None and p.device_total > p.device_available:
        short.append("device")
    if short:
        raise PreflightError(
            f"offload pre-flight: this run does not fit in {' and '.join(short)} memory.\n"
            f"{p.report()}\n  options that reduce it:\n"
            + "\n".join(f"    - {o}" for o in p.options))
