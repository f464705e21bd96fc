"""Storage objects on tpu (``t.untyped_storage()``, ``t.storage()``, ``storage.tpu()``,
``torch.UntypedStorage(n, device="tpu")``): their stand-in address, making one, and copies
and fills of their bytes."""

from __future__ import annotations

import torch
from torch.utils.backend_registration import _normalization_device

from .serialization import _names_tpu
from .tensor import storage_byte_offset, whole_storage

_storage_data_ptr = torch._C.StorageBase.data_ptr
_storage_copy_ = torch._C.StorageBase.copy_
_new_storage = torch._C.StorageBase.__new__
_storage_fill_ = torch._C.StorageBase.fill_
_storage_write_file = torch._C.StorageBase._write_file
_storage_set_from_file = torch._C.StorageBase._set_from_file


def _data_ptr(storage) -> int:
    # A tpu storage holds no host memory; the identity of the storage its tensor views
    # (TpuTensor.untyped_storage) is returned, as TpuTensor.data_ptr does, so code that finds
    # tensors sharing a storage by pointer (safetensors, save_pretrained) works as on cuda.
    if storage.device.type == "tpu":
        shared = getattr(storage, "_tpu_storage", None)
        return storage._cdata if shared is None else id(shared) + storage_byte_offset(storage)
    return _storage_data_ptr(storage)


def _sliced(getitem):
    # PyTorch's C function makes a slice's storage object (the bounds and step checks, its
    # size) around a device pointer; a tpu storage's bytes are the tensor storage it views,
    # so the slice records that and where it starts, for reads and writes through it.
    def getitem_(storage, idx):
        part = getitem(storage, idx)
        if storage.device.type == "tpu" and isinstance(idx, slice):
            shared = getattr(storage, "_tpu_storage", None)
            if shared is not None:
                part._tpu_storage = shared
                part._tpu_whole = whole_storage(storage)
                part._tpu_offset = (storage_byte_offset(storage)
                                    + range(storage.nbytes())[idx].start)
        return part

    getitem_._torchtpu = True
    return getitem_


def _copy_(storage, src, non_blocking: bool | None = None):
    """``storage.copy_(src)``, as PyTorch's kernel does it (byte views of both, one tensor
    copy), where either is a tpu storage: its bytes are on the device, which the C
    function refuses to read (``storage.cpu()`` copies this way)."""
    if storage.device.type != "tpu" and src.device.type != "tpu":
        return _storage_copy_(storage, src, non_blocking)
    if storage.nbytes() != src.nbytes():
        raise RuntimeError(f"size does not match, self was {storage.nbytes()} bytes but src "
                           f"was {src.nbytes()} bytes")
    _bytes(storage).copy_(_bytes(src), non_blocking=bool(non_blocking))
    return storage


def _bytes(storage) -> torch.Tensor:
    """A byte tensor viewing the whole storage (a tpu one's reads and writes go through it)."""
    return torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage)


def _fill_(storage, value):
    """``storage.fill_(value)`` of a tpu storage: each byte, through a byte tensor viewing it
    (the C function refuses a storage with no host pointer)."""
    if storage.device.type != "tpu":
        return _storage_fill_(storage, value)
    byte = torch.empty(1, dtype=torch.uint8)
    _storage_fill_(byte.untyped_storage(), value)  # CPU's check and conversion (300 -> 44)
    _bytes(storage).fill_(byte.item())
    return storage


def _write_file(storage, *args):
    """The bytes of a storage into a file, as the legacy torch.save and a TypedStorage's
    pickle write them: a tpu storage's from a host copy, as cuda's C++ copies its own (the C
    function refuses a storage with no host pointer)."""
    return _storage_write_file(storage.cpu() if storage.device.type == "tpu" else storage, *args)


def _set_from_file(storage, f, offset, *args):
    """A storage's bytes read from a file, as the legacy torch.load reads each one after the
    pickle (its ``map_location=lambda s, loc: s.tpu()`` made tpu storages first): a tpu
    storage's are read on the host and copied in, as cuda's C++ does through a tensor this
    backend cannot be handed (it crashed)."""
    if storage.device.type != "tpu":
        return _storage_set_from_file(storage, f, offset, *args)
    host = torch.UntypedStorage(storage.nbytes())
    _storage_set_from_file(host, f, offset, *args)
    return storage.copy_(host)


def _listed_on_the_host(tolist):
    # PyTorch lists a storage element by element (one device read each): a tpu storage is
    # copied to the host once instead.
    def listed(storage) -> list:
        return storage.cpu().tolist() if storage.device.type == "tpu" else tolist(storage)

    listed._torchtpu = True
    return listed


def _to_tpu(storage, device=None, non_blocking: bool = False):
    """``storage.tpu()``: a tpu storage holding a copy of its bytes, as ``storage.cuda()``
    (PyTorch's generated method allocates through a device allocator, which a Python
    backend has not: the copy is a tpu byte tensor's storage)."""
    index = _normalization_device("tpu", device)
    if storage.device.type == "tpu" and storage.get_device() == index:
        return storage
    if storage.is_sparse:
        raise RuntimeError("Can not support a sparse storage move to tpu backend")
    moved = torch.empty(storage.nbytes(), dtype=torch.uint8, device=torch.device("tpu", index))
    return moved.untyped_storage().copy_(storage, non_blocking)


def _storage_new(cls, *args, **kwargs):
    """``torch.UntypedStorage(n or a byte sequence, device='tpu')`` (and so
    ``storage.to('tpu')``, a tpu storage's ``clone()``): made on the CPU as asked, then moved
    (PyTorch's C++ constructor would use an allocator this backend has not: a crash)."""
    device = kwargs.get("device")
    if device is None or not _names_tpu(device):
        return _new_storage(cls, *args, **kwargs)
    return _to_tpu(_new_storage(cls, *args, **{**kwargs, "device": "cpu"}), device)


def install() -> None:
    if not hasattr(torch.UntypedStorage, "is_tpu"):
        # is_tpu, and TypedStorage.tpu over the untyped storage's
        torch.utils.backend_registration._generate_storage_methods_for_privateuse1_backend("tpu")
        torch.storage._StorageBase.tpu = _to_tpu
    torch.UntypedStorage.__new__ = _storage_new
    for cls in (torch.UntypedStorage, torch.TypedStorage):
        if not getattr(cls.tolist, "_torchtpu", False):
            cls.tolist = _listed_on_the_host(cls.tolist)
    torch.UntypedStorage.data_ptr = _data_ptr
    if not getattr(torch.UntypedStorage.__getitem__, "_torchtpu", False):
        torch.UntypedStorage.__getitem__ = _sliced(torch.UntypedStorage.__getitem__)
    torch.UntypedStorage.copy_ = _copy_
    torch.UntypedStorage.fill_ = _fill_
    torch.UntypedStorage._write_file = _write_file
    torch.UntypedStorage._set_from_file = _set_from_file
