"""``torch.tpu.amp``: ``autocast`` and ``GradScaler`` shaped like ``torch.cuda.amp``'s, for
scripts written against it. Both are torch.amp's on device 'tpu'."""

from __future__ import annotations

import functools

import torch


class autocast(torch.amp.autocast):  # noqa: N801 (torch.cuda.amp's name)
    def __init__(self, enabled: bool = True, dtype: torch.dtype | None = None,
                 cache_enabled: bool = True):
        super().__init__("tpu", dtype=dtype or torch.get_autocast_dtype("tpu"),
                         enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(torch.amp.GradScaler):
    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000,
                 enabled: bool = True):
        super().__init__("tpu", init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval,
                         enabled=enabled)


custom_fwd = functools.partial(torch.amp.custom_fwd, device_type="tpu")
custom_bwd = functools.partial(torch.amp.custom_bwd, device_type="tpu")
