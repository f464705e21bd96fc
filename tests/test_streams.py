"""Streams and events: torch.tpu's, and torch.Stream / torch.Event made for tpu."""

from __future__ import annotations

import pytest
import torch
from conftest import assert_same


def test_events_time_the_device_and_streams_name_its_queue():
    start, end = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    x = torch.randn(256, 256, device="tpu")
    start.record()
    for _ in range(3):
        x = x @ x * 1e-2
    end.record()
    end.synchronize()
    assert end.query() and start.elapsed_time(end) > 0
    assert torch.tpu.current_stream() == torch.tpu.default_stream() == torch.tpu.Stream()
    with torch.tpu.stream(torch.tpu.Stream()):
        y = x + 1
    done = torch.tpu.current_stream().record_event()
    torch.tpu.current_stream().wait_event(done)
    # a torch.Event, as cuda's: generic streams' C++ reads it as one (FSDP2 waits so)
    assert isinstance(done, torch.Event) and done.device.type == "tpu"
    for _ in range(20):
        torch.accelerator.current_stream().wait_event(done)
        torch.Stream(device="tpu").wait_event(done)
    done.synchronize()
    assert_same(y, x.cpu() + 1)
    with pytest.raises(ValueError, match="enable_timing=True"):
        torch.tpu.Event().elapsed_time(end)
    with pytest.raises(ValueError, match="must be recorded"):
        start.elapsed_time(torch.tpu.Event(enable_timing=True))


def test_streams_are_torch_streams():
    s = torch.tpu.current_stream()
    assert isinstance(s, torch.Stream) and s.device == torch.device("tpu", 0)
    x = torch.ones(3, device="tpu")
    x.record_stream(s)  # what prefetching loaders do
    x.record_stream(torch.Stream("tpu"))
    with torch.tpu.StreamContext(torch.tpu.Stream(priority=-1)):
        y = x + 1
    s.synchronize()
    assert y.sum().item() == 6


def test_generic_events_and_streams_made_for_tpu_synchronize_and_time():
    # device-generic code (torch.accelerator's idiom): torch.Event with no device is the
    # accelerator's. PyTorch's C++ event raised "Backend doesn't support synchronizing events".
    start, end = torch.Event(enable_timing=True), torch.Event(device="tpu", enable_timing=True)
    x = torch.randn(256, 256, device="tpu")
    start.record()
    y = x @ x
    end.record()
    end.synchronize()
    assert end.query() and start.elapsed_time(end) > 0
    assert isinstance(start, torch.Event) and isinstance(end, torch.tpu.Event)
    stream = torch.Stream("tpu")
    assert isinstance(stream, torch.Stream) and isinstance(stream, torch.tpu.Stream)
    done = stream.record_event()
    done.synchronize()
    assert done.query() and isinstance(done, torch.Event)
    stream.synchronize()
    with torch.Stream():  # the accelerator's
        z = y + 1
    assert_same(z, (x.cpu() @ x.cpu()) + 1, rtol=1e-4, atol=1e-3)
    # other devices' are PyTorch's own, and subclasses are made as they say
    cpu_event, cpu_stream = torch.Event("cpu"), torch.Stream("cpu")
    assert type(cpu_event) is torch._C.Event and type(cpu_stream) is torch._C.Stream
    assert cpu_event.device.type == "cpu" and cpu_stream.device.type == "cpu"
    assert isinstance(cpu_event, torch.Event) and isinstance(cpu_stream, torch.Stream)

    class Marker(torch.Event):
        pass

    assert type(Marker("cpu")) is Marker and isinstance(Marker("cpu"), torch.Event)


def test_tpu_streams_are_the_accelerators_current_stream():
    # torch.accelerator's idiom: set a stream, read it back; a stream as a context manager;
    # a stream rebuilt from its ids. Each is the device's one queue, so all compare equal
    # (and hash alike), as cuda's default stream does to itself.
    before = torch.accelerator.current_stream()
    s1, s2 = torch.Stream(), torch.Stream()
    torch.accelerator.set_stream(s1)
    assert torch.accelerator.current_stream() == s1 and s1 == torch.accelerator.current_stream()
    torch.accelerator.set_stream(s2)
    assert torch.accelerator.current_stream() == s2
    with torch.Stream() as s3:
        assert torch.accelerator.current_stream() == s3
    assert torch.accelerator.current_stream() == before
    rebuilt = torch.Stream(stream_id=s1.stream_id, device_index=s1.device_index,
                           device_type=s1.device_type)
    assert s1 == rebuilt and not s1 != rebuilt and hash(s1) == hash(rebuilt)
    assert {s1: 1}.get(torch.tpu.current_stream()) == 1
    # anything but a stream is unequal (torch 2.13's C++ found `stream != None` False)
    for other in (42, "hello", None, object()):
        assert not s1 == other and s1 != other
    assert s1 in [1, "a", s1]
