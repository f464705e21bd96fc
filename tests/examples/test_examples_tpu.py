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
