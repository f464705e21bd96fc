"""rotary-embedding-torch on "tpu": RotaryEmbedding's rotations (language, xpos, interpolated
positions, learned frequencies, pixel / axial frequencies, cached keys) give CPU's values,
and an attention block using them gives CPU's outputs and gradients, eagerly and compiled.

The default test keeps the language and xpos rotations; the rest are ``slow``."""

from __future__ import annotations

import pytest
import torch
from conftest import TPU, assert_same

import torchtpu

rotary = pytest.importorskip("rotary_embedding_torch")
from rotary_embedding_torch import RotaryEmbedding, apply_rotary_emb  # noqa: E402

TOL = dict(rtol=1e-5, atol=1e-5)
_g = torch.Generator().manual_seed(0)
_Q, _K = torch.randn(2, 4, 16, 32, generator=_g), torch.randn(2, 4, 16, 32, generator=_g)


def _both(fn, **tol):
    assert_same(fn(TPU), fn("cpu"), **(tol or TOL))


def test_language_and_xpos_rotations():
    def run(device):
        q, k = _Q.to(device), _K.to(device)
        lang = RotaryEmbedding(dim=16).to(device)
        xpos = RotaryEmbedding(dim=16, use_xpos=True).to(device)
        return [lang.rotate_queries_or_keys(q), lang.rotate_queries_or_keys(k, offset=3),
                *xpos.rotate_queries_and_keys(q, k)]

    _both(run)


ROTATIONS = {
    "interpolated": lambda d: RotaryEmbedding(dim=16, interpolate_factor=2.0).to(d)
    .rotate_queries_or_keys(_Q.to(d)),
    "seq_before_head_dim": lambda d: RotaryEmbedding(dim=16, seq_before_head_dim=True).to(d)
    .rotate_queries_or_keys(_Q.to(d).transpose(1, 2)),
    "cached_keys": lambda d: RotaryEmbedding(dim=16).to(d)
    .rotate_queries_with_cached_keys(_Q.to(d)[:, :, -4:], _K.to(d)),
    "bfloat16": lambda d: RotaryEmbedding(dim=16).to(d)
    .rotate_queries_or_keys(_Q.to(d).bfloat16()),
}


def _pixel(device):
    rot = RotaryEmbedding(dim=8, freqs_for="pixel", max_freq=64).to(device)
    freqs = rot.get_axial_freqs(8, 8)
    image = torch.randn(1, 8, 8, 32, generator=torch.Generator().manual_seed(2)).to(device)
    return [freqs, apply_rotary_emb(freqs, image)]


def _learned(device):
    rot = RotaryEmbedding(dim=16, learned_freq=True).to(device)
    q = _Q.to(device).requires_grad_()
    out = rot.rotate_queries_or_keys(q)
    # (not a norm: a rotation keeps those, whose gradient by the frequencies is then 0)
    (out * torch.linspace(-1, 1, 32, device=device)).sum().backward()
    return [out, q.grad, rot.freqs.grad]


@pytest.mark.slow
def test_other_rotations():
    for name, fn in ROTATIONS.items():
        tol = dict(rtol=1e-2, atol=1e-2) if name == "bfloat16" else TOL
        try:
            _both(fn, **tol)
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from e
    _both(_pixel)
    _both(_learned, rtol=1e-4, atol=1e-4)


class _Attention(torch.nn.Module):
    def __init__(self, xpos: bool):
        super().__init__()
        self.qkv, self.out = torch.nn.Linear(32, 96), torch.nn.Linear(32, 32)
        self.rotary = RotaryEmbedding(dim=8, use_xpos=xpos)

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, 4, 8).permute(2, 0, 3, 1, 4)
        if self.rotary.use_xpos:
            q, k = self.rotary.rotate_queries_and_keys(q, k)
        else:
            q, k = self.rotary.rotate_queries_or_keys(q), self.rotary.rotate_queries_or_keys(k)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, n, 32))


@pytest.mark.slow
@pytest.mark.parametrize("how", ["strict", "fused", "compiled", "xpos"])
def test_attention_block_forward_and_backward(how):
    def run(device):
        torch.manual_seed(0)
        block = _Attention(xpos=how == "xpos").to(device)
        call = block
        if how == "compiled":
            call = torch.compile(block, backend="tpu" if device == TPU else "eager")
        x = torch.randn(2, 10, 32, generator=torch.Generator().manual_seed(1)).to(device)
        x.requires_grad_()
        y = call(x)
        y.square().mean().backward()
        return [y, x.grad] + [p.grad for p in block.parameters() if p.requires_grad]

    with torchtpu.set_eager_mode("fused" if how == "fused" else "strict"):
        _both(run, rtol=1e-4, atol=1e-5)
