"""``torch.Generator(device="tpu")``: a generator tpu ops draw from.

PyTorch makes a device's generator through C++ hooks (``getNewGenerator``) a Python backend
cannot register. A tpu generator is a CPU generator underneath (its seed, state and
``get_state``/``set_state`` are a CPU generator's, so PyTorch's C++ takes it wherever a
generator goes) whose ``device`` says tpu. A tpu op keys its draw by two words taken from it
(ops/random.py): reseeding it repeats the draw, and the default stream is left alone.
"""

from __future__ import annotations

import torch

_CGenerator = torch._C.Generator


class TpuGenerator(_CGenerator):
    """A generator on a tpu device."""

    def __new__(cls, device: torch.device):
        return super().__new__(cls)  # (no device: a CPU generator's state)

    def __init__(self, device: torch.device):
        super().__init__()
        self._device = device

    @property
    def device(self) -> torch.device:
        return self._device

    def __reduce__(self):
        # (pickle, deepcopy) PyTorch's reduce names a CPU generator: made again as this one.
        _, _, state = super().__reduce__()
        return torch.Generator, (self._device,), state

    def __repr__(self) -> str:
        return f"<torch.Generator object on {self._device}>"


class _GeneratorType(type(_CGenerator)):
    """``torch.Generator``'s class: it makes a tpu generator for a tpu device and PyTorch's
    own otherwise, and every generator is an instance of it, as of PyTorch's."""

    def __call__(cls, device: torch.device | str | int = "cpu") -> _CGenerator:
        if cls is not Generator:  # a user's subclass of torch.Generator: made as it says
            return super().__call__(device)
        place = torch.device(device)
        if place.type != "tpu":
            return _CGenerator(device)
        if place.index is None:
            place = torch.device("tpu", torch.tpu.current_device())
        return TpuGenerator(place)

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, _CGenerator)

    def __subclasscheck__(cls, sub) -> bool:
        return issubclass(sub, _CGenerator)


class Generator(_CGenerator, metaclass=_GeneratorType):
    __doc__ = _CGenerator.__doc__


def install() -> None:
    """Make ``torch.Generator`` the class above (code that looks it up when it runs)."""
    Generator.__module__, Generator.__qualname__ = "torch", "Generator"
    torch.Generator = Generator
