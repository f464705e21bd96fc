"""Recurrent cells: the fused LSTM and GRU cells PyTorch's nn.LSTM/nn.GRU run on an
accelerator, and their backwards (which read the gates the forward saves in a workspace)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from .dtypes import opmath
from .registry import lowering

aten = torch.ops.aten


def _with_bias(gates, bias):
    return gates if bias is None else gates + bias


# skip_meta: PyTorch's meta kernels for the two cells fail when the biases are None.
@lowering(aten._thnn_fused_lstm_cell, skip_meta=True)
@opmath
def _fused_lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    gates = _with_bias(input_gates, input_bias) + _with_bias(hidden_gates, hidden_bias)
    i, f, g, o = jnp.split(gates, 4, axis=-1)
    i, f, g, o = jax.nn.sigmoid(i), jax.nn.sigmoid(f), jnp.tanh(g), jax.nn.sigmoid(o)
    cy = f * cx + i * g
    hy = o * jnp.tanh(cy)
    return hy, cy, jnp.concatenate([i, f, g, o], axis=-1)  # the activated gates


@lowering(aten._thnn_fused_lstm_cell_backward_impl)
@opmath
def _fused_lstm_cell_backward(grad_hy, grad_cy, cx, cy, workspace, has_bias):
    i, f, g, o = jnp.split(workspace, 4, axis=-1)
    tanh_cy = jnp.tanh(cy)
    grad_hy = jnp.zeros_like(cy) if grad_hy is None else grad_hy
    grad_c = grad_hy * o * (1 - tanh_cy * tanh_cy)
    if grad_cy is not None:
        grad_c = grad_c + grad_cy
    grad_gates = jnp.concatenate([
        grad_c * g * i * (1 - i),
        grad_c * cx * f * (1 - f),
        grad_c * i * (1 - g * g),
        grad_hy * tanh_cy * o * (1 - o),
    ], axis=-1)
    grad_bias = grad_gates.sum(0) if has_bias else None
    return grad_gates, grad_c * f, grad_bias


@lowering(aten._thnn_fused_gru_cell, skip_meta=True)
@opmath
def _fused_gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    ir, ii, in_ = jnp.split(_with_bias(input_gates, input_bias), 3, axis=-1)
    hr, hi, hn = jnp.split(_with_bias(hidden_gates, hidden_bias), 3, axis=-1)
    r = jax.nn.sigmoid(ir + hr)
    z = jax.nn.sigmoid(ii + hi)
    n = jnp.tanh(in_ + r * hn)
    hy = n + z * (hx - n)
    return hy, jnp.concatenate([r, z, n, hx, hn], axis=-1)


@lowering(aten._thnn_fused_gru_cell_backward)
@opmath
def _fused_gru_cell_backward(grad_hy, workspace, has_bias):
    r, z, n, hx, hn = jnp.split(workspace, 5, axis=-1)
    grad_n = grad_hy * (1 - z) * (1 - n * n)
    grad_r = grad_n * hn * r * (1 - r)
    grad_z = grad_hy * (hx - n) * z * (1 - z)
    grad_input = jnp.concatenate([grad_r, grad_z, grad_n], axis=-1)
    grad_hidden = jnp.concatenate([grad_r, grad_z, grad_n * r], axis=-1)
    if not has_bias:
        return grad_input, grad_hidden, grad_hy * z, None, None
    return grad_input, grad_hidden, grad_hy * z, grad_input.sum(0), grad_hidden.sum(0)
