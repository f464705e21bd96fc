"""A tpu tensor's storage object (``t.untyped_storage()``, ``t.storage()``): its stand-in
address, and copies out of and into it."""

from __future__ import annotations

import torch

_storage_data_ptr = torch._C.StorageBase.data_ptr
_storage_copy_ = torch._C.StorageBase.copy_


def _data_ptr(storage) -> int:
    # A tpu storage holds no host memory; the identity of the storage its tensor views
    # (TpuTensor.untyped_storage) is returned, as TpuTensor.data_ptr does, so code that finds
    # tensors sharing a storage by pointer (safetensors, save_pretrained) works as on cuda.
    if storage.device.type == "tpu":
        shared = getattr(storage, "_tpu_storage", None)
        return storage._cdata if shared is None else id(shared)
    return _storage_data_ptr(storage)


def _copy_(storage, src, non_blocking: bool | None = None):
    """``storage.copy_(src)``, as PyTorch's kernel does it (byte views of both, one tensor
    copy), where either is a tpu storage: its bytes are on the device, which the C
    function refuses to read (``storage.cpu()`` copies this way)."""
    if storage.device.type != "tpu" and src.device.type != "tpu":
        return _storage_copy_(storage, src, non_blocking)
    if storage.nbytes() != src.nbytes():
        raise RuntimeError(f"size does not match, self was {storage.nbytes()} bytes but src "
                           f"was {src.nbytes()} bytes")
    dst_bytes = torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage)
    src_bytes = torch.empty(0, dtype=torch.uint8, device=src.device).set_(src)
    dst_bytes.copy_(src_bytes, non_blocking=bool(non_blocking))
    return storage


def _listed_on_the_host(tolist):
    # PyTorch lists a storage element by element (one device read each): a tpu storage is
    # copied to the host once instead.
    def listed(storage) -> list:
        return storage.cpu().tolist() if storage.device.type == "tpu" else tolist(storage)

    listed._torchtpu = True
    return listed


def install() -> None:
    for cls in (torch.UntypedStorage, torch.TypedStorage):
        if not getattr(cls.tolist, "_torchtpu", False):
            cls.tolist = _listed_on_the_host(cls.tolist)
    torch.UntypedStorage.data_ptr = _data_ptr
    torch.UntypedStorage.copy_ = _copy_
