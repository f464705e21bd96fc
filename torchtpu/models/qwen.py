"""Qwen2 / Qwen2.5 and Qwen3: Llama's architecture with two switches.

- Qwen2: biases on the q, k and v projections (``attention_bias=True``).
- Qwen3: no biases, but each head of q and k is RMS-normalised before RoPE (``qk_norm=True``),
  and ``head_dim`` is set explicitly (128), not derived from ``hidden_size``.

Everything else (RMSNorm, RoPE, grouped-query attention, SwiGLU, KV cache, the block call
signature) is ``llama.py``'s; the model class is ``Llama`` itself, re-exported as ``Qwen``.
"""

from __future__ import annotations

from dataclasses import dataclass

from torchtpu.models.llama import Llama, LlamaConfig


@dataclass
class QwenConfig(LlamaConfig):
    """A ``LlamaConfig`` with Qwen's defaults; use the constructors below."""

    vocab_size: int = 151936
    rope_theta: float = 1000000.0
    rms_norm_eps: float = 1e-6
    max_seq_len: int = 32768

    @classmethod
    def qwen2_tiny(cls, **kw) -> QwenConfig:
        base = dict(vocab_size=256, hidden_size=64, intermediate_size=128, n_layers=2, n_heads=4,
                    n_kv_heads=2, max_seq_len=256, attention_bias=True)
        return cls(**{**base, **kw})

    @classmethod
    def qwen3_tiny(cls, **kw) -> QwenConfig:
        # head_dim 32 with hidden 64 and 4 heads: q_proj widens, as Qwen3's real sizes do.
        base = dict(vocab_size=256, hidden_size=64, intermediate_size=128, n_layers=2, n_heads=4,
                    n_kv_heads=2, head_dim=32, max_seq_len=256, qk_norm=True)
        return cls(**{**base, **kw})

    @classmethod
    def qwen2_5_0_5b(cls) -> QwenConfig:
        return cls(hidden_size=896, intermediate_size=4864, n_layers=24, n_heads=14, n_kv_heads=2,
                   attention_bias=True, tie_word_embeddings=True)

    @classmethod
    def qwen2_5_1_5b(cls) -> QwenConfig:
        return cls(hidden_size=1536, intermediate_size=8960, n_layers=28, n_heads=12,
                   n_kv_heads=2, attention_bias=True, tie_word_embeddings=True)

    @classmethod
    def qwen2_5_7b(cls) -> QwenConfig:
        return cls(vocab_size=152064, hidden_size=3584, intermediate_size=18944, n_layers=28,
                   n_heads=28, n_kv_heads=4, attention_bias=True, max_seq_len=131072)

    @classmethod
    def qwen3_0_6b(cls) -> QwenConfig:
        return cls(hidden_size=1024, intermediate_size=3072, n_layers=28, n_heads=16,
                   n_kv_heads=8, head_dim=128, qk_norm=True, tie_word_embeddings=True,
                   max_seq_len=40960)

    @classmethod
    def qwen3_1_7b(cls) -> QwenConfig:
        return cls(hidden_size=2048, intermediate_size=6144, n_layers=28, n_heads=16,
                   n_kv_heads=8, head_dim=128, qk_norm=True, tie_word_embeddings=True,
                   max_seq_len=40960)

    @classmethod
    def qwen3_8b(cls) -> QwenConfig:
        return cls(hidden_size=4096, intermediate_size=12288, n_layers=36, n_heads=32,
                   n_kv_heads=8, head_dim=128, qk_norm=True, max_seq_len=40960)


# One implementation serves both families; the name is for readers of user code.
Qwen = Llama

__all__ = ["Qwen", "QwenConfig"]
