"""Autoregressive decoding with a KV cache: greedy, top-k and top-p (nucleus) sampling.

Works with any model that has ``new_cache(batch, max_len)`` and
``forward(idx, cache=..., start_pos=...) -> (logits, _)`` (Llama, Qwen).
"""

from __future__ import annotations

import torch


def sample_next(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                top_p: float | None = None, generator: torch.Generator | None = None
                ) -> torch.Tensor:
    """logits (B, vocab) -> next token ids (B, 1). temperature 0 means greedy."""
    if temperature == 0:
        return logits.argmax(-1, keepdim=True)
    logits = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.shape[-1])).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None:
        sorted_logits, order = logits.sort(-1, descending=True)
        probs = sorted_logits.softmax(-1)
        # Drop a token when the tokens ranked above it already hold top_p of the mass; the
        # top token always survives.
        drop = probs.cumsum(-1) - probs > top_p
        drop = drop.scatter(-1, order, drop)
        logits = logits.masked_fill(drop, float("-inf"))
    probs = logits.softmax(-1)
    return torch.multinomial(probs, 1, generator=generator)


@torch.no_grad()
def generate(model, idx: torch.Tensor, max_new_tokens: int, temperature: float = 0.0,
             top_k: int | None = None, top_p: float | None = None,
             generator: torch.Generator | None = None,
             on_token=None) -> torch.Tensor:
    """Extend idx (B, T) by max_new_tokens tokens; returns (B, T + max_new_tokens).

    The prompt is run once (prefill); each later step feeds one token through the cache.
    `on_token(step)` is called after each new token (e.g. a progress bar's update).
    """
    b, t = idx.shape
    cache = model.new_cache(b, t + max_new_tokens)
    logits, _ = model(idx, cache=cache, start_pos=0)
    out = [idx]
    for step in range(max_new_tokens):
        nxt = sample_next(logits[:, -1], temperature, top_k, top_p, generator)
        out.append(nxt)
        if on_token is not None:
            on_token(step)
        if step + 1 < max_new_tokens:
            logits, _ = model(nxt, cache=cache, start_pos=t + step)
    return torch.cat(out, dim=1)
