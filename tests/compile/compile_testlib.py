"""Helpers for the torch.compile tests: the backend registered, Dynamo and the metrics reset
around each test (import `fresh_dynamo` into a test module to use it)."""

from __future__ import annotations

import pytest
import torch

import torchtpu.compile

torchtpu.compile.register()  # until torchtpu/__init__.py does it on import


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    torchtpu.reset_metrics()  # counts asserted by one test never come from another
    yield
    torch._dynamo.reset()
