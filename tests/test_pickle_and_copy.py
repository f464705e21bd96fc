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


@pytest.mark.parametrize("device", ["cpu", TPU])
def test_deepcopy_of_an_unmaterialized_lazy_module(device):
    # PyTorch's copy of a placeholder passes its device by position; a copy of one aimed at
    # tpu is created on tpu at its first call, as the original would be.
    m = torch.nn.Sequential(torch.nn.LazyConv1d(4, 3, device=device),
                            torch.nn.LazyLinear(2, device=device))
    m2 = copy.deepcopy(m)
    assert isinstance(m2[0].weight, torch.nn.parameter.UninitializedParameter)
    y = m2(torch.randn(2, 3, 8, device=device))
    assert y.shape == (2, 4, 2) and m2[0].weight.device == torch.device(device)
    assert m2[1].weight.device == torch.device(device)


def test_a_tpu_tensors_class_pickles_by_reference_as_cpus_does():
    cls = type(torch.zeros(1).to(TPU))
    assert pickle.loads(pickle.dumps(cls)) is cls
    # a module-level registry of classes (a dataclass field, a multiprocessing spec)
    assert pickle.loads(pickle.dumps({"kind": cls, "cpu": torch.Tensor})) == {
        "kind": cls, "cpu": torch.Tensor}
