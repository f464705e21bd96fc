"""View ops: the result aliases its base's storage with PyTorch's own geometry.

PyTorch's meta kernels give each view's size, stride and storage offset (and PyTorch's own
error for an invalid view) at about a microsecond; the value comes from the view's lowering
rule applied to the base's value, or, for views without one, a strided gather.
"""

from __future__ import annotations

import torch

from ..ops.registry import LOWERINGS
from ..ops.views import gather_view
from ..tensor import TpuTensor, make_view, wrap
from . import strict
from .values import call_unwrapped


def _meta_base(t: TpuTensor) -> torch.Tensor:
    storage = t._storage.value
    meta = torch.empty(storage.size, dtype=t.dtype, device="meta")
    return meta.as_strided(t.shape, t.stride(), t.storage_offset())


def _meta_arg(x):
    if isinstance(x, TpuTensor):
        return _meta_base(x)
    if isinstance(x, torch.Tensor):
        return x.to("meta")
    return x


def handler(func):
    rule = LOWERINGS.get(func)
    run = strict.compile_rule(rule) if rule is not None else None

    def view(args, kwargs):
        base = args[0]
        meta_base = _meta_arg(base)
        meta = func(meta_base, *[_meta_arg(a) for a in args[1:]], **kwargs)
        storage = base._storage
        if run is not None:
            value = call_unwrapped(run, args, kwargs)
        elif isinstance(meta, torch.Tensor):
            value = gather_view(storage.value, _geometry(meta))
        else:
            value = [gather_view(storage.value, _geometry(m)) for m in meta]
        if isinstance(meta, torch.Tensor):
            if meta.dtype != base.dtype or not torch._C._is_alias_of(meta, meta_base):
                # A view that reinterprets dtype (view_as_real, view(dtype)) is a copy here,
                # as is what an aliasing-if-possible op returned as a copy.
                return wrap(value)
            return make_view(storage, value, *_geometry(meta))
        return [make_view(storage, v, *_geometry(m)) for v, m in zip(value, meta)]

    return view


def _geometry(m: torch.Tensor) -> tuple:
    return tuple(m.shape), tuple(m.stride()), m.storage_offset()

