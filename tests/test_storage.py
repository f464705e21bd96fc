"""A tpu tensor's storage object: reading it (``tolist``, indexing, ``cpu()``), copying into
it, and tensors made over it with ``set_``, as on CPU."""

from __future__ import annotations

import pytest
import torch
from conftest import TPU, assert_same


def _both(fn):
    """``fn(base)`` on a CPU base and on a tpu copy of it."""
    base = torch.arange(6.0) * 1.5 - 2
    return fn(base.to(TPU)), fn(base.clone())


def test_typed_storage_reads_as_on_cpu(eager_mode):
    tpu, cpu = _both(lambda t: (t[2:].storage().tolist(), t.storage()[4], t.storage().size()))
    assert tpu == cpu
    tpu, cpu = _both(lambda t: t.storage().cpu().tolist())
    assert tpu == cpu


def test_untyped_storage_copies_to_the_host_byte_for_byte(eager_mode):
    tpu, cpu = _both(lambda t: t.view(2, 3).t().untyped_storage())
    assert tpu.device.type == "tpu"
    assert list(tpu.cpu()) == list(cpu) and tpu.tolist() == cpu.tolist()


def test_a_copy_into_a_tpu_storage_is_seen_by_its_tensors(eager_mode):
    def write(t):
        view = t[1:4]
        t.untyped_storage().copy_(torch.full((6,), 7.0).untyped_storage())
        return t, view

    tpu, cpu = _both(write)
    assert_same(tpu, cpu)
    with pytest.raises(RuntimeError, match="size does not match"):
        torch.zeros(2, device=TPU).untyped_storage().copy_(torch.zeros(3).untyped_storage())


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.uint8])
def test_set_onto_a_storage_aliases_it(eager_mode, dtype):
    def over(t):
        view = torch.empty(0, dtype=dtype, device=t.device)
        if dtype == torch.float32:
            view.set_(t.untyped_storage(), 2, (2, 2), (1, 2))
            view.mul_(-1)  # written through: the base sees it
        else:
            view.set_(t.untyped_storage())  # the bytes, read as another dtype
        return view.clone(), t, view.storage_offset(), view.stride()

    tpu, cpu = _both(over)
    assert tpu[2:] == cpu[2:]
    assert_same(tpu[:2], cpu[:2])


def test_set_onto_a_storage_refuses_what_it_cannot_do():
    t = torch.arange(6.0, device=TPU)
    with pytest.raises(RuntimeError, match="devices must match"):
        torch.empty(0, device=TPU).set_(torch.arange(3.0).untyped_storage())
    with pytest.raises(RuntimeError, match="need 28 bytes, more than the tpu storage's 24"):
        torch.empty(0, device=TPU).set_(t.untyped_storage(), 0, (7,), (1,))
    assert t.untyped_storage().nbytes() == 24 and t.tolist() == list(range(6))


def test_a_storage_moves_to_tpu_as_to_cuda(tmp_path):
    t = torch.arange(6.0) * 1.5 - 2
    moved = t.untyped_storage().tpu()
    assert moved.device.type == "tpu" and moved.is_tpu and not t.untyped_storage().is_tpu
    assert moved.tpu() is moved and list(moved.cpu()) == list(t.untyped_storage())
    assert t.storage().tpu().tolist() == t.tolist()
    assert_same(torch.empty(0, device=TPU).set_(moved, 1, (2, 2), (1, 2)),
                torch.empty(0).set_(t.untyped_storage(), 1, (2, 2), (1, 2)))
    with pytest.raises(RuntimeError, match="must be tpu device"):
        t.untyped_storage().tpu("cpu")
    # torch.load's callable map_location, cuda's ``lambda s, loc: s.cuda()`` (the legacy
    # format reads the bytes into the storages it made after the pickle)
    for legacy in (False, True):
        torch.save({"t": t, "tail": t[2:]}, tmp_path / "t.pt",
                   _use_new_zipfile_serialization=not legacy)
        loaded = torch.load(tmp_path / "t.pt", map_location=lambda s, loc: s.tpu())
        assert_same(loaded["t"], t) and assert_same(loaded["tail"], t[2:])
        shared = loaded["tail"].untyped_storage().data_ptr()
        assert shared == loaded["t"].untyped_storage().data_ptr()


