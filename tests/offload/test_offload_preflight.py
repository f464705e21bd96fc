"""Pre-flight refuses a run that cannot fit, before allocating anything, and says why."""

from __future__ import annotations

import pytest
import torch
from offload_testlib import tiny_hf_llama

from torchtpu.offload.adapters import adapter_for
from torchtpu.offload.config import OffloadConfig
from torchtpu.offload.device_ops import DeviceOps
from torchtpu.offload.engine import OffloadEngine
from torchtpu.offload.preflight import PreflightError, plan_memory


def test_refuses_impossible_device_budget_before_allocating():
    model = tiny_hf_llama()
    before = [p.data_ptr() for p in model.parameters()]
    ops = DeviceOps("cpu")
    events = []
    ops.listeners.append(lambda *e: events.append(e))
    with pytest.raises(PreflightError) as err:
        OffloadEngine(model, "cpu", OffloadConfig(device_budget=10_000), batch=8, seq=64,
                      ops=ops)
    msg = str(err.value)
    assert "does not fit in device memory" in msg
    assert "device: needs" in msg and "has 0.01 MiB" in msg
    assert "block weight slots (2)" in msg
    assert "offload_activations=True" in msg and "halve batch" in msg
    assert events == []  # nothing allocated, nothing copied
    assert [p.data_ptr() for p in model.parameters()] == before  # model untouched


def test_refuses_impossible_host_budget():
    model = tiny_hf_llama()
    with pytest.raises(PreflightError, match="does not fit in host memory") as err:
        OffloadEngine(model, "cpu", OffloadConfig(host_budget=1_000_000), batch=1, seq=8)
    assert "AdamW moments (fp32)" in str(err.value)
    assert "weights_dtype=bfloat16" in str(err.value)


def test_plan_scales_with_options():
    adapter = adapter_for(tiny_hf_llama(layers=8))
    base = plan_memory(adapter, OffloadConfig(), batch=4, seq=64)
    off = plan_memory(adapter, OffloadConfig(offload_activations=True), batch=4, seq=64)
    bf16 = plan_memory(adapter, OffloadConfig(weights_dtype=torch.bfloat16), batch=4, seq=64)
    act = 4 * 64 * 64 * 4
    assert base.device["saved block inputs"] == 8 * act
    assert off.device["saved block inputs"] == 2 * act
    assert off.host["offloaded activations"] == 8 * act
    assert bf16.host_total < base.host_total and bf16.device_total < base.device_total
    n = sum(p.numel() for p in adapter.model.parameters())
    assert base.host["AdamW moments (fp32)"] == 8 * n


def test_accepts_a_run_that_fits():
    model = tiny_hf_llama()
    plan = plan_memory(adapter_for(model), OffloadConfig(), batch=1, seq=8)
    eng = OffloadEngine(model, "cpu", OffloadConfig(device_budget=plan.device_total), batch=1,
                        seq=8)
    assert eng.plan.device_total == plan.device_total
