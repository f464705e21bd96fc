"""torch.save / torch.load with tpu tensors.

A tpu tensor has no storage PyTorch can write: it pickles as its CPU copy plus its device
(``Tensor.__reduce_ex__``'s path for storage-less backends), which torch.load accepts with
``weights_only=True`` and moves wherever ``map_location`` says.

``map_location='tpu'`` asks PyTorch to build storages on the device, which a storage-less
backend cannot do (PyTorch's default would allocate one and crash). Storages stay on the
CPU instead: tensors saved from tpu still come back on tpu, tensors saved from the CPU come
back on the CPU, with a warning that says so. TorchScript's save and load go through the CPU.
"""

from __future__ import annotations

import copy
import functools
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


_rebuild_location = torch._utils._get_restore_location


def _restore_location(device: str):
    """Where torch.load puts a tensor saved from tpu, with a callable ``map_location`` too.

    PyTorch refuses a callable for storage-less devices; cuda's idiom
    ``map_location=lambda storage, loc: storage`` (keep on the CPU) is common. The callable
    gets a CPU storage and the saved location, and where it returns that storage is where
    the tensor goes (None: where it was saved).
    """
    where = torch.serialization._serialization_tls.map_location
    if where is None or isinstance(where, (dict, str, torch.device)):
        return _rebuild_location(device)
    moved = where(torch.UntypedStorage(0), device)
    return device if moved is None else moved.device


_storage_data_ptr = torch._C.StorageBase.data_ptr


def _data_ptr(storage) -> int:
    # A tpu storage holds no host memory; the stand-in address its tensor gave it
    # (TpuTensor.untyped_storage) is returned, so code that finds tensors sharing a storage
    # by pointer (safetensors, transformers' save_pretrained) works as on cuda.
    if storage.device.type == "tpu":
        return getattr(storage, "_tpu_address", None) or storage._cdata
    return _storage_data_ptr(storage)


def _names_tpu(device) -> bool:
    try:
        return isinstance(device, (str, torch.device)) and torch.device(device).type == "tpu"
    except RuntimeError:  # not a device name: safetensors says so
        return False


def _load_file_onto_tpu(load_file):
    """safetensors' ``load_file(path, device=...)``: its device parser (Rust) knows cuda's
    names, not 'tpu'. The file is read on the CPU and moved, as a cuda load is read there."""

    @functools.wraps(load_file)
    def load(filename, device="cpu", **kwargs):
        if _names_tpu(device):
            return {k: v.to(device) for k, v in load_file(filename, **kwargs).items()}
        return load_file(filename, device, **kwargs)

    load._torchtpu = True
    return load


def _jit_load_onto_tpu(jit_load):
    """``torch.jit.load(f, map_location='tpu')``: TorchScript's C++ loader would build
    storages on the device, which a storage-less backend cannot hold (the tensors came back
    empty). It loads on the CPU and the module moves, as ``torch.load`` does."""

    @functools.wraps(jit_load)
    def load(f, map_location=None, *args, **kwargs):
        if _names_tpu(map_location):
            return jit_load(f, "cpu", *args, **kwargs).to(map_location)
        return jit_load(f, map_location, *args, **kwargs)

    load._torchtpu = True
    return load


def _jit_save_from_tpu(jit_save):
    """``torch.jit.save`` of a module holding tpu tensors: TorchScript's writer reads each
    storage's bytes, which a tpu tensor keeps on the device. A copy moved to the CPU is
    written; it loads on the CPU (``map_location='tpu'`` brings it back)."""

    @functools.wraps(jit_save)
    def save(m, f, *args, **kwargs):
        tensors = [*m.parameters(), *m.buffers()] if hasattr(m, "parameters") else []
        if any(t.device.type == "tpu" for t in tensors):
            m = copy.deepcopy(m).to("cpu")
        return jit_save(m, f, *args, **kwargs)

    save._torchtpu = True
    return save


def install() -> None:
    # Ahead of PyTorch's own privateuse1 restore (priority 20).
    torch.serialization.register_package(15, _tag, _restore)
    torch._utils._get_restore_location = _restore_location
    torch.UntypedStorage.data_ptr = _data_ptr
    if not getattr(torch.jit.load, "_torchtpu", False):
        torch.jit.load = _jit_load_onto_tpu(torch.jit.load)
        torch.jit.save = _jit_save_from_tpu(torch.jit.save)
    try:
        import safetensors.torch
    except ImportError:
        return
    if not getattr(safetensors.torch.load_file, "_torchtpu", False):
        safetensors.torch.load_file = _load_file_onto_tpu(safetensors.torch.load_file)
