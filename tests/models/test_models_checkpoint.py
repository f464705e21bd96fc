"""HF checkpoint directories <-> our models, checked against transformers on CPU."""

import json

import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file

from torchtpu.models.checkpoint import (
    CheckpointError,
    config_from_hf,
    load_pretrained,
    save_pretrained,
)
from torchtpu.models.llama import Llama, rope_inv_freq
from torchtpu.models.qwen import QwenConfig

SMALL = dict(vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
LLAMA3_ROPE = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
               "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 16}


def hf_configs():
    return {
        "llama3": transformers.LlamaConfig(**SMALL, rope_parameters=LLAMA3_ROPE, rms_norm_eps=1e-5),
        "llama-tied": transformers.LlamaConfig(**SMALL, tie_word_embeddings=True),
        "qwen2-tied": transformers.Qwen2Config(**SMALL, tie_word_embeddings=True),
        "qwen3": transformers.Qwen3Config(**SMALL, head_dim=32),
    }


def hf_model(name):
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(hf_configs()[name]).eval()
    with torch.no_grad():  # HF zero-inits biases and ones-inits norms; make them matter
        for n, p in model.named_parameters():
            if n.endswith("bias") or "norm" in n:
                p.add_(torch.randn_like(p) * 0.1)
    return model


def tokens(seq=48):
    # Longer than original_max_position_embeddings (16) so the llama3 scaling is exercised.
    gen = torch.Generator().manual_seed(1)
    return torch.randint(0, SMALL["vocab_size"], (2, seq), generator=gen)


def assert_same_logits(ours, theirs):
    idx = tokens()
    with torch.no_grad():
        torch.testing.assert_close(ours(idx)[0], theirs(idx).logits, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", list(hf_configs()))
def test_load_matches_transformers(tmp_path, name):
    hf = hf_model(name)
    hf.save_pretrained(tmp_path)
    ours = load_pretrained(tmp_path).eval()
    assert_same_logits(ours, hf)
    if hf.config.tie_word_embeddings:
        assert ours.lm_head.weight is ours.embed_tokens.weight


@pytest.mark.parametrize("name", ["llama3", "qwen2-tied", "qwen3"])
def test_round_trip_through_transformers(tmp_path, name):
    hf = hf_model(name)
    hf.save_pretrained(tmp_path / "hf")
    ours = load_pretrained(tmp_path / "hf")
    save_pretrained(ours, tmp_path / "ours", max_shard_bytes=40_000)  # forces several shards
    assert (tmp_path / "ours" / "model.safetensors.index.json").exists()
    back = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "ours").eval()
    assert type(back) is type(hf)
    assert_same_logits(ours.eval(), back)
    assert_same_logits(load_pretrained(tmp_path / "ours").eval(), hf)


def test_sharded_hf_checkpoint(tmp_path):
    hf = hf_model("llama3")
    hf.save_pretrained(tmp_path, max_shard_size="50KB")
    assert len(list(tmp_path.glob("model-*.safetensors"))) > 1
    assert_same_logits(load_pretrained(tmp_path).eval(), hf)


def test_rope_scaling_matches_transformers():
    hf_cfg = hf_configs()["llama3"]
    ours = config_from_hf(hf_cfg.to_dict())
    assert ours.rope_scaling is not None and ours.rope_scaling.factor == 8.0
    theirs, _ = transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS["llama3"](hf_cfg, "cpu")
    torch.testing.assert_close(rope_inv_freq(ours), theirs, atol=0, rtol=0)


def test_legacy_rope_config_keys():
    """Llama 3.2 on the Hub still says rope_theta + rope_scaling, not rope_parameters."""
    legacy = {**SMALL, "model_type": "llama", "rope_theta": 500000.0,
              "rope_scaling": {k: v for k, v in LLAMA3_ROPE.items() if k != "rope_theta"}}
    cfg = config_from_hf(legacy)
    assert cfg.rope_theta == 500000.0 and cfg.rope_scaling.original_max_position_embeddings == 16


def test_load_to_dtype_keeps_tying(tmp_path):
    hf_model("qwen2-tied").save_pretrained(tmp_path)
    model = load_pretrained(tmp_path, device="cpu", dtype=torch.bfloat16)
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    assert {p.device.type for p in model.parameters()} == {"cpu"}
    assert model.lm_head.weight is model.embed_tokens.weight
    model(tokens())[0].sum().backward()  # one Parameter, so one gradient
    assert model.embed_tokens.weight.grad is not None


def test_save_ours_from_scratch(tmp_path):
    torch.manual_seed(0)
    ours = Llama(QwenConfig.qwen3_tiny(vocab_size=128)).eval()
    save_pretrained(ours, tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == "qwen3"
    back = transformers.AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert_same_logits(ours, back)


# --- bad inputs: every one fails before anything is loaded, naming the file ---------------


@pytest.fixture
def ckpt(tmp_path):
    hf_model("llama3").save_pretrained(tmp_path)
    return tmp_path


def test_missing_config(ckpt):
    (ckpt / "config.json").unlink()
    with pytest.raises(FileNotFoundError, match="config.json"):
        load_pretrained(ckpt)


def test_missing_weights_and_pickle_refused(ckpt):
    (ckpt / "model.safetensors").rename(ckpt / "pytorch_model.bin")
    with pytest.raises(FileNotFoundError, match=r"model.safetensors.*pytorch_model.bin.*pickle"):
        load_pretrained(ckpt)


def test_missing_shard(tmp_path):
    hf_model("llama3").save_pretrained(tmp_path, max_shard_size="50KB")
    shard = sorted(tmp_path.glob("model-*.safetensors"))[-1]
    shard.unlink()
    with pytest.raises(FileNotFoundError, match=f"{shard.name}.*listed in model.safetensors"):
        load_pretrained(tmp_path)


def test_truncated_file(ckpt):
    f = ckpt / "model.safetensors"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="model.safetensors"):
        load_pretrained(ckpt)


def test_other_architecture(ckpt):
    (ckpt / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_layer": 2}))
    with pytest.raises(CheckpointError, match=r"config.json: model_type 'gpt2'.*llama"):
        load_pretrained(ckpt)


def test_unsupported_rope_type(ckpt):
    cfg = json.loads((ckpt / "config.json").read_text())
    cfg["rope_parameters"] = {"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0}
    (ckpt / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="rope_type 'yarn'"):
        load_pretrained(ckpt)


def _rewrite(ckpt, edit):
    tensors = load_file(ckpt / "model.safetensors")
    edit(tensors)
    save_file(tensors, ckpt / "model.safetensors", metadata={"format": "pt"})


def test_missing_tensor(ckpt):
    _rewrite(ckpt, lambda t: t.pop("model.layers.1.mlp.up_proj.weight"))
    with pytest.raises(CheckpointError, match=r"missing \['model.layers.1.mlp.up_proj.weight'\]"):
        load_pretrained(ckpt)


def test_unexpected_tensor(ckpt):
    _rewrite(ckpt, lambda t: t.update({"model.layers.2.mlp.up_proj.weight": torch.zeros(2)}))
    with pytest.raises(CheckpointError, match=r"unexpected \['model.layers.2.mlp.up_proj.weight"):
        load_pretrained(ckpt)


def test_wrong_shape(ckpt):
    _rewrite(ckpt, lambda t: t.update({"model.norm.weight": torch.ones(63)}))
    msg = r"'model.norm.weight' has shape \[63\], expected \[64\]"
    with pytest.raises(CheckpointError, match=msg):
        load_pretrained(ckpt)


def test_bad_config_values(ckpt):
    cfg = json.loads((ckpt / "config.json").read_text())
    (ckpt / "config.json").write_text(json.dumps({**cfg, "intermediate_size": 100}))
    msg = r"gate_proj.weight' has shape \[96, 64\], expected \[100, 64\]"
    with pytest.raises(CheckpointError, match=msg):
        load_pretrained(ckpt)
    del cfg["hidden_size"]
    (ckpt / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=r"missing required keys \['hidden_size'\]"):
        load_pretrained(ckpt)


