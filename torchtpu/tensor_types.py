"""``torch.tpu.FloatTensor`` and its kin: cuda's legacy tensor types (``torch.cuda.FloatTensor``)
for tpu. PyTorch makes them in C++ for CPU and cuda only."""

from __future__ import annotations

import torch

# The CPU types (torch.FloatTensor...), whose dtypes ours take
_NAMES = ("FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor",
          "IntTensor", "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor")


class _TensorType(type):
    """A legacy type: its instances are the tpu tensors of its dtype, and calling it makes one
    as the CPU type makes one (``FloatTensor(2, 3)``, ``FloatTensor([1, 2])``), on tpu."""

    def __instancecheck__(cls, obj) -> bool:
        return (isinstance(obj, torch.Tensor) and obj.device.type == "tpu"
                and obj.dtype == cls.dtype and obj.layout == torch.strided)

    def __call__(cls, *args, device=None, **kwargs) -> torch.Tensor:
        device = torch.device("tpu" if device is None else device)
        if args and isinstance(args[0], torch.Tensor):
            other = args[0]
            if not isinstance(other, cls):  # the legacy constructor aliases, never converts
                raise TypeError(f"expected {cls} (got {other.type()})")
            return other
        return getattr(torch, cls.__name__)(*args, **kwargs).to(device)

    def __repr__(cls) -> str:
        return f"<class 'torch.tpu.{cls.__name__}'>"


TYPES = {name: _TensorType(name, (), {"dtype": getattr(torch, name).dtype, "is_cuda": False,
                                      "is_sparse": False, "__module__": "torch.tpu"})
         for name in _NAMES}

_type = torch.Tensor.type


def _type_taking_tpu_types(self, dtype=None, non_blocking: bool = False, **kwargs):
    """``t.type(torch.tpu.FloatTensor)``: PyTorch's ``type`` takes its own type objects or
    their names; ours are named."""
    if isinstance(dtype, _TensorType):
        dtype = f"torch.tpu.{dtype.__name__}"
    if dtype is None:
        return _type(self)
    return _type(self, dtype, non_blocking, **kwargs)


def install(module) -> None:
    for name, cls in TYPES.items():
        setattr(module, name, cls)
    if torch.Tensor.type is _type:
        torch.Tensor.type = _type_taking_tpu_types
