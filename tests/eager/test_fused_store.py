"""Fused eager's program store: keys that name what was recorded, and programs loaded back.

The cross-process warm start is tested in tests/compile/test_compile_cache.py; here one
process forgets its in-memory programs and finds them on disk.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
import torch

import torchtpu
from torchtpu.eager import fused
from torchtpu.runtime import compile_cache, program_store
from torchtpu.runtime.execute import Executable
from torchtpu.runtime.program_store import Unstable, stable


def _cache_in(where: str, monkeypatch):
    monkeypatch.setenv("TORCHTPU_CACHE_DIR", where)
    compile_cache.setup()


@pytest.fixture
def store(tmp_path, monkeypatch):
    _cache_in(str(tmp_path), monkeypatch)
    _forget_programs(monkeypatch)  # nor what earlier tests traced but never stored
    yield tmp_path
    monkeypatch.undo()
    compile_cache.setup()  # the process's own cache again


def _forget_programs(monkeypatch):
    """As a new process: no program or op shape in memory."""
    monkeypatch.setattr(fused, "_PROGRAMS", OrderedDict())
    monkeypatch.setattr(fused, "_AVALS", {})
    monkeypatch.setattr(fused, "_stored_shapes", (None, {}))
    monkeypatch.setattr(fused, "_new_shapes", {})


def _step(x, w):
    y = torch.tanh(x @ w) * 0.5 + x.sum(dim=1, keepdim=True)
    return y.softmax(dim=-1).cpu()


def test_a_program_is_loaded_not_traced(store, monkeypatch):
    x, w = torch.randn(4, 6), torch.randn(6, 6)
    expected = _step(x, w)
    with torchtpu.set_eager_mode("fused"):
        torchtpu.reset_metrics()
        first = _step(x.to("tpu"), w.to("tpu"))
        cold = torchtpu.metrics()
        _forget_programs(monkeypatch)
        torchtpu.reset_metrics()
        again = _step(x.to("tpu"), w.to("tpu"))
        warm = torchtpu.metrics()
    torch.testing.assert_close(first, expected)
    torch.testing.assert_close(again, expected)
    assert cold["compile"]["fused_program"] == 1 and cold["cache"]["fused_store_write"] == 2
    assert "fused_program" not in warm["compile"]
    assert not any(op.startswith("aten.") for op in warm["compile"])  # no op traced either
    assert warm["cache"]["fused_store_hit"] == 2  # the program and the op shapes


def test_another_shape_or_a_changed_source_is_another_program(store, monkeypatch):
    with torchtpu.set_eager_mode("fused"):
        _step(torch.randn(4, 6, device="tpu"), torch.randn(6, 6, device="tpu"))
        _forget_programs(monkeypatch)
        torchtpu.reset_metrics()
        out = _step(torch.ones(3, 6, device="tpu"), torch.ones(6, 6, device="tpu"))
        assert torchtpu.metrics()["compile"]["fused_program"] == 1
        torch.testing.assert_close(out, _step(torch.ones(3, 6), torch.ones(6, 6)))

        # The same trace after torchtpu's source changed (an edited rule): traced again.
        _forget_programs(monkeypatch)
        monkeypatch.setattr(program_store, "_source_digest", lambda: "edited")
        torchtpu.reset_metrics()
        _step(torch.ones(3, 6, device="tpu"), torch.ones(6, 6, device="tpu"))
        assert torchtpu.metrics()["compile"]["fused_program"] == 1
        # Nor its ops' output shapes: an edited rule may return more outputs than the old one.
        assert "fused_store_hit" not in torchtpu.metrics()["cache"]


def test_without_the_cache_nothing_is_stored(monkeypatch):
    _cache_in("", monkeypatch)
    try:
        with torchtpu.set_eager_mode("fused"):
            torchtpu.reset_metrics()
            _step(torch.randn(2, 6, device="tpu"), torch.randn(6, 6, device="tpu"))
            cache = torchtpu.metrics()["cache"]
        assert not any(k.startswith("fused_store") for k in cache)
    finally:
        monkeypatch.undo()
        compile_cache.setup()


@pytest.mark.parametrize("value", [
    1, 2.5, None, "mean", (1, (2, 3)), [0, -1], slice(1, None, 2), torch.float32,
    np.dtype("float32"), float, torch.contiguous_format,
])
def test_stable_text_names_plain_values(value):
    assert stable(value) == stable(value)


def test_stable_text_tells_values_apart():
    texts = [stable(v) for v in (1, 1.0, True, "1", (1,), [1], np.float32, None)]
    assert len(set(texts)) == len(texts)


@pytest.mark.parametrize("value", [np.zeros(3), lambda x: x, object(), (1, np.ones(2))])
def test_values_whose_text_may_not_identify_them_are_refused(value):
    with pytest.raises(Unstable):
        stable(value)


def test_executables_are_named_by_module_and_function_unless_closures():
    def local(x):
        return x

    assert Executable(np.negative).key == "numpy.negative"
    assert Executable(local).key is None
    assert Executable(lambda x: x).key is None
    assert Executable(local, key="mine").key == "mine"
