import torch

from torchtpu.models.qwen import Qwen, QwenConfig


def test_qwen2_has_qkv_bias_only():
    attn = Qwen(QwenConfig.qwen2_tiny()).layers[0].self_attn
    assert attn.q_proj.bias is not None and attn.v_proj.bias is not None
    assert attn.o_proj.bias is None and attn.q_norm is None


def test_qwen3_normalises_q_and_k():
    torch.manual_seed(0)
    model = Qwen(QwenConfig.qwen3_tiny()).eval()
    attn = model.layers[0].self_attn
    assert attn.q_proj.bias is None
    assert attn.q_norm.weight.shape == (32,)  # per head, head_dim 32
    idx = torch.randint(0, 256, (1, 8))
    before = model(idx)[0]
    with torch.no_grad():
        attn.k_norm.weight.mul_(3.0)
    assert not torch.allclose(model(idx)[0], before)


def test_published_sizes():
    with torch.device("meta"):
        n06 = sum(p.numel() for p in Qwen(QwenConfig.qwen3_0_6b()).parameters())
        n05 = sum(p.numel() for p in Qwen(QwenConfig.qwen2_5_0_5b()).parameters())
    assert 0.59e9 < n06 < 0.61e9  # Qwen3-0.6B: 0.596B with tied embeddings
    assert 0.49e9 < n05 < 0.50e9  # Qwen2.5-0.5B: 0.494B
