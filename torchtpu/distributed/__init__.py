"""``torch.distributed`` on tpu: PyTorch's own APIs (DDP, FSDP2, DTensor).

``dist.init_process_group("tpu")`` (or ``"gloo"``; with no backend named, tpu tensors get
"tpu") makes a group whose collectives on tpu tensors run through gloo on host copies
(``collectives.py``). One process per device, launched with torchrun: ``tpu:{LOCAL_RANK}``
names the process's device.
"""

from __future__ import annotations

import torch


def _gloo(store, rank: int, world_size: int, timeout):
    from torch.distributed import ProcessGroupGloo

    return ProcessGroupGloo(store, rank, world_size, timeout)


_resize_storage = torch.UntypedStorage.resize_


def _resize_keeping_device_buffers(storage, size):
    """FSDP2 frees an unsharded parameter with ``untyped_storage().resize_(0)`` and resizes it
    back before the next all-gather writes it. A tpu tensor's storage holds no memory (XLA
    holds its buffer), so resizing one changes nothing: the buffer stays between forward and
    backward, where cuda's would be freed. Any other size is refused: the storage's size is
    PyTorch's C++ bookkeeping, which a Python backend cannot change under every tensor
    viewing it (``tensor.resize_`` works)."""
    if storage.device.type != "tpu":
        return _resize_storage(storage, size)
    if size not in (0, storage.nbytes()):
        raise NotImplementedError(
            f"torchtpu: resize_({size}) of a tpu storage of {storage.nbytes()} bytes is not "
            "supported (only 0 and its own size, as FSDP frees and restores a parameter); "
            "resize a tensor with tensor.resize_ instead")
    return storage


def _refuse_unused_parameter_search(ddp_init):
    def __init__(self, module, *args, **kwargs):
        ddp_init(self, module, *args, **kwargs)
        on_tpu = any(p.device.type == "tpu" for p in module.parameters())
        if on_tpu and (self.find_unused_parameters or self.static_graph):
            option = "find_unused_parameters" if self.find_unused_parameters else "static_graph"
            raise RuntimeError(
                f"torchtpu: DistributedDataParallel({option}=True) on tpu is not supported: "
                "its reducer copies the used-parameter map through pinned host memory, which "
                "PyTorch gives only to C++ device backends (it fails at the first backward). "
                "Pass find_unused_parameters=False and make every parameter take part in the "
                "loss (Hugging Face Trainer: ddp_find_unused_parameters=False).")

    return __init__


def register() -> None:
    """Run tpu tensors' collectives and name the "tpu" backend; idempotent."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from ..eager import special
    from . import collectives

    special.HANDLERS.update(collectives.handlers())
    torch.UntypedStorage.resize_ = _resize_keeping_device_buffers
    if not hasattr(DDP.__init__, "_torchtpu"):
        DDP.__init__ = _refuse_unused_parameter_search(DDP.__init__)
        DDP.__init__._torchtpu = True
    if "tpu" not in dist.Backend.backend_list:
        dist.Backend.register_backend("tpu", _gloo, devices=["cpu", "tpu"])
