"""Llama 3 / 3.1 / 3.2 in plain PyTorch, with Hugging Face parameter names (minus ``model.``).

Layout, chosen so a streaming trainer can run the blocks one at a time::

    embed_tokens -> layers[0..n) -> norm -> lm_head

Block call signature (every ``Llama.layers[i]``, also Qwen's)::

    hidden = block(hidden, rope, cache=None, start_pos=0)

    hidden     (B, T, hidden_size)
    rope       (cos, sin) from ``model.rope(positions)``, each (T, head_dim) float32;
               compute it once per forward and share it across blocks
    cache      this layer's ``KVCache`` when generating, else None (training)
    start_pos  position of hidden[:, 0] in the sequence (only meaningful with a cache)

A streaming forward is therefore::

    h = model.embed_tokens(idx)
    rope = model.rope(torch.arange(T, device=idx.device))
    for block in model.layers:
        h = block(h, rope)
    logits = model.lm_head(model.norm(h))

The model holds no buffers: RoPE frequencies are recomputed from the config per device, so a
model built on the ``meta`` device and loaded with ``assign=True`` is complete, and casting to
bfloat16 never touches the RoPE frequencies (kept in float32, as Hugging Face does).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class Llama3RopeScaling:
    """Llama 3.1's frequency-dependent RoPE scaling (HF ``rope_type: "llama3"``)."""

    factor: float = 8.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192


@dataclass
class LlamaConfig:
    vocab_size: int = 128256
    hidden_size: int = 4096
    intermediate_size: int = 14336
    n_layers: int = 32
    n_heads: int = 32
    n_kv_heads: int = 8
    head_dim: int | None = None  # hidden_size // n_heads when None
    rms_norm_eps: float = 1e-5
    rope_theta: float = 500000.0
    rope_scaling: Llama3RopeScaling | None = None
    max_seq_len: int = 8192
    tie_word_embeddings: bool = False
    attention_bias: bool = False  # Qwen2 has biases on q, k and v
    qk_norm: bool = False  # Qwen3 RMS-normalises each head of q and k
    extra: dict = field(default_factory=dict)  # unused HF config keys, kept for saving

    def __post_init__(self):
        if self.head_dim is None:
            self.head_dim = self.hidden_size // self.n_heads
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads {self.n_heads} not divisible by n_kv_heads "
                             f"{self.n_kv_heads}")

    @classmethod
    def tiny(cls, **kw) -> LlamaConfig:
        """Four heads sharing two KV heads, with Llama 3.1 scaling, for tests."""
        base = dict(
            vocab_size=256, hidden_size=64, intermediate_size=128, n_layers=2, n_heads=4,
            n_kv_heads=2, max_seq_len=256,
            rope_scaling=Llama3RopeScaling(original_max_position_embeddings=32),
        )
        return cls(**{**base, **kw})

    @classmethod
    def llama3_8b(cls) -> LlamaConfig:
        return cls()

    @classmethod
    def llama3_1_8b(cls) -> LlamaConfig:
        return cls(rope_scaling=Llama3RopeScaling(), max_seq_len=131072)

    @classmethod
    def llama3_1_70b(cls) -> LlamaConfig:
        return cls(hidden_size=8192, intermediate_size=28672, n_layers=80, n_heads=64,
                   rope_scaling=Llama3RopeScaling(), max_seq_len=131072)

    @classmethod
    def llama3_2_1b(cls) -> LlamaConfig:
        return cls(hidden_size=2048, intermediate_size=8192, n_layers=16, n_heads=32,
                   head_dim=64, tie_word_embeddings=True, max_seq_len=131072,
                   rope_scaling=Llama3RopeScaling(factor=32.0))

    @classmethod
    def llama3_2_3b(cls) -> LlamaConfig:
        return cls(hidden_size=3072, intermediate_size=8192, n_layers=28, n_heads=24,
                   head_dim=128, tie_word_embeddings=True, max_seq_len=131072,
                   rope_scaling=Llama3RopeScaling(factor=32.0))


def rope_inv_freq(cfg: LlamaConfig) -> torch.Tensor:
    """Inverse RoPE frequencies (head_dim/2,) in float32 on CPU, computed as HF does."""
    dim = cfg.head_dim
    exps = torch.arange(0, dim, 2, dtype=torch.int64, device="cpu").float() / dim
    inv_freq = 1.0 / (cfg.rope_theta**exps)
    s = cfg.rope_scaling
    if s is None:
        return inv_freq
    # Long wavelengths are divided by `factor`, short ones kept, the band between interpolated.
    low_wavelen = s.original_max_position_embeddings / s.low_freq_factor
    high_wavelen = s.original_max_position_embeddings / s.high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / s.factor, inv_freq)
    smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) / (
        s.high_freq_factor - s.low_freq_factor
    )
    smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled
    medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return torch.where(medium, smoothed, scaled)


