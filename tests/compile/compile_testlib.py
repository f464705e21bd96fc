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


def count(kind: str, key: str) -> int:
    """A metric's count so far (0 if never counted)."""
    return torchtpu.metrics()[kind].get(key, 0)
