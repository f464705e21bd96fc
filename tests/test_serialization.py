"""torch.save / torch.load of tpu tensors in the forms CPU's and cuda's load as they were
saved: the legacy (pre-1.6, ``_use_new_zipfile_serialization=False``) format, tensors carrying
Python attributes, and the warning that hooks are not saved."""

from __future__ import annotations

import io
import pickle
import warnings

import pytest
import torch
from conftest import TPU, assert_same


def _saved(obj, **save_kwargs) -> io.BytesIO:
    buffer = io.BytesIO()
    torch.save(obj, buffer, **save_kwargs)
    buffer.seek(0)
    return buffer


@pytest.mark.parametrize("weights_only", [True, False])
@pytest.mark.parametrize("saved_on", ["cpu", TPU])
@pytest.mark.parametrize("where", [None, "cpu", "tpu"])
def test_the_legacy_format_loads_the_values_saved(eager_mode, saved_on, where, weights_only):
    # The legacy loader reads each storage's bytes after the whole pickle: a tensor moved to
    # the device while rebuilt moved uninitialised memory, and map_location was not applied to
    # tensors saved from tpu.
    x = torch.arange(12, dtype=torch.float32).view(3, 4)
    bf16 = torch.arange(5, dtype=torch.bfloat16)
    on = [x.to(saved_on), bf16.to(saved_on)]
    buffer = _saved([on[0], on[0][1:], on[0].t(), on[1]], _use_new_zipfile_serialization=False)
    loaded = torch.load(buffer, map_location=where, weights_only=weights_only)
    device = torch.device(TPU if where is None and saved_on == TPU else where or "cpu")
    if device.type == "tpu":
        device = torch.device(TPU)
    assert [t.device for t in loaded] == [device] * 4
    assert_same(loaded, [x, x[1:], x.t(), bf16])
    assert loaded[2].stride() == (1, 4) and loaded[1].storage_offset() == 4
    loaded[0].mul_(-1)  # the views share the first tensor's storage, as saved
    assert_same(loaded[1], -x[1:])


def test_a_legacy_parameter_loads_as_a_leaf_parameter():
    p = torch.nn.Parameter(torch.arange(4.0, device=TPU))
    loaded = torch.load(_saved({"p": p}, _use_new_zipfile_serialization=False))["p"]
    assert isinstance(loaded, torch.nn.Parameter) and loaded.is_leaf and loaded.requires_grad
    assert loaded.device == torch.device(TPU) and loaded.tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize("weights_only", [True, False])
@pytest.mark.parametrize(("saved_on", "where"), [("cpu", "tpu"), (TPU, "cpu"), (TPU, None)])
def test_a_tensor_with_attributes_loads_as_a_leaf(saved_on, where, weights_only):
    x = torch.ones(2, device=saved_on, requires_grad=True)
    x.note = "kept"
    loaded = torch.load(_saved(x), map_location=where, weights_only=weights_only)
    assert loaded.is_leaf and loaded.requires_grad and loaded.grad_fn is None
    assert loaded.note == "kept" and loaded.device.type == (where or "tpu")


def test_a_tensor_with_attributes_saved_on_tpu_names_no_torchtpu_class():
    # so that the file loads where torchtpu is not installed (map_location='cpu'), as a
    # cuda checkpoint loads on a machine without cuda
    x = torch.ones(2, device=TPU)
    x.note = 1
    assert b"torchtpu" not in _saved(x).getvalue()
    assert b"torchtpu" not in pickle.dumps(x)


@pytest.mark.parametrize("how", ["save", "pickle"])
def test_saving_a_tensor_with_hooks_warns_as_on_cpu(how):
    # (a Parameter's are dropped silently, as on CPU)
    dump = {"save": lambda t: _saved(t), "pickle": pickle.dumps}[how]
    for device in ("cpu", TPU):
        x = torch.ones(2, device=device, requires_grad=True)
        x.register_hook(lambda g: g)
        with pytest.warns(UserWarning, match="backward hook .* will not be serialized"):
            dump(x)
        p = torch.nn.Parameter(torch.ones(2, device=device))
        p.register_hook(lambda g: g)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # (Parameter.__reduce_ex__ does not warn)
            dump(p)


