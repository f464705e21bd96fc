"""PyTorch's profilers on tpu: host-side op records, without a warning at every op."""

from __future__ import annotations

import torch


def _work():
    x = torch.randn(32, 32, device="tpu")
    for _ in range(3):
        y = (x @ x).relu().sum()
    return y.item()


def test_the_legacy_profiler_with_use_device_tpu_records_ops_quietly(capfd):
    # Its default marker-only mode needs C++ profiler stubs a Python backend cannot register:
    # every op warned "PrivateUse1 used in profiler but not enabled" (an INTERNAL ASSERT too).
    with torch.autograd.profiler.profile(use_device="tpu") as prof:
        _work()
    names = {e.key for e in prof.key_averages()}
    assert "aten::mm" in names or "aten::matmul" in names
    assert "used in profiler but not enabled" not in capfd.readouterr().err


def test_torch_profiler_with_the_supported_activities_records_ops_quietly(capfd):
    activities = torch.profiler.supported_activities()
    assert torch.profiler.ProfilerActivity.PrivateUse1 in activities
    with torch.profiler.profile(activities=activities) as prof:
        _work()
    assert "aten::mm" in {e.key for e in prof.key_averages()}
    assert "used in profiler but not enabled" not in capfd.readouterr().err
