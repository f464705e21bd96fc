"""torch.save / torch.load with tpu tensors.

A tpu tensor has no storage PyTorch can write: it pickles as its CPU copy plus its device
(``Tensor.__reduce_ex__``'s path for storage-less backends), which torch.load accepts with
``weights_only=True`` and moves wherever ``map_location`` says.

``map_location='tpu'`` asks PyTorch to build storages on the device, which a storage-less
backend cannot do (PyTorch's default would allocate one and crash). Storages stay on the
CPU instead: tensors saved from tpu still come back on tpu, tensors saved from the CPU come
back on the CPU, with a warning that says so.
"""

from __future__ import annotations

import warnings

import torch


def _tag(storage) -> str | None:
    return None  # our tensors never reach PyTorch's storage writer


def _restore(storage, location: str):
    if not location.startswith("tpu"):
        return None
    warnings.warn(
        "torchtpu: torch.load(map_location='tpu') restores storages on the CPU (a tpu tensor "
        "has no storage): tensors saved from tpu come back on tpu, tensors saved from the CPU "
        "stay on the CPU; move those with .to('tpu') or model.load_state_dict(...)",
        stacklevel=2,
    )
    return storage


def install() -> None:
    # Ahead of PyTorch's own privateuse1 restore (priority 20).
    torch.serialization.register_package(15, _tag, _restore)