@pytest.mark.parametrize("legacy", [False, True])
def test_one_storage_saved_as_two_dtypes_is_refused_as_on_cpu(legacy):
    def save(device):
        x = torch.arange(4.0, device=device)
        torch.save([x, x.view(torch.int32)], io.BytesIO(),
                   _use_new_zipfile_serialization=not legacy)

    for device in ("cpu", TPU):
        with pytest.raises(RuntimeError, match="view the same data as different types"):
            save(device)
    x = torch.arange(4.0, device=TPU)  # one dtype, or two storages: saved
    assert torch.load(_saved([x, x[1:], x.view(torch.int32).clone()]))[2].dtype == torch.int32


@pytest.mark.parametrize("legacy", [False, True])
@pytest.mark.parametrize(("saved_on", "where"),
                         [("cpu", "tpu"), (TPU, None), (TPU, "cpu"), ("cpu", None)])
def test_conj_and_neg_views_load_as_views_of_one_memory(saved_on, where, legacy):
    # A CPU file's z.conj() loaded onto tpu read as z (its conj bit set, not applied); one
    # saved from tpu came back resolved, no longer sharing z's memory.
    z = torch.tensor([1 + 2j, 3 - 4j], device=saved_on)
    saved = _saved([z, z.conj(), torch._neg_view(z), z.conj()[1:]],
                   _use_new_zipfile_serialization=not legacy)
    loaded = torch.load(saved, map_location=where)
    assert [t.is_conj() for t in loaded] == [False, True, False, True]
    assert [t.is_neg() for t in loaded] == [False, False, True, False]
    loaded[0][0] = 5 + 5j  # seen through the others, as on CPU
    assert_same([t.resolve_conj().resolve_neg() for t in loaded],
                [torch.tensor(v) for v in ([5 + 5j, 3 - 4j], [5 - 5j, 3 + 4j],
                                           [-5 - 5j, -3 + 4j], [3 + 4j])])


def test_a_conj_leaf_loads_as_a_leaf():
    z = torch.tensor([1 + 2j], requires_grad=True)
    loaded = torch.load(_saved(z.detach().conj().requires_grad_()), map_location="tpu")
    assert loaded.is_leaf and loaded.requires_grad and loaded.is_conj()
    assert loaded.resolve_conj().tolist() == [1 - 2j]


def test_views_of_one_storage_as_another_dtype_load_sharing_it():
    x = torch.arange(4.0, device=TPU)
    v = x.view(torch.int32)
    z = torch.view_as_real(torch.tensor([1 + 2j, 3 + 4j], device=TPU))
    loaded = torch.load(_saved([v, v[1:], z, z[1:]]))
    loaded[0][1] = 7
    loaded[2][1, 0] = 9
    assert loaded[1].tolist() == [7, 1073741824, 1077936128]
    assert loaded[3].tolist() == [[9.0, 4.0]] and loaded[3].stride() == (2, 1)


@pytest.mark.parametrize("legacy", [False, True])
@pytest.mark.parametrize("where", ["tpu", torch.device("tpu:0"), {"cpu": "tpu"}])
def test_a_storage_loaded_onto_tpu_is_a_tpu_storage(where, legacy):
    # as torch.load(map_location='cuda') gives cuda storages; one a tensor in the same file
    # was loaded from is that tensor's storage, as the two shared it when saved
    t = torch.arange(6.0)
    loaded = torch.load(_saved({"s": t.storage(), "views": (t[2:], [t.storage()])},
                               _use_new_zipfile_serialization=not legacy),
                        map_location=where, weights_only=False)
    storage, (view, [again]) = loaded["s"], loaded["views"]
    assert isinstance(storage, torch.TypedStorage) and storage.device.type == "tpu"
    assert again is storage and view.device.type == "tpu"
    assert storage.dtype == torch.float32 and storage.tolist() == t.tolist()
    view.add_(100)
    assert storage.tolist() == [0.0, 1.0, 102.0, 103.0, 104.0, 105.0]
    alone = torch.load(_saved(t.untyped_storage()), map_location=where)
    assert alone.device.type == "tpu" and bytes(alone.tolist()) == t.numpy().tobytes()
