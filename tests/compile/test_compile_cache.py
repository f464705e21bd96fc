"""The persistent compile cache: a second process starts warm; damaged entries are survived."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CHILD = Path(__file__).with_name("cache_child.py")
ROOT = Path(__file__).resolve().parents[2]


def _start(cache_dir, *args: str) -> subprocess.Popen:
    env = dict(os.environ, TORCHTPU_CACHE_DIR=str(cache_dir), PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, str(CHILD), *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(p: subprocess.Popen) -> dict:
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def _run(cache_dir, *args: str) -> dict:
    return _finish(_start(cache_dir, *args))


def _entries(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name.endswith("-cache"))


# One xdist worker takes the module: the cold caches below are built once for it.
pytestmark = pytest.mark.xdist_group("compile_cache")


def _built(tmp_path_factory, *args: str):
    folder = tmp_path_factory.mktemp("built")
    return folder, _run(folder, *args)


@pytest.fixture(scope="module")
def compiled_cache(tmp_path_factory):
    """A cache a cold process filled under torch.compile, and what that process saw."""
    return _built(tmp_path_factory)


@pytest.fixture(scope="module")
def fused_cache(tmp_path_factory):
    """A cache a cold process filled in fused eager, and what that process saw."""
    return _built(tmp_path_factory, "fused")


def _copy(built: Path, to: Path) -> Path:
    """A test's own copy of a built cache (tests damage theirs), at another path than it
    was built at, as a cache baked into an image or restored by CI is."""
    shutil.copytree(built, to)
    return to


def test_second_process_starts_warm_and_damaged_entries_are_rebuilt(tmp_path, compiled_cache):
    built, cold = compiled_cache
    tmp_path = _copy(built, tmp_path / "cache")
    assert cold["cache"].get("persistent_hit", 0) == 0
    assert cold["cache"]["persistent_write"] > 0
    warm = _run(tmp_path)
    assert warm["cache"].get("persistent_miss", 0) == 0
    assert warm["cache"]["persistent_hit"] == cold["cache"]["persistent_write"]
    assert warm["out"] == cold["out"]
    # Entries live under a folder named for the versions they were built with.
    folder = Path(warm["dir"])
    assert "jax-" in folder.name and "torch-" in folder.name

    files = _entries(folder)
    flipped = bytearray(files[0].read_bytes())
    flipped[len(flipped) // 2] ^= 0xFF
    files[0].write_bytes(bytes(flipped))
    files[1].write_bytes(files[1].read_bytes()[:40])  # truncated
    damaged = _run(tmp_path)
    # Each damaged entry the process reads is caught (whether a given eager-op entry is
    # read at all can vary between runs), and nothing damaged is ever used.
    assert damaged["cache"]["persistent_corrupt"] >= 1
    assert damaged["out"] == cold["out"]
    healed = _run(tmp_path)  # the rebuilt entries were written back whole
    assert healed["cache"].get("persistent_corrupt", 0) == 0
    assert healed["cache"].get("persistent_miss", 0) == 0


def test_concurrent_writers_leave_whole_entries(tmp_path):
    procs = [_start(tmp_path) for _ in range(2)]
    results = [_finish(p) for p in procs]
    assert results[0]["out"] == results[1]["out"]
    folder = Path(results[0]["dir"])
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]
    after = _run(tmp_path)
    assert after["cache"].get("persistent_corrupt", 0) == 0
    assert after["cache"].get("persistent_miss", 0) == 0


def test_fused_eager_starts_warm_in_a_second_process(tmp_path, fused_cache):
    built, cold = fused_cache
    tmp_path = _copy(built, tmp_path / "cache")
    assert cold["compile"]["fused_program"] >= 1 and cold["cache"]["persistent_write"] > 0
    assert cold["cache"]["fused_store_write"] >= cold["compile"]["fused_program"]
    warm = _run(tmp_path, "fused")
    assert warm["cache"].get("persistent_miss", 0) == 0  # every step's program from disk
    # ... and neither a program nor an op was traced: the store had them all.
    assert "fused_program" not in warm["compile"]
    assert warm["cache"].get("fused_store_miss", 0) == 0
    assert warm["cache"]["fused_store_hit"] == cold["cache"]["fused_store_write"]
    assert warm["out"] == cold["out"]
    # Loading a program without LAPACK calls skips jax's LAPACK set-up (it imports scipy).
    assert not warm["scipy_linalg"]
    # Another batch size is another trace: traced, compiled and stored, not mistaken for
    # the first one.
    other = _run(tmp_path, "fused", "3")
    assert other["compile"]["fused_program"] == cold["compile"]["fused_program"]
    assert len(other["out"]) == 3


def test_fused_program_with_lapack_calls_loads_in_a_second_process(tmp_path):
    # A program with a LAPACK call needs jax's LAPACK set-up before it runs: loaded without
    # it, the process crashes.
    cold = _run(tmp_path, "fused", "2", "inverse")
    warm = _run(tmp_path, "fused", "2", "inverse")
    assert "fused_program" not in warm["compile"]
    assert warm["out"] == cold["out"]


def test_damaged_fused_store_entries_are_rebuilt(tmp_path, fused_cache):
    built, cold = fused_cache
    tmp_path = _copy(built, tmp_path / "cache")
    store = tmp_path / Path(cold["dir"]).name / "fused"
    files = _entries(store)
    assert files
    for f in files:  # every program, and the op shapes
        f.write_bytes(f.read_bytes()[:-7] + b"garbage")
    damaged = _run(tmp_path, "fused")
    assert damaged["cache"]["fused_store_corrupt"] == len(files)
    assert damaged["compile"]["fused_program"] == cold["compile"]["fused_program"]
    assert damaged["out"] == cold["out"]
    healed = _run(tmp_path, "fused")
    assert healed["cache"].get("fused_store_corrupt", 0) == 0
    assert "fused_program" not in healed["compile"]


def test_empty_cache_dir_turns_it_off(monkeypatch):
    from torchtpu.runtime import compile_cache

    before = compile_cache.active_dir()
    monkeypatch.setenv("TORCHTPU_CACHE_DIR", "")
    try:
        assert compile_cache.setup() is None
        assert compile_cache.active_dir() is None
    finally:
        monkeypatch.undo()
        if before is not None:
            compile_cache.setup()  # back to what the process had


def test_a_copied_cache_starts_warm(tmp_path, compiled_cache):
    built, cold = compiled_cache
    warm = _run(_copy(built, tmp_path / "moved"))
    assert warm["cache"].get("persistent_miss", 0) == 0
    assert warm["cache"]["persistent_hit"] == cold["cache"]["persistent_write"]


def test_an_unusable_cache_folder_warns_and_runs_without(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    p = _start(a_file / "sub")
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err[-3000:]
    result = json.loads(out.strip().splitlines()[-1])
    assert result["dir"] == "None" and result["cache"]["persistent_unusable"] >= 1
    assert "cannot be used" in err
