"""Instrumented transfers: at most two blocks' weights are ever on the device."""

from __future__ import annotations

from offload_testlib import make_steps, tiny_hf_llama

from torchtpu.offload.config import OffloadConfig
from torchtpu.offload.device_ops import DeviceOps
from torchtpu.offload.engine import OffloadEngine


class Recorder:
    """Replays the transfer log into 'which block does each device slot hold'."""

    def __init__(self) -> None:
        self.slots: dict[int, int] = {}
        self.max_resident = 0
        self.block_h2d: dict[int, int] = {}
        self.device_bytes = 0

    def __call__(self, kind, tag, nbytes) -> None:
        if kind == "alloc":
            self.device_bytes += nbytes
        elif kind == "h2d" and tag[0] == "block":
            _, block, slot = tag
            self.slots[slot] = block
            self.block_h2d[block] = self.block_h2d.get(block, 0) + 1
            self.max_resident = max(self.max_resident, len(set(self.slots.values())))


def test_at_most_two_blocks_resident_under_tiny_budget():
    n = 16
    model = tiny_hf_llama(layers=n)
    full_state = sum(p.numel() for p in model.parameters()) * 16  # weights+grads+2 moments
    budget = full_state // 10
    ops = DeviceOps("cpu")
    rec = Recorder()
    ops.listeners.append(rec)
    cfg = OffloadConfig(device_budget=budget, max_grad_norm=1.0)
    steps = make_steps(2, 2, batch=1, seq=8)
    eng = OffloadEngine(model, "cpu", cfg, batch=1, seq=8, micro_batches=2, ops=ops)
    for mbs in steps:
        stats = eng.train_step(mbs)
    eng.synchronize()

    assert full_state >= 10 * budget
    assert eng.plan.device_total <= budget
    # everything the engine put on the device: two block slots, two grad slots, the residents
    assert rec.device_bytes <= budget
    block_bytes = eng.blocks[0].weights.numel() * 4
    assert rec.device_bytes < 5 * block_bytes + eng.resident.weights.numel() * 8
    # the engine kept no block anywhere but in the two slots
    assert set(rec.slots) == {0, 1}
    assert rec.max_resident == 2
    # per micro-batch a block crosses at most twice; the two blocks still resident at each
    # turn of the sweep are not sent again
    per_step = {b: n / len(steps) for b, n in rec.block_h2d.items()}
    assert all(n <= 2 * 2 for n in per_step.values())
    assert per_step[n - 1] == 2 and per_step[n - 2] == 2  # forward of each micro-batch only
    assert per_step[0] == 3 and per_step[1] == 3  # + the backward of the last micro-batch
    # 2 micro-batches x (forward + backward) x n blocks, less the 6 reused at the 3 turns
    assert sum(per_step.values()) == 4 * n - 6
    assert all(per_step[b] == 4 for b in range(2, n - 2))
    assert stats.transfers[("d2h", ("grad", 3))] == 2  # each block's grads leave once per micro
