"""Every example runs end to end at a tiny size on the CPU (each well under 10 s)."""

import importlib.util
import math
from pathlib import Path

import pytest
import torch
import transformers

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_train_gpt_compare_cpu(capsys):
    train_gpt = load("train_gpt")
    args = ["--device", "cpu", "--steps", "4", "--batch-size", "2", "--seq-len", "16",
            "--n-layer", "1", "--n-embd", "32", "--compare-cpu"]
    result = train_gpt.main(args)
    assert len(result["losses"]) == 4 and result["losses"] == result["cpu_losses"]
    assert result["max_rel_diff"] == 0.0
    out = capsys.readouterr().out
    assert "max relative difference: 0.000e+00" in out and "loss cpu" in out
    # The bundled text's characters form the vocabulary: a fresh model starts near uniform.
    _, vocab = train_gpt.load_text(train_gpt.DATA)
    assert abs(result["losses"][0] - math.log(len(vocab))) < 0.5


def test_train_gpt_learns_and_tolerance_fails_loudly():
    train_gpt = load("train_gpt")
    result = train_gpt.main(["--device", "cpu", "--steps", "25", "--batch-size", "4",
                             "--seq-len", "32", "--n-layer", "1", "--n-embd", "64"])
    assert result["losses"][-1] < result["losses"][0] - 0.8
    # A tolerance no real run can meet: the comparison must be able to fail.
    train_gpt.compare = lambda a, b, d: 1.0
    with pytest.raises(SystemExit, match="max relative difference"):
        train_gpt.main(["--device", "cpu", "--steps", "1", "--n-layer", "1", "--n-embd", "32",
                        "--synthetic", "--compare-cpu", "--tolerance", "0.5"])


@pytest.fixture
def hf_checkpoint(tmp_path):
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=300, hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, eos_token_id=None, bos_token_id=None)
    model = transformers.LlamaForCausalLM(cfg).eval()
    model.save_pretrained(tmp_path / "ckpt")
    return tmp_path / "ckpt", model


def test_llama_generate_greedy_matches_transformers(hf_checkpoint):
    path, hf = hf_checkpoint
    result = load("llama_generate").main(["--checkpoint", str(path), "--device", "cpu",
                                          "--dtype", "float32", "--prompt-ids", "5,17,42",
                                          "--max-new-tokens", "10"])
    ref = hf.generate(torch.tensor([[5, 17, 42]]), max_new_tokens=10, do_sample=False)
    assert result["ids"] == ref[0, 3:].tolist()


def test_llama_generate_sampling(hf_checkpoint):
    path, _ = hf_checkpoint
    gen = load("llama_generate")
    args = ["--checkpoint", str(path), "--device", "cpu", "--max-new-tokens", "6",
            "--top-k", "50", "--top-p", "0.9", "--seed", "3"]
    a, b = gen.main(args), gen.main(args)
    assert a["ids"] == b["ids"] and len(a["ids"]) == 6


def test_finetune_llama_then_generate(tmp_path, hf_checkpoint):
    path, _ = hf_checkpoint
    out = tmp_path / "tuned"
    result = load("finetune_llama").main(["--checkpoint", str(path), "--device", "cpu",
                                          "--steps", "4", "--batch-size", "2", "--seq-len", "16",
                                          "--lr", "1e-2", "--save", str(out)])
    assert result["losses"][-1] < result["losses"][0]
    tuned = transformers.AutoModelForCausalLM.from_pretrained(out)
    assert not torch.equal(tuned.model.norm.weight, torch.ones(32))  # the update was saved


def test_finetune_random_tiny_llama():
    result = load("finetune_llama").main(["--device", "cpu", "--steps", "3",
                                          "--batch-size", "2", "--seq-len", "16"])
    assert len(result["losses"]) == 3 and all(math.isfinite(x) for x in result["losses"])


def test_train_resnet():
    result = load("train_resnet").main(["--device", "cpu", "--steps", "12", "--batch-size", "16",
                                        "--image-size", "16", "--num-classes", "4"])
    assert result["losses"][-1] < result["losses"][0] and result["images_per_s"] > 0


def test_train_unet_diffusion():
    result = load("train_unet_diffusion").main(["--device", "cpu", "--steps", "4",
                                                "--batch-size", "4", "--image-size", "8",
                                                "--channels", "16"])
    # The output conv starts at zero, so the first loss is E[noise^2] ~ 1.
    assert abs(result["losses"][0] - 1.0) < 0.3 and result["images_per_s"] > 0


def test_train_dlrm():
    result = load("train_dlrm").main(["--device", "cpu", "--steps", "40", "--tables", "3",
                                      "--rows", "50", "--batch-size", "64"])
    assert sum(result["losses"][-10:]) < sum(result["losses"][:10])
