import pytest
import torch

from torchtpu.models.gpt import GPT, GPTConfig


def test_forward_shapes_and_loss():
    torch.manual_seed(0)
    cfg = GPTConfig.tiny(vocab_size=37, block_size=16)
    model = GPT(cfg)
    idx = torch.randint(0, 37, (3, 16))
    targets = torch.randint(0, 37, (3, 16))
    logits, loss = model(idx, targets)
    assert logits.shape == (3, 16, 37)
    # A fresh model predicts close to uniform.
    assert abs(loss.item() - torch.log(torch.tensor(37.0)).item()) < 0.3
    assert model(idx)[1] is None


def test_causal():
    """Changing a later token must not change logits at earlier positions."""
    torch.manual_seed(0)
    model = GPT(GPTConfig.tiny(vocab_size=11, block_size=8)).eval()
    idx = torch.randint(0, 11, (1, 8))
    idx2 = idx.clone()
    idx2[0, 5] = (idx[0, 5] + 1) % 11
    a, b = model(idx)[0], model(idx2)[0]
    torch.testing.assert_close(a[:, :5], b[:, :5])
    assert not torch.allclose(a[:, 5:], b[:, 5:])


def test_weight_tying_and_param_count():
    model = GPT(GPTConfig.tiny())
    assert model.lm_head.weight is model.wte.weight
    # GPT-2 small is 124M parameters with the tied embedding counted once.
    with torch.device("meta"):
        big = GPT(GPTConfig.gpt2())
    assert 124_000_000 < big.num_params() < 125_000_000


def test_too_long_sequence_raises():
    model = GPT(GPTConfig.tiny(block_size=4))
    with pytest.raises(ValueError, match="block_size"):
        model(torch.zeros(1, 5, dtype=torch.long))


def test_learns_a_pattern():
    torch.manual_seed(0)
    model = GPT(GPTConfig.tiny(vocab_size=8, block_size=8))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    idx = torch.arange(8).repeat(4, 1)  # next token is always current + 1
    for _ in range(30):
        _, loss = model(idx[:, :-1], idx[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.2
