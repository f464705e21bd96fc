"""pickle, torch.save and copy.copy of tpu tensors keep what they keep on CPU: Python
attributes, Parameter-ness, and (copy.copy) the values' identity."""

from __future__ import annotations

import copy
import io
import pickle

import pytest
import torch
from conftest import TPU


def _saved_and_loaded(obj, **load_kwargs):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, **load_kwargs)


@pytest.mark.parametrize("parameter", [False, True], ids=["tensor", "parameter"])
@pytest.mark.parametrize("how", ["pickle", "save", "save_weights_only", "copy"])
def test_python_attributes_survive(how, parameter):
    def made(device):
        t = torch.ones(2, device=device)
        t = torch.nn.Parameter(t) if parameter else t
        t.note = {"kind": "scale"}
        return t

    round_trip = {"pickle": lambda t: pickle.loads(pickle.dumps(t)),
                  "save": lambda t: _saved_and_loaded(t, weights_only=False),
                  "save_weights_only": lambda t: _saved_and_loaded(t),
                  "copy": copy.copy}[how]
    for device in ("cpu", TPU):
        back = round_trip(made(device))
        assert back.note == {"kind": "scale"}, device
        assert isinstance(back, torch.nn.Parameter) == parameter
        assert back.device.type == torch.device(device).type


def test_copy_copy_aliases_the_values():
    for device in ("cpu", TPU):
        x = torch.arange(3.0, device=device, requires_grad=True)
        alias = copy.copy(x)
        with torch.no_grad():
            alias.add_(1)
        assert x.tolist() == [1.0, 2.0, 3.0] and alias.requires_grad and alias.is_leaf


class _NotAllowed:  # torch.load(weights_only=True) refuses it, halfway through the file
    pass


def test_a_failed_load_leaves_no_map_location_behind():
    buffer = io.BytesIO()
    torch.save({"x": torch.ones(2), "refused": _NotAllowed()}, buffer)
    buffer.seek(0)
    with pytest.raises(pickle.UnpicklingError):
        torch.load(buffer, map_location="cpu")
    assert pickle.loads(pickle.dumps(torch.arange(3.0, device=TPU))).device.type == "tpu"
