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
