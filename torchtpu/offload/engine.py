"""The pipelined, double-buffered streaming trainer.

Host memory is the model's home; the device computes one block at a time on two templates.

Per micro-batch:
  forward   block i runs on one template while block i+1 streams into the other; each block's
            input is kept (on the device, or offloaded to host) and no autograd graph is kept.
  backward  last block first: block i-1 streams in while block i recomputes its forward from
            its saved input and runs torch.autograd.grad; its gradient leaves on a separate
            stream, and a host worker runs AdamW on block i as soon as it lands.
The two blocks resident when forward ends are the first two backward needs, and the two
resident when backward ends are the first two the next micro-batch needs, so those are not
copied again: each block crosses at most twice per step, once per direction of the sweep.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from torchtpu.offload import preflight
from torchtpu.offload.adapters import ModelAdapter, adapter_for
from torchtpu.offload.config import OffloadConfig
from torchtpu.offload.device_ops import DeviceOps, device_ops_for
from torchtpu.offload.host_adamw import adamw_step, clip_coef, grad_norms
from torchtpu.offload.store import HostGroup, build_group
from torchtpu.offload.templates import BlockTemplates, check_same_structure, device_instance

Batch = tuple[torch.Tensor, torch.Tensor]  # (input_ids, labels)


def causal_lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Next-token cross entropy, as Hugging Face *ForCausalLM computes it (mean, -100 ignored)."""
    return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), labels[:, 1:].flatten(),
                           ignore_index=-100)


@dataclass
class StepStats:
    """What one optimizer step cost."""

    loss: float = 0.0
    step_s: float = 0.0
    device_busy_s: float = 0.0
    h2d_bytes: int = 0
    d2h_bytes: int = 0
    tokens: int = 0
    grad_norm: float | None = None
    # (kind, tag) -> count, e.g. ("h2d", ("block", 3)) -> 2
    transfers: Counter = field(default_factory=Counter)