class RotaryEmbedding(nn.Module):
    """Maps positions to (cos, sin); holds no tensors that `.to()` or `assign=True` would see."""

    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self._inv_freq_cpu = rope_inv_freq(cfg)
        self._inv_freq: dict[torch.device, torch.Tensor] = {}

    def forward(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """positions: (T,) integer tensor. Returns cos, sin of shape (T, head_dim), float32."""
        dev = positions.device
        if dev not in self._inv_freq:
            self._inv_freq[dev] = self._inv_freq_cpu.to(dev)
        freqs = positions.float()[:, None] * self._inv_freq[dev][None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: (B, heads, T, head_dim). HF's half-split layout, not Meta's interleaved one."""
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    return x * cos + rotate_half(x) * sin


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Normalise in float32 and cast back before the scale, matching HF bit for bit in bf16.
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(x.dtype)


class KVCache:
    """Preallocated keys and values of one layer, (B, n_kv_heads, max_len, head_dim) each.

    Fixed shapes keep the compiled programs of a device backend stable from step to step.
    """

    def __init__(self, batch: int, max_len: int, n_kv_heads: int, head_dim: int,
                 device: torch.device | str | None = None, dtype: torch.dtype = torch.float32):
        shape = (batch, n_kv_heads, max_len, head_dim)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)

    def update(self, k: torch.Tensor, v: torch.Tensor, start: int):
        """Write k, v at positions [start, start+T); return keys and values for [0, start+T)."""
        end = start + k.shape[2]
        if end > self.k.shape[2]:
            raise ValueError(f"KV cache holds {self.k.shape[2]} positions; asked for {end}")
        self.k[:, :, start:end] = k
        self.v[:, :, start:end] = v
        return self.k[:, :, :end], self.v[:, :, :end]


class Attention(nn.Module):
    """Grouped-query attention: n_heads query heads share n_kv_heads key/value heads."""

    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        d, hd, b = cfg.hidden_size, cfg.head_dim, cfg.attention_bias
        self.q_proj = nn.Linear(d, cfg.n_heads * hd, bias=b)
        self.k_proj = nn.Linear(d, cfg.n_kv_heads * hd, bias=b)
        self.v_proj = nn.Linear(d, cfg.n_kv_heads * hd, bias=b)
        self.o_proj = nn.Linear(cfg.n_heads * hd, d, bias=False)
        if cfg.qk_norm:
            self.q_norm = RMSNorm(hd, cfg.rms_norm_eps)
            self.k_norm = RMSNorm(hd, cfg.rms_norm_eps)
        else:
            self.q_norm = self.k_norm = None

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor],
                cache: KVCache | None = None, start_pos: int = 0) -> torch.Tensor:
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.n_heads, self.head_dim)
        k = self.k_proj(x).view(b, t, self.n_kv_heads, self.head_dim)
        v = self.v_proj(x).view(b, t, self.n_kv_heads, self.head_dim)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        if cache is not None:
            k, v = cache.update(k, v, start_pos)
        # Repeat KV heads explicitly (rather than sdpa's enable_gqa) to keep the op set ordinary.
        rep = self.n_heads // self.n_kv_heads
        if rep > 1:
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        mask, causal = None, t > 1
        if causal and k.shape[2] != t:
            # Queries start mid-sequence: is_causal would align the mask top-left, so build the
            # bottom-right aligned one (query i sees keys up to start_pos + i).
            qpos = torch.arange(t, device=x.device)[:, None] + (k.shape[2] - t)
            mask, causal = torch.arange(k.shape[2], device=x.device)[None, :] <= qpos, False
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    """SwiGLU feed-forward."""

    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderBlock(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor],
                cache: KVCache | None = None, start_pos: int = 0) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), rope, cache, start_pos)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    """Decoder-only LM. ``forward(idx, targets=None) -> (logits, loss)`` like ``GPT``."""

    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.config = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.rope = RotaryEmbedding(cfg)
        self.layers = nn.ModuleList(DecoderBlock(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.embed_tokens.weight
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def new_cache(self, batch: int, max_len: int, device=None, dtype=None) -> list[KVCache]:
        """One empty KVCache per layer, on the model's device and dtype unless told otherwise."""
        w = self.embed_tokens.weight
        c = self.config
        return [KVCache(batch, max_len, c.n_kv_heads, c.head_dim, device or w.device,
                        dtype or w.dtype) for _ in self.layers]

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None, *,
                cache: list[KVCache] | None = None, start_pos: int = 0):
        """idx (B, T) -> (logits (B, T, vocab), loss or None). Targets of -100 are ignored."""
        t = idx.shape[1]
        h = self.embed_tokens(idx)
        rope = self.rope(torch.arange(start_pos, start_pos + t, device=idx.device))
        for i, block in enumerate(self.layers):
            h = block(h, rope, None if cache is None else cache[i], start_pos)
        logits = self.lm_head(self.norm(h))
        loss = None
        if targets is not None:
            flat = logits.reshape(-1, logits.shape[-1]).float()  # loss in float32 under bf16
            loss = F.cross_entropy(flat, targets.reshape(-1))
        return logits, loss
