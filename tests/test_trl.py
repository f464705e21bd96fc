"""trl's SFT, DPO and reward trainers on a tiny random Llama: tpu gives CPU's losses, logged
metrics and final weights (the trainers take tpu as transformers' Trainer does)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("datasets")
trl = pytest.importorskip("trl")
t = pytest.importorskip("transformers")
state = pytest.importorskip("accelerate.state")

from datasets import Dataset  # noqa: E402

WORDS = "the a cat dog sat ran on mat fast slow red blue good bad yes no".split()


def _tokenizer():
    # a word-level vocabulary built here: the tests must not download one
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2, **{w: i + 3 for i, w in enumerate(WORDS)}}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    return t.PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>",
                                     eos_token="<eos>", unk_token="<unk>")


def _llama(cls=None, **kwargs):
    torch.manual_seed(0)
    config = t.LlamaConfig(vocab_size=32, hidden_size=32, intermediate_size=64,
                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                           pad_token_id=0, eos_token_id=1, bos_token_id=1, **kwargs)
    return (cls or t.LlamaForCausalLM)(config)


def _args(config_cls, tmp_path, device):
    return config_cls(output_dir=str(tmp_path / device), max_steps=3, max_length=16,
                      per_device_train_batch_size=2, logging_steps=1, report_to=[],
                      save_strategy="no", learning_rate=1e-3, use_cpu=device == "cpu",
                      disable_tqdm=True, seed=0, bf16=False, fp16=False)


def _sft(args):
    data = Dataset.from_dict({"text": ["the cat sat on the mat", "a dog ran fast", "the red cat",
                                       "blue dog sat on a mat"]})
    return trl.SFTTrainer(model=_llama(), args=args, train_dataset=data,
                          processing_class=_tokenizer())


def _dpo(args):
    data = Dataset.from_dict({"prompt": ["the cat", "a dog", "the red", "blue dog"],
                              "chosen": [" sat on the mat", " ran fast", " cat sat", " sat"],
                              "rejected": [" bad", " no no", " slow dog ran", " yes"]})
    return trl.DPOTrainer(model=_llama(), ref_model=_llama(), args=args, train_dataset=data,
                          processing_class=_tokenizer())


def _reward(args):
    data = Dataset.from_dict({"chosen": ["the cat sat on the mat", "a dog ran fast",
                                         "the red cat", "blue dog"],
                              "rejected": ["the bad", "a no no", "the slow", "blue yes"]})
    model = _llama(t.LlamaForSequenceClassification, num_labels=1)
    return trl.RewardTrainer(model=model, args=args, train_dataset=data,
                             processing_class=_tokenizer())


def _fresh_accelerator(monkeypatch):
    monkeypatch.delenv("ACCELERATE_USE_CPU", raising=False)  # use_cpu's, for this run
    state.AcceleratorState._reset_state(reset_partial_state=True)  # a per-process singleton


def test_trl_config_picks_tpu(tmp_path, monkeypatch):
    for device in ("cpu", "tpu"):
        _fresh_accelerator(monkeypatch)
        assert _args(trl.SFTConfig, tmp_path, device).device.type == device


@pytest.mark.slow
@pytest.mark.parametrize("name,config", [("sft", "SFTConfig"), ("dpo", "DPOConfig"),
                                         ("reward", "RewardConfig")])
def test_trl_trainer_matches_cpu(name, config, tmp_path, monkeypatch):
    build = {"sft": _sft, "dpo": _dpo, "reward": _reward}[name]
    logs, weights = {}, {}
    for device in ("cpu", "tpu"):
        _fresh_accelerator(monkeypatch)
        trainer = build(_args(getattr(trl, config), tmp_path, device))
        trainer.train()
        assert next(trainer.model.parameters()).device.type == device
        logs[device] = [log for log in trainer.state.log_history if "loss" in log]
        weights[device] = [p.detach().cpu() for p in trainer.model.state_dict().values()]
    assert len(logs["tpu"]) == len(logs["cpu"]) == 3
    for tpu, cpu in zip(logs["tpu"], logs["cpu"], strict=True):
        for key, value in cpu.items():
            if isinstance(value, float) and key != "learning_rate":
                assert tpu[key] == pytest.approx(value, rel=1e-4, abs=1e-5), key
    for tpu, cpu in zip(weights["tpu"], weights["cpu"], strict=True):
        torch.testing.assert_close(tpu, cpu, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_grpo_trains_on_tpu(tmp_path, monkeypatch):
    # sampling draws from tpu's own generator, so only that it runs and stays on tpu
    _fresh_accelerator(monkeypatch)
    data = Dataset.from_dict({"prompt": ["the cat", "a dog", "the red", "blue dog"]})
    args = trl.GRPOConfig(output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=4,
                          num_generations=2, max_completion_length=6, logging_steps=1,
                          report_to=[], save_strategy="no", disable_tqdm=True, bf16=False,
                          seed=0)
    trainer = trl.GRPOTrainer(model=_llama(), args=args, train_dataset=data,
                              reward_funcs=lambda completions, **_: [float(len(c))
                                                                     for c in completions],
                              processing_class=_tokenizer())
    trainer.train()
    assert next(trainer.model.parameters()).device.type == "tpu"
    losses = [log["loss"] for log in trainer.state.log_history if "loss" in log]
    assert len(losses) == 2 and all(map(torch.isfinite, torch.tensor(losses)))