class OffloadEngine:
    """Train `model` with host-resident state, streaming its blocks through `device`.

    `batch`, `seq` and `micro_batches` describe the run for the pre-flight memory check,
    which runs before anything is allocated. The model's parameters become views into the
    host store, so the host model always shows the current weights (after `synchronize()`).
    """

    def __init__(self, model: nn.Module, device: torch.device | str = "cpu",
                 config: OffloadConfig | None = None, *, batch: int, seq: int,
                 micro_batches: int = 1, adapter: ModelAdapter | None = None,
                 ops: DeviceOps | None = None,
                 loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = causal_lm_loss,
                 ) -> None:
        self.cfg = cfg = config or OffloadConfig()
        self.adapter = adapter or adapter_for(model)
        self.ops = ops or device_ops_for(device)
        self.loss_fn = loss_fn
        self.adapter.check_coverage()
        blocks = self.adapter.blocks()
        layout = check_same_structure(blocks)

        host_free = cfg.host_budget
        if host_free is None:
            avail = preflight.host_available_bytes()
            # the model's current parameters are freed as the store adopts them
            host_free = None if avail is None else avail + sum(
                p.numel() * p.element_size() for p in model.parameters() if p.device.type == "cpu")
        dev_free = cfg.device_budget if cfg.device_budget is not None else \
            self.ops.available_bytes()
        self.plan = preflight.plan_memory(self.adapter, cfg, batch, seq, micro_batches,
                                          host_free, dev_free)
        preflight.check(self.plan)

        ops, wdt = self.ops, cfg.weights_dtype
        self.blocks: list[HostGroup] = [build_group(f"blocks.{i}", b, ops, wdt)
                                        for i, b in enumerate(blocks)]
        self.resident: HostGroup = build_group("resident", self.adapter.residents(), ops, wdt)
        self.templates = BlockTemplates(blocks[0], layout, ops, wdt)
        rl = self.resident.layout
        self.res_weights = ops.empty_device(rl.numel, wdt, tag=("resident", "weights"))
        self.res_grads = ops.empty_device(rl.numel, torch.float32, tag=("resident", "grads"))
        self.res, self.res_params = device_instance(self.adapter.residents(), rl,
                                                    self.res_weights, ops.device)
        # versions count submitted optimizer steps (the main thread's view, never the worker's)
        self.res_version, self.res_uploaded = 0, -1

        self.h2d_stream = ops.new_stream()
        self.d2h_stream = ops.new_stream()
        none2: list[Any] = [None, None]
        self.slot_ready, self.slot_free = list(none2), list(none2)
        self.grad_landed = list(none2)
        self.staging: list[torch.Tensor] | None = None
        self.staging_use: list[Future | None] = list(none2)
        self.version = [0] * len(self.blocks)
        self.pending: dict[Any, Future] = {}  # group key -> its optimizer step
        self.worker = ThreadPoolExecutor(max(1, cfg.host_workers), "offload-adamw")
        self.step_count = 0
        self.stats = StepStats()
        self._act_host: list[torch.Tensor] = []
        self._act_dev: list[torch.Tensor | None] = list(none2)
        self._act_saved: list[Any] = []
        ops.listeners.append(self._count)
        # clipping sums per-parameter norms in the model's order, as clip_grad_norm_ does
        self.param_order = list(model.parameters())

    # -- bookkeeping ------------------------------------------------------------------------
    def _count(self, kind: str, tag: Any, nbytes: int) -> None:
        if kind == "h2d":
            self.stats.h2d_bytes += nbytes
        elif kind == "d2h":
            self.stats.d2h_bytes += nbytes
        key = tag[:2] if isinstance(tag, tuple) else tag
        self.stats.transfers[(kind, key)] += 1

    def _event(self, stream: Any = None) -> Any:
        ev = self.ops.new_event()
        self.ops.record(ev, stream)
        return ev

    def _autocast(self) -> contextlib.AbstractContextManager:
        if self.cfg.autocast_bf16:
            return torch.autocast(self.ops.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _wait_pending(self, key: Any) -> None:
        fut = self.pending.pop(key, None)
        if fut is not None:
            fut.result()

    # -- moving weights ---------------------------------------------------------------------
    def _ensure(self, i: int, avoid: int | None = None, with_input: bool = False) -> int:
        """Have block i's current weights in a template (not slot `avoid`); return the slot.

        Copies only when no template already holds this version of block i.
        """
        t, ops = self.templates, self.ops
        key = (i, self.version[i])
        slot = next((s for s, h in enumerate(t.holding) if h == key and s != avoid), None)
        if slot is None:
            slot = 1 - avoid if avoid is not None else (0 if t.holding[0] is None or
                                                        t.holding[1] is not None else 1)
            self._wait_pending(i)  # its host weights must have their optimizer step
        if self.slot_free[slot] is not None:
            ops.wait(self.slot_free[slot], self.h2d_stream)
        if t.holding[slot] != key:
            ops.copy_h2d(t.weights[slot], self.blocks[i].weights, self.h2d_stream,
                         tag=("block", i, slot))
            t.holding[slot] = key
        if with_input:
            self._load_input(i, slot)
        self.slot_ready[slot] = self._event(self.h2d_stream)
        return slot

    def _upload_resident(self) -> None:
        if self.res_uploaded == self.res_version:
            return
        self._wait_pending("resident")
        self.ops.copy_h2d(self.res_weights, self.resident.weights, self.h2d_stream,
                          tag=("resident", "weights"))
        self.ops.wait(self._event(self.h2d_stream))
        self.res_uploaded = self.res_version

    # -- activations ------------------------------------------------------------------------
    def _save_input(self, i: int, x: torch.Tensor) -> torch.Tensor | None:
        if not self.cfg.offload_activations:
            return x
        ops = self.ops
        while len(self._act_host) <= i:
            self._act_host.append(ops.empty_host(x.numel(), x.dtype))
            self._act_saved.append(None)
        if self._act_host[i].numel() != x.numel() or self._act_host[i].dtype != x.dtype:
            self._act_host[i] = ops.empty_host(x.numel(), x.dtype)
        ops.wait(self._event(), self.d2h_stream)
        ops.copy_d2h(self._act_host[i], x.reshape(-1), self.d2h_stream, tag=("act", i))
        self._act_saved[i] = self._event(self.d2h_stream)
        self._act_shape = x.shape
        return None

    def _load_input(self, i: int, slot: int) -> None:
        """Stream block i's saved input into the activation buffer tied to `slot`."""
        if not self.cfg.offload_activations:
            return
        ops, host = self.ops, self._act_host[i]
        buf = self._act_dev[slot]
        if buf is None or buf.numel() != host.numel() or buf.dtype != host.dtype:
            buf = self._act_dev[slot] = ops.empty_device(host.numel(), host.dtype,
                                                         tag=("act", slot))
        ops.wait(self._act_saved[i], self.h2d_stream)
        ops.copy_h2d(buf, host, self.h2d_stream, tag=("act", i, slot))

    # -- gradients --------------------------------------------------------------------------
    def _grads_to_host(self, i: int, gslot: int, micro: int, last: bool) -> None:
        ops, group = self.ops, self.blocks[i]
        ops.wait(self._event(), self.d2h_stream)
        if micro == 0:
            dst = group.grads
        else:
            if self.staging is None:
                n = self.templates.layout.numel
                self.staging = [ops.empty_host(n, torch.float32) for _ in range(2)]
            if self.staging_use[gslot] is not None:
                self.staging_use[gslot].result()  # the worker still reads this buffer
            dst = self.staging[gslot]
        ops.copy_d2h(dst, self.templates.grads[gslot], self.d2h_stream, tag=("grad", i))
        landed = self.grad_landed[gslot] = self._event(self.d2h_stream)
        staging = dst if micro else None
        clip = self.cfg.max_grad_norm is not None

        def land() -> list[torch.Tensor] | None:
            ops.host_wait(landed)
            if staging is not None:
                group.grads.add_(staging)
            if last:
                if clip:
                    return grad_norms(group)
                adamw_step(group, self.cfg, self._lr)
            return None

        fut = self.worker.submit(land)
        if micro:
            self.staging_use[gslot] = fut
        if last:
            self.pending[i] = fut
            if not clip:
                self.version[i] += 1

    def _accumulate_resident(self, grads: Sequence[torch.Tensor | None]) -> None:
        for view, g in zip(self.resident.layout.views(self.res_grads), grads, strict=True):
            if g is not None:
                view.add_(g)

    # -- one micro-batch ------------------------------------------------------------------
    def _compute(self, fn: Callable[[], Any]) -> Any:
        start = self._event()
        out = fn()
        self._busy.append((start, self._event()))
        return out

    def _micro_batch(self, ids: torch.Tensor, labels: torch.Tensor, scale: float,
                     micro: int, last: bool) -> torch.Tensor:
        ops, ad, t = self.ops, self.adapter, self.templates
        n = len(self.blocks)
        self._upload_resident()
        ids = ids.to(ops.device, non_blocking=True)
        labels = labels.to(ops.device, non_blocking=True)

        with self._autocast():
            h0 = self._compute(lambda: ad.embed(self.res, ids))
        with torch.no_grad():
            ctx = ad.context(self.res, h0.detach(), ids)
        x = h0.detach()
        saved: list[torch.Tensor | None] = []
        rng: list[torch.Tensor] = []
        slot = self._ensure(0)
        for i in range(n):
            nxt = self._ensure(i + 1, avoid=slot) if i + 1 < n else None
            ops.wait(self.slot_ready[slot])
            saved.append(self._save_input(i, x))
            rng.append(ops.rng_state())
            with torch.no_grad(), self._autocast():
                x = self._compute(lambda s=slot, x=x: ad.call_block(t.modules[s], x, ctx))
            self.slot_free[slot] = self._event()
            slot = nxt

        loss, g = self._compute(lambda: self._head_backward(x.detach(), labels, scale))

        slot = self._ensure(n - 1, with_input=True)
        for i in reversed(range(n)):
            nxt = self._ensure(i - 1, avoid=slot, with_input=True) if i > 0 else None
            ops.wait(self.slot_ready[slot])
            gslot = i % 2
            if self.grad_landed[gslot] is not None:
                ops.wait(self.grad_landed[gslot])  # the grad slot's last copy-out is done
            inp = saved[i] if saved[i] is not None else \
                self._act_dev[slot].view(self._act_shape)
            g = self._compute(lambda s=slot, gs=gslot, inp=inp, g=g, i=i:
                              self._block_backward(s, gs, inp, g, rng[i], ctx))
            saved[i] = None
            self.slot_free[slot] = self._event()
            self._grads_to_host(i, gslot, micro, last)
            slot = nxt

        grads = self._compute(lambda: torch.autograd.grad(h0, self.res_params, g,
                                                          allow_unused=True))
        self._accumulate_resident(grads)
        return loss.detach()

    def _head_backward(self, x: torch.Tensor, labels: torch.Tensor,
                       scale: float) -> tuple[torch.Tensor, torch.Tensor]:
        """Loss and its gradient wrt the last block's output; resident grads accumulated.

        With the default loss and more tokens than `head_chunk_tokens`, the head runs on one
        slice of tokens at a time, each slice's backward before the next slice's logits.
        """
        chunk = self.cfg.head_chunk_tokens
        if self.loss_fn is not causal_lm_loss or chunk is None or x.shape[:2].numel() <= chunk:
            x = x.requires_grad_()
            with self._autocast():
                loss = self.loss_fn(self.adapter.head(self.res, x), labels) * scale
            grads = torch.autograd.grad(loss, [x, *self.res_params], allow_unused=True)
            self._accumulate_resident(grads[1:])
            return loss.detach(), grads[0]
        # position t predicts labels[t + 1]; the last position predicts nothing
        targets = F.pad(labels[:, 1:], (0, 1), value=-100).flatten()
        weight = scale / (targets != -100).sum().clamp(min=1)
        flat = x.flatten(0, 1)
        g = torch.empty_like(flat)
        loss = torch.zeros((), device=x.device)
        for start in range(0, flat.shape[0], chunk):
            xs = flat[start:start + chunk].unsqueeze(0).requires_grad_()
            with self._autocast():
                logits = self.adapter.head(self.res, xs)[0].float()
                part = F.cross_entropy(logits, targets[start:start + chunk], ignore_index=-100,
                                       reduction="sum") * weight
            grads = torch.autograd.grad(part, [xs, *self.res_params], allow_unused=True)
            g[start:start + chunk] = grads[0][0]
            self._accumulate_resident(grads[1:])
            loss += part.detach()
        return loss, g.view_as(x)

    def _block_backward(self, slot: int, gslot: int, inp: torch.Tensor, g: torch.Tensor,
                        rng: torch.Tensor, ctx: dict[str, Any]) -> torch.Tensor:
        t = self.templates
        x = inp.detach().requires_grad_()
        params = t.params[slot]
        with self.ops.fork_rng(rng), torch.enable_grad(), self._autocast():
            y = self.adapter.call_block(t.modules[slot], x, ctx)
        out = torch.autograd.grad(y, [x, *params], g, allow_unused=True)
        for view, gp in zip(t.layout.views(t.grads[gslot]), out[1:], strict=True):
            if gp is None:
                view.zero_()
            else:
                view.copy_(gp)
        return out[0]

    # -- one optimizer step -----------------------------------------------------------------
    def train_step(self, batches: Sequence[Batch], lr: float | None = None) -> StepStats:
        """Forward+backward every micro-batch in `batches`, then one AdamW step on all weights.

        Losses are averaged over micro-batches, as in ordinary gradient accumulation.
        """
        ops = self.ops
        self._lr = self.cfg.lr if lr is None else lr
        self.stats = StepStats()
        self._busy: list[tuple[Any, Any]] = []
        t0 = time.perf_counter()
        self.res_grads.zero_()
        total = torch.zeros((), device=ops.device)
        for k, (ids, labels) in enumerate(batches):
            last = k == len(batches) - 1
            total += self._micro_batch(ids, labels, 1.0 / len(batches), k, last)
            self.stats.tokens += ids.numel()
        self._step_resident()
        ops.synchronize()
        self.stats.loss = float(total)
        self.stats.step_s = time.perf_counter() - t0
        self.stats.device_busy_s = sum(ops.elapsed_s(a, b) for a, b in self._busy)
        self.step_count += 1
        return self.stats

    def _step_resident(self) -> None:
        """Ship the resident grads to the host and step everything still waiting (clipping)."""
        ops, group = self.ops, self.resident
        ops.wait(self._event(), self.d2h_stream)
        ops.copy_d2h(group.grads, self.res_grads, self.d2h_stream, tag=("grad", "resident"))
        landed = self._event(self.d2h_stream)
        cfg, lr = self.cfg, self._lr
        if cfg.max_grad_norm is None:
            def step_res() -> None:
                ops.host_wait(landed)
                adamw_step(group, cfg, lr)
            self.pending["resident"] = self.worker.submit(step_res)
            self.res_version += 1
            return
        # clipping: every group's norm must be known before any step (exact, not overlapped)
        ops.host_wait(landed)
        norms = dict(zip(map(id, group.params), grad_norms(group), strict=True))
        for i, g in enumerate(self.blocks):
            norms.update(zip(map(id, g.params), self.pending.pop(i).result(), strict=True))
        total, coef = clip_coef([norms[id(p)] for p in self.param_order], cfg.max_grad_norm)
        self.stats.grad_norm = float(total)
        # submitted in the order the next forward needs them, so it overlaps with them
        for key, g in [("resident", group), *enumerate(self.blocks)]:
            self.pending[key] = self.worker.submit(adamw_step, g, cfg, lr, coef)
            if key == "resident":
                self.res_version += 1
            else:
                self.version[key] += 1

    def invalidate_device_copies(self) -> None:
        """Host weights changed behind the engine's back (checkpoint load): re-upload all."""
        self.synchronize()
        self.templates.holding = [None] * len(self.templates.holding)
        self.res_uploaded = -1

    def synchronize(self) -> None:
        """Wait for the device and for every pending host optimizer step."""
        self.ops.synchronize()
        for key in list(self.pending):
            self._wait_pending(key)

    def close(self) -> None:
        self.synchronize()
        self.worker.shutdown()
