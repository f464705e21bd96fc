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
    for a, b in zip(tpu, cpu):
        assert abs(a - b) <= 1e-4 * abs(b), (tpu, cpu)


def test_mingpt_trains_with_dropout():
    losses = _train_gpt("tpu", 8, dropout=0.1)
    assert losses[-1] < losses[0]


def test_huggingface_model_forward_backward_matches_cpu():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    ref = transformers.LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, 128, (2, 16))
    results = []
    for device in ("cpu", "tpu"):
        model = transformers.LlamaForCausalLM(cfg).eval()
        model.load_state_dict(ref.state_dict())
        model.to(device)
        out = model(input_ids=ids.to(device), labels=ids.to(device))
        out.loss.backward()
        grads = [p.grad for p in model.parameters()]
        results.append((out.logits, out.loss, grads))
    assert_same(results[1], results[0], rtol=1e-4, atol=1e-5)
