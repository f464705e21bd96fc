"""Every example runs on the 'tpu' device at a tiny size and gives CPU's losses."""

import pytest
from test_examples_smoke import load

import torchtpu  # noqa: F401

CASES = {
    "train_resnet": ["--steps", "2", "--batch-size", "4", "--image-size", "16",
                     "--num-classes", "4"],
    "train_unet_diffusion": ["--steps", "1", "--batch-size", "2", "--image-size", "8",
                             "--channels", "8"],
    "train_dlrm": ["--steps", "3", "--tables", "3", "--rows", "50", "--batch-size", "32"],
    "finetune_llama": ["--steps", "2", "--batch-size", "2", "--seq-len", "16"],
}


@pytest.mark.parametrize("name", CASES)
def test_example_on_tpu_matches_cpu(name):
    cpu = load(name).main(["--device", "cpu"] + CASES[name])["losses"]
    tpu = load(name).main(["--device", "tpu"] + CASES[name])["losses"]
    assert tpu == pytest.approx(cpu, rel=1e-4)


def test_train_gpt_main_job_on_tpu():
    result = load("train_gpt").main(["--device", "tpu", "--steps", "3", "--batch-size", "2",
                                     "--seq-len", "16", "--n-layer", "1", "--n-embd", "32",
                                     "--compare-cpu", "--tolerance", "1e-4"])
    assert result["max_rel_diff"] <= 1e-4


def test_ddp_example_under_torchrun_matches_cpu(tmp_path):
    # Two workers each way; the script is written as for cuda (tpu:{local_rank}, device_ids).
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    losses = {}
    for device in ("cpu", "tpu"):
        out = tmp_path / f"{device}.json"
        run = subprocess.run(
            [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
             "2", str(root / "examples" / "train_gpt_ddp.py"), "--device", device, "--steps",
             "3", "--n-layer", "1", "--n-embd", "32", "--seq-len", "16", "--out", str(out)],
            capture_output=True, text=True, timeout=600, env=env)
        assert run.returncode == 0, run.stderr[-4000:]
        losses[device] = json.loads(out.read_text())
    assert len(losses["tpu"]) == 3
    assert losses["tpu"] == pytest.approx(losses["cpu"], rel=1e-4)

