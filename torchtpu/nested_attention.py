"""``scaled_dot_product_attention`` of jagged nested tensors on tpu.

PyTorch's jagged SDPA picks a backend as CPU does; its math backend (CPU's, and tpu's) copies
the sequences into a strided nested tensor, a layout tpu does not have. On tpu the same
computation runs padded instead: the sequences padded to the longest, the keys past each
sequence's end masked out (their weights exactly zero, as if absent), and the query rows
taken back as a jagged tensor. The other backends' choices and errors stay PyTorch's.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nested._internal import ops as nested_ops
from torch.nested._internal import sdpa

_jagged_sdpa = nested_ops.jagged_scaled_dot_product_attention


def jagged_sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                enable_gqa=False):
    """PyTorch's jagged SDPA, with its math backend run padded for tpu tensors."""
    if query.device.type == "tpu" and not (query.dim() > 3 and query._ragged_idx == 1):
        query, key, value, attn_mask = sdpa._autocast(query, key, value, attn_mask)
        sdpa._validate_sdpa_input(query, key, value, attn_mask, dropout_p, is_causal, scale)
        backend = sdpa._select_sdp_backend(query, key, value, attn_mask, dropout_p, is_causal,
                                           enable_gqa)
        if backend == torch.nn.attention.SDPBackend.MATH:
            return _padded(query, key, value, dropout_p, scale, enable_gqa)
        if backend == torch.nn.attention.SDPBackend.ERROR:  # (its reasons are logged)
            raise RuntimeError("No viable backend for scaled_dot_product_attention was found.")
    return _jagged_sdpa(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)


def _padded(query, key, value, dropout_p, scale, enable_gqa):
    from torch.nested._internal.nested_tensor import nested_view_from_values_offsets_lengths

    # [B, H, j, D] (ragged j) -> [B, H, L, D], L the longest sequence
    q, k, v = (torch.nested.to_padded_tensor(t.transpose(1, 2), 0.0).transpose(1, 2)
               for t in (query, key, value))
    key_lengths = key.offsets().diff()
    present = torch.arange(k.shape[2], device=k.device) < key_lengths[:, None]
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=present[:, None, None, :],
                                         dropout_p=dropout_p, scale=scale,
                                         enable_gqa=enable_gqa)
    batch, heads, longest, width = out.shape
    offsets = query.offsets()
    position = torch.arange(query.transpose(1, 2).values().shape[0], device=out.device)
    sequence = torch.searchsorted(offsets[1:], position, right=True)
    rows = sequence * longest + position - offsets[sequence]
    values = out.transpose(1, 2).reshape(batch * longest, heads, width)[rows]
    return nested_view_from_values_offsets_lengths(
        values, offsets, query.lengths(), min_seqlen=query._maybe_min_seqlen,
        max_seqlen=query._maybe_max_seqlen).transpose(1, 2)


def install() -> None:
    nested_ops.jagged_scaled_dot_product_attention = jagged_sdpa
