"""Host-resident home of the model: per group one flat buffer each for weights, grads, moments.

A *group* is one transformer block, or the resident part (embedding, final norm, head). The
model's own parameters are re-pointed to views of the weights buffer, so the host model always
shows the trained weights (export and inspection need no copy) and its old storage is freed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from torchtpu.offload.device_ops import DeviceOps


@dataclass(frozen=True)
class ParamSlot:
    """One parameter's place in a flat buffer; `names` holds every alias (tied weights)."""

    names: tuple[str, ...]
    shape: torch.Size
    offset: int
    numel: int


@dataclass(frozen=True)
class FlatLayout:
    """Where each parameter of a module lives in a flat buffer."""

    slots: tuple[ParamSlot, ...]
    numel: int

    @classmethod
    def of(cls, module: nn.Module) -> FlatLayout:
        by_id: dict[int, list] = {}
        order: list[int] = []
        for name, p in module.named_parameters(remove_duplicate=False):
            if id(p) not in by_id:
                by_id[id(p)] = [p, []]
                order.append(id(p))
            by_id[id(p)][1].append(name)
        slots, offset = [], 0
        for key in order:
            p, names = by_id[key]
            slots.append(ParamSlot(tuple(names), p.shape, offset, p.numel()))
            offset += p.numel()
        return cls(tuple(slots), offset)

    def signature(self) -> tuple:
        return tuple((s.names, tuple(s.shape)) for s in self.slots)

    def views(self, flat: torch.Tensor) -> list[torch.Tensor]:
        return [flat[s.offset:s.offset + s.numel].view(s.shape) for s in self.slots]

    def gather(self, module: nn.Module, flat: torch.Tensor) -> None:
        """Copy the module's current parameter values into `flat`."""
        params = dict(module.named_parameters(remove_duplicate=False))
        with torch.no_grad():
            for s, view in zip(self.slots, self.views(flat), strict=True):
                view.copy_(params[s.names[0]])

    def bind(self, module: nn.Module, flat: torch.Tensor,
             requires_grad: bool) -> list[nn.Parameter]:
        """Replace the module's parameters by Parameters viewing `flat`; aliases stay tied."""
        params = []
        for s, view in zip(self.slots, self.views(flat), strict=True):
            p = nn.Parameter(view, requires_grad=requires_grad)
            for name in s.names:
                owner, _, leaf = name.rpartition(".")
                module.get_submodule(owner)._parameters[leaf] = p
            params.append(p)
        return params


@dataclass
class HostGroup:
    """One group's host state. `step` counts the optimizer steps taken on it."""

    name: str
    layout: FlatLayout
    weights: torch.Tensor
    grads: torch.Tensor
    exp_avg: torch.Tensor
    exp_avg_sq: torch.Tensor
    step: int = 0
    params: list[nn.Parameter] = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size()
                   for t in (self.weights, self.grads, self.exp_avg, self.exp_avg_sq))


def build_group(name: str, module: nn.Module, ops: DeviceOps,
                weights_dtype: torch.dtype) -> HostGroup:
    """Move `module`'s parameters into a new host group (allocating one group at a time keeps
    the extra host memory during construction at one block)."""
    layout = FlatLayout.of(module)
    n = layout.numel
    weights = ops.empty_host(n, weights_dtype)
    layout.gather(module, weights)
    grads = ops.empty_host(n, torch.float32)
    exp_avg = ops.empty_host(n, torch.float32)
    exp_avg_sq = ops.empty_host(n, torch.float32)
    for t in (grads, exp_avg, exp_avg_sq):
        t.zero_()
    params = layout.bind(module, weights, requires_grad=True)
    return HostGroup(name, layout, weights, grads, exp_avg, exp_avg_sq, params=params)
