"""Device-side module instances whose parameters are views into flat device buffers.

Two block templates serve every block: binding block i to a template is one host->device copy
into that template's flat buffer. The resident part (embedding, norm, head) gets one instance
that stays on the device. Instances are built from a skeleton copy whose parameters are on
the meta device, so making them never copies a block's data.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

from torchtpu.offload.device_ops import DeviceOps
from torchtpu.offload.store import FlatLayout


def device_instance(module: nn.Module, layout: FlatLayout, flat: torch.Tensor,
                    device: torch.device) -> tuple[nn.Module, list[nn.Parameter]]:
    """A copy of `module` on `device`: parameters view `flat`, buffers are copied over."""
    memo: dict[int, Any] = {id(p): nn.Parameter(torch.empty_like(p, device="meta"))
                            for p in module.parameters()}
    inst = copy.deepcopy(module, memo)
    params = layout.bind(inst, flat, requires_grad=True)
    for sub in inst.modules():
        for name, buf in sub._buffers.items():
            if buf is not None:
                sub._buffers[name] = buf.to(device)
    return inst, params


class BlockTemplates:
    """Two block instances, plus which (block, version) each currently holds."""

    def __init__(self, block: nn.Module, layout: FlatLayout, ops: DeviceOps,
                 dtype: torch.dtype, count: int = 2) -> None:
        self.layout = layout
        self.weights = [ops.empty_device(layout.numel, dtype, tag=("slot", s))
                        for s in range(count)]
        # gradients leave the device in fp32 whatever the weights' dtype
        self.grads = [ops.empty_device(layout.numel, torch.float32, tag=("grad", s))
                      for s in range(count)]
        self.modules: list[nn.Module] = []
        self.params: list[list[nn.Parameter]] = []
        for s in range(count):
            inst, params = device_instance(block, layout, self.weights[s], ops.device)
            self.modules.append(inst)
            self.params.append(params)
        self.holding: list[tuple[int, int] | None] = [None] * count


def check_same_structure(blocks: list[nn.Module]) -> FlatLayout:
    """All blocks must share one layout (one template serves them all); return it."""
    layout = FlatLayout.of(blocks[0])
    for i, b in enumerate(blocks[1:], start=1):
        if FlatLayout.of(b).signature() != layout.signature():
            raise ValueError(f"offload: block {i} differs in structure from block 0; "
                             "heterogeneous blocks are not supported")
    for name, buf in blocks[0].named_buffers():
        for i, b in enumerate(blocks[1:], start=1):
            if not torch.equal(b.get_buffer(name), buf):
                raise ValueError(f"offload: buffer {name!r} of block {i} differs from block 0; "
                                 "per-block buffers are not streamed")
    return layout
