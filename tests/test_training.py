"""End to end: training and third-party models on tpu give CPU's numbers."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from conftest import assert_same

from torchtpu.models.gpt import GPT, GPTConfig


def _train_gpt(device: str, steps: int, dropout: float = 0.0):
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=97, block_size=32, n_layer=2, n_head=4, n_embd=64,
                    dropout=dropout)
    model = GPT(cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    gen = torch.Generator().manual_seed(1)
    # A few fixed sequences: learnable, so the loss falls.
    corpus = torch.randint(0, cfg.vocab_size, (6, 33), generator=gen)
    losses = []
    for _ in range(steps):
        rows = corpus[torch.randint(0, 6, (4,), generator=gen)]
        x, y = rows[:, :-1], rows[:, 1:]
        _, loss = model(x.to(device), y.to(device))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses


def test_mingpt_20_steps_match_cpu():
    cpu = _train_gpt("cpu", 20)
    tpu = _train_gpt("tpu", 20)
    assert cpu[-1] < cpu[0] - 0.5  # it actually trains
    for a, b in zip(tpu, cpu, strict=False):
        assert abs(a - b) <= 1e-4 * abs(b), (tpu, cpu)


def test_mingpt_trains_with_dropout():
    losses = _train_gpt("tpu", 8, dropout=0.1)
    assert losses[-1] < losses[0]


def _hf_cases():
    t = pytest.importorskip("transformers")
    small = dict(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                 num_attention_heads=4)
    return {
        "llama": lambda: t.LlamaForCausalLM(t.LlamaConfig(**small, num_key_value_heads=2)),
        "qwen2": lambda: t.Qwen2ForCausalLM(t.Qwen2Config(**small, num_key_value_heads=2)),
        "mixtral": lambda: t.MixtralForCausalLM(t.MixtralConfig(
            **small, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2)),
        "gpt2": lambda: t.GPT2LMHeadModel(t.GPT2Config(vocab_size=100, n_embd=32, n_layer=2,
                                                       n_head=4, n_positions=32)),
        "bert": lambda: t.BertForMaskedLM(t.BertConfig(**small, max_position_embeddings=32)),
        "t5": lambda: t.T5ForConditionalGeneration(t.T5Config(
            vocab_size=100, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
            decoder_start_token_id=0, pad_token_id=0)),
        "vit": lambda: t.ViTForImageClassification(t.ViTConfig(
            image_size=16, patch_size=4, hidden_size=32, num_hidden_layers=2,
            num_attention_heads=4, intermediate_size=64, num_labels=3)),
    }


@pytest.mark.parametrize("name", ["llama", "qwen2", "mixtral", "gpt2", "bert", "t5", "vit"])
def test_huggingface_model_forward_backward_matches_cpu(name):
    make = _hf_cases()[name]
    torch.manual_seed(0)
    ref = make().eval()
    if name == "vit":
        inputs = {"pixel_values": torch.randn(2, 3, 16, 16), "labels": torch.tensor([0, 2])}
    else:
        ids = torch.randint(0, 100, (2, 12))
        inputs = {"input_ids": ids, "labels": ids}
    results = []
    for device in ("cpu", "tpu"):
        model = make().eval()
        model.load_state_dict(ref.state_dict())
        model.to(device)
        out = model(**{k: v.to(device) for k, v in inputs.items()})
        out.loss.backward()
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        results.append((out.logits, out.loss, grads))
    assert len(results[1][2]) == len(results[0][2]) > 0
    assert_same(results[1], results[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name, cache", [("llama", None), ("llama", "static"), ("t5", None)])
def test_huggingface_generate_gives_cpus_tokens(name, cache):
    # A left-padded batch, greedy: the growing (dynamic) or fixed-size (static) KV cache,
    # the padding mask and the stopping checks all run on tpu.
    make = _hf_cases()[name]
    torch.manual_seed(0)
    model = make().eval()
    ids = torch.randint(1, 100, (2, 6), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[0, :2] = 0
    kwargs = dict(max_new_tokens=3, do_sample=False, pad_token_id=0, cache_implementation=cache)
    cpu = model.generate(input_ids=ids, attention_mask=mask, **kwargs)
    tpu = model.to("tpu").generate(input_ids=ids.to("tpu"), attention_mask=mask.to("tpu"),
                                   **kwargs)
    assert tpu.device.type == "tpu"
    assert torch.equal(tpu.cpu(), cpu)


def test_huggingface_trainer_trains_on_tpu_as_on_cpu(tmp_path, monkeypatch):
    # The Trainer takes its device from torch.accelerator, accelerate (which prepares the
    # model and batches) its own way, which torchtpu teaches it; use_cpu still means the CPU.
    t = pytest.importorskip("transformers")
    state = pytest.importorskip("accelerate.state")

    class Batches(torch.utils.data.Dataset):
        def __len__(self):
            return 6

        def __getitem__(self, i):
            x = torch.randint(0, 64, (12,), generator=torch.Generator().manual_seed(i))
            return {"input_ids": x, "labels": x}

    losses = {}
    for device in ("cpu", "tpu"):
        torch.manual_seed(0)
        config = t.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                               num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
        model = t.LlamaForCausalLM(config)
        monkeypatch.delenv("ACCELERATE_USE_CPU", raising=False)  # use_cpu's, for this run
        state.AcceleratorState._reset_state(reset_partial_state=True)  # a per-process singleton
        args = t.TrainingArguments(output_dir=str(tmp_path / device), max_steps=3,
                                   per_device_train_batch_size=2, logging_steps=1,
                                   report_to=[], save_strategy="no", learning_rate=1e-3,
                                   use_cpu=device == "cpu", disable_tqdm=True)
        trainer = t.Trainer(model=model, args=args, train_dataset=Batches())
        trainer.train()
        assert next(trainer.model.parameters()).device.type == device
        losses[device] = [log["loss"] for log in trainer.state.log_history if "loss" in log]
    assert losses["tpu"] == pytest.approx(losses["cpu"], rel=1e-4)


def test_libraries_imported_before_torchtpu_find_tpu():
    pytest.importorskip("accelerate")
    pytest.importorskip("transformers")
    code = (
        "import accelerate.state\n"
        "from transformers import LlamaForCausalLM\n"
        "from transformers.utils.import_utils import is_torch_flex_attn_available as flex\n"
        "assert flex()  # a CPU-only process: yes, and cached\n"
        "import torchtpu\n"
        "from accelerate import Accelerator\n"
        "print(Accelerator().device, flex())\n"
    )
    env = {**os.environ, "TORCHTPU_CACHE_DIR": ""}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    # (accelerate >= 1.16 finds the accelerator itself: "tpu", as it gives "cuda"; before,
    # torchtpu's hook gave "tpu:0")
    device, flex_found = out.stdout.split()
    assert torch.device(device).type == "tpu" and flex_found == "False"


def test_accelerate_offloads_and_sets_parameters_on_tpu():
    # accelerate makes a new parameter like an old one with type(p)(data, requires_grad=...);
    # a tpu Parameter's class is TpuTensor, whose constructor refused that.
    big_modeling = pytest.importorskip("accelerate.big_modeling")
    from accelerate.utils import set_module_tensor_to_device

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
    x = torch.randn(3, 4)
    expected = model(x)
    big_modeling.cpu_offload(model, execution_device=torch.device("tpu:0"))
    assert_same(model(x.to("tpu")), expected, rtol=1e-6, atol=1e-7)

    layer = torch.nn.Linear(2, 2).to("tpu")
    set_module_tensor_to_device(layer, "weight", "tpu", value=torch.ones(2, 2))
    assert isinstance(layer.weight, torch.nn.Parameter) and layer.weight.requires_grad
    assert layer.weight.device.type == "tpu" and layer.weight.sum().item() == 4
