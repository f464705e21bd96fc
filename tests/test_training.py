"""End to end: training and third-party models on tpu give CPU's numbers."""

from __future__ import annotations

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
