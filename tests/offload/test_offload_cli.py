"""The training CLI and the GPU benchmark's CPU dry run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from torchtpu.offload import train

ROOT = Path(__file__).resolve().parents[2]


def test_train_cli_reports_metrics_and_writes_checkpoints(tmp_path, capsys):
    text = tmp_path / "data.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 40)
    hist = train.main(["--model", "tiny", "--steps", "6", "--batch", "2", "--seq", "32",
                       "--lr", "3e-3", "--clip", "1.0", "--micro-batches", "2", "--quiet",
                       "--data", str(text), "--save", str(tmp_path / "ck.safetensors"),
                       "--export-hf", str(tmp_path / "hf")])
    out = capsys.readouterr().out
    assert len(hist) == 6
    for key in ("tok_s", "tflops", "busy", "h2d_gbs", "d2h_gbs", "dev_peak_gb", "host_gb"):
        assert hist[-1][key] > 0, key
    assert 0 < hist[-1]["busy"] <= 1
    assert hist[-1]["loss"] < hist[0]["loss"]  # a repetitive text is learnable
    assert "tok_s=" in out and "tflops=" in out
    assert (tmp_path / "hf" / "config.json").exists()
    resumed = train.main(["--model", "tiny", "--steps", "1", "--seq", "32", "--quiet",
                          "--resume", str(tmp_path / "ck.safetensors")])
    assert len(resumed) == 1


def test_train_cli_refuses_what_cannot_fit(capsys):
    with pytest.raises(SystemExit) as e:
        train.main(["--model", "tiny", "--device-budget-gb", "1e-6", "--quiet"])
    assert e.value.code == 2
    assert "does not fit in device memory" in capsys.readouterr().err


def test_train_module_entry_point():
    proc = subprocess.run([sys.executable, "-m", "torchtpu.offload.train", "--model", "tiny",
                           "--steps", "1", "--seq", "16", "--quiet"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "tok_s=" in proc.stdout


def test_gpu_benchmark_dry_run_on_cpu():
    proc = subprocess.run([sys.executable, "benchmarks/offload_gpu.py", "--dry-run"], cwd=ROOT,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    offload = next(line for line in lines if line.split()[:1] == ["offload"]
                   and "benchmark" not in line)
    assert float(offload.split()[1]) > 0  # a measured step time
    assert any(line.startswith("plain ") and "skipped" not in line for line in lines)
    assert any(line.startswith("fsdp2") and "skipped" in line for line in lines)