@pytest.mark.parametrize("make", [
    lambda: torch.UntypedStorage(8, device="tpu").copy_(torch.arange(8, dtype=torch.uint8)
                                                        .untyped_storage()),
    lambda: torch.UntypedStorage(list(range(8)), device="tpu"),
    lambda: torch.arange(8, dtype=torch.uint8, device=TPU).untyped_storage().clone(),
    lambda: torch.UntypedStorage(list(range(8))).to(device="tpu"),
], ids=["new", "sequence", "clone", "to"])
def test_a_storage_is_made_on_tpu_as_on_cuda(make):
    # (PyTorch's C++ constructor would use an allocator a Python backend has not: a crash)
    s = make()
    assert s.device.type == "tpu" and s.nbytes() == 8 and s.tolist() == list(range(8))
    s.fill_(300)  # bytes, wrapped as CPU's storage fill wraps them
    assert torch.empty(0, dtype=torch.uint8, device=TPU).set_(s).tolist() == [44] * 8
    with pytest.raises(RuntimeError, match="fill_ expects int"):
        s.fill_(2.5)


@pytest.mark.filterwarnings("ignore:TypedStorage is deprecated")
def test_tensor_of_a_storage_as_on_cpu():
    # torch.tensor(storage) sets an empty tensor of the storage's device to it, with Python
    # dispatch off: set_.source_Storage had no tpu kernel.
    def run(device):
        t = torch.arange(6.0, device=device)
        shared = torch.tensor(t.storage(), device=device)
        shared[1] = 9.0  # it aliases the storage
        by_bytes = torch.tensor(t.untyped_storage())  # int64 words, then to the default device
        return by_bytes, shared.device.type, shared, t

    tpu, cpu = run(TPU), run("cpu")
    assert tpu[1] == "tpu" and cpu[1] == "cpu"
    assert_same([tpu[0], tpu[2], tpu[3]], [cpu[0], cpu[2], cpu[3]])


@pytest.mark.filterwarnings("ignore:TypedStorage is deprecated")
def test_a_tpu_storage_pickles_and_saves_in_the_legacy_format(tmp_path):
    # (both write the storage's bytes with _write_file, which cannot read a tpu storage's)
    import io
    import pickle

    t = torch.arange(6.0, device=TPU)
    back = pickle.loads(pickle.dumps(t.storage()))
    assert back.dtype == torch.float32 and back.tolist() == t.tolist()
    buffer = io.BytesIO()
    torch.save([t.storage(), t[2:].int().storage()], buffer, _use_new_zipfile_serialization=False)
    buffer.seek(0)  # (an UntypedStorage: PyTorch's legacy loader fails on CPU's too)
    typed, tail = torch.load(buffer, weights_only=False)
    assert typed.tolist() == t.tolist() and tail.tolist() == [2, 3, 4, 5]


def test_a_slice_of_a_storage_views_its_bytes_as_on_cpu():
    def run(device):
        t = torch.arange(6.0, device=device)
        s = t.untyped_storage()
        part = s[4:12]
        inner = part[4:8]  # a slice of a slice
        read = (part.nbytes(), part.tolist(), inner.tolist(), s[-4:].tolist(), s[30:].nbytes(),
                part.data_ptr() - s.data_ptr(), inner.data_ptr() - s.data_ptr())
        part.fill_(0)  # writes reach the tensor
        words = torch.empty(0, dtype=torch.int16, device=device).set_(s[2:10])
        inner_view = torch.empty(0, device=device).set_(inner)
        inner_view += 5
        return read, t.cpu(), words.cpu(), inner_view.cpu()

    tpu, cpu = run(TPU), run("cpu")
    assert tpu[0] == cpu[0]
    assert_same(list(tpu[1:]), list(cpu[1:]))
    with pytest.raises(RuntimeError, match="starting at byte 2 cannot be viewed as Float"):
        torch.empty(0, device=TPU).set_(torch.zeros(4, device=TPU).untyped_storage()[2:10])


def test_resizing_a_storage_keeps_fsdps_free_and_restore_and_refuses_the_rest():
    t = torch.arange(4.0).to(TPU)
    storage = t.untyped_storage()
    storage.resize_(0)  # FSDP2 frees an unsharded parameter so, and restores it before use
    storage.resize_(16)
    assert torch.equal(t.cpu(), torch.arange(4.0))
    with pytest.raises(NotImplementedError, match=r"resize_\(32\) of a tpu storage of 16 bytes"):
        storage.resize_(32)
    assert storage.nbytes() == 16 and torch.equal(t.cpu(), torch.arange(4.0))
