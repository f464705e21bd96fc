"""A process that compiles program after program stays under the system's memory-map limit.

XLA:CPU maps each executable's code on its own; past ``vm.max_map_count`` every compile fails
("LLVM compilation error: Cannot allocate memory"). Fused eager's programs are bounded, and
near the limit all compiled programs are let go, to be recompiled as they are next used.
"""

from __future__ import annotations

import gc
from collections import OrderedDict

import pytest
import torch

import torchtpu
from torchtpu.eager import fused
from torchtpu.runtime import code_limit

needs_map_limit = pytest.mark.skipif(code_limit._LIMIT is None,
                                     reason="no vm.max_map_count here (not Linux)")


def _step(n: int) -> float:
    x = torch.arange(n, dtype=torch.float32, device="tpu")
    return (x * 3 + 1).sum().item()


def _expected(n: int) -> float:
    return (torch.arange(n, dtype=torch.float32) * 3 + 1).sum().item()


def test_fused_eager_keeps_its_most_recently_run_programs(monkeypatch):
    monkeypatch.setattr(fused, "_PROGRAMS", OrderedDict())
    monkeypatch.setattr(fused, "_MAX_PROGRAMS", 3)
    with torchtpu.set_eager_mode("fused"):
        program = {}
        for n in (5, 6, 7, 5, 8):  # 5 runs again before 8 comes: 6 is the oldest then
            assert _step(n) == _expected(n)
            program[n] = next(reversed(fused._PROGRAMS))  # the one just run
        assert len(set(program.values())) == 4
        assert list(fused._PROGRAMS) == [program[7], program[5], program[8]]
        assert _step(6) == _expected(6)  # let go, built again


@needs_map_limit
def test_compiled_programs_are_let_go_near_the_memory_map_limit(monkeypatch, eager_mode):
    monkeypatch.setattr(code_limit, "due", False)
    monkeypatch.setattr(code_limit, "_CHECK_EVERY", 1)
    monkeypatch.setattr(code_limit, "shed_count", 0)
    first = {"strict": 1100, "debug": 1200, "fused": 1300}[eager_mode]  # shapes new here
    for n in range(first, first + 8):  # far below the limit: nothing is let go
        assert _step(n) == _expected(n)
    assert not code_limit.due and code_limit.shed_count == 0
    gc.collect()
    before = code_limit.maps_in_use()
    # Now the maps stand just past half the limit: the next compile finds them there.
    monkeypatch.setattr(code_limit, "_LIMIT", 2 * before - 2)
    with pytest.warns(UserWarning, match="vm.max_map_count"):
        assert _step(first + 8) == _expected(first + 8)
        torch.ones(3, device="tpu")  # at the latest, the op after the compile lets them go
    assert not code_limit.due and code_limit.shed_count == 1
    gc.collect()
    assert code_limit.maps_in_use() < before - 8 * 3  # each let go a few maps
    assert not fused._PROGRAMS
    for n in (first, first + 8, first + 9):  # and compile again as they are used
        assert _step(n) == _expected(n)


@needs_map_limit
@pytest.mark.parametrize("grown", [True, False])
def test_compiled_programs_are_let_go_when_memory_runs_short(monkeypatch, grown):
    monkeypatch.setattr(code_limit, "due", False)
    monkeypatch.setattr(code_limit, "_CHECK_EVERY", 1)
    monkeypatch.setattr(code_limit, "shed_count", 0)
    first = 1400 if grown else 1500
    assert _step(first) == _expected(first)
    assert not code_limit.due  # maps far below the limit, memory not short
    # A machine with a tenth of its memory left; this process grew by 2 GB since programs
    # were last let go (grown), or held its memory from before: a model's own tensors.
    monkeypatch.setattr(code_limit, "memory_available", lambda: (1 << 30, 10 << 30))
    since = code_limit.resident_bytes() - (2 << 30 if grown else 0)
    monkeypatch.setattr(code_limit, "_resident_at_release", since)
    if not grown:  # programs are not what filled memory: they stay
        assert _step(first + 1) == _expected(first + 1)
        assert not code_limit.due and code_limit.shed_count == 0
        return
    with pytest.warns(UserWarning, match="short of memory"):
        assert _step(first + 1) == _expected(first + 1)
        torch.ones(3, device="tpu")  # at the latest, the op after the compile lets them go
    assert not code_limit.due and code_limit.shed_count == 1
    # counted from here again: the next compile finds no new growth (letting programs go may
    # have returned memory, so compare with the process as it is now)
    assert code_limit._resident_at_release > max(since, code_limit.resident_bytes() - (1 << 30))
    assert _step(first + 2) == _expected(first + 2)
    assert not code_limit.due and code_limit.shed_count == 1
