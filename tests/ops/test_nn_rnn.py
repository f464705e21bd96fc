"""nn.LSTM, nn.GRU and their cells on tpu against CPU: outputs, final states and every
parameter's gradient. On an accelerator PyTorch runs them through its fused cells
(_thnn_fused_lstm_cell, _thnn_fused_gru_cell) and their workspace backwards; CPU does not."""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import TPU
from torch import nn

TOL = dict(rtol=1e-5, atol=1e-5)
GRAD_TOL = dict(rtol=1e-4, atol=1e-5)

MODULES = {
    "lstm_2_layers": lambda: nn.LSTM(4, 5, num_layers=2, batch_first=True),
    "lstm_no_bias_bidirectional": lambda: nn.LSTM(4, 5, bias=False, bidirectional=True,
                                                  batch_first=True),
    "lstm_proj": lambda: nn.LSTM(4, 6, proj_size=3, batch_first=True),
    "gru_2_layers": lambda: nn.GRU(4, 5, num_layers=2, batch_first=True),
    "gru_no_bias_bidirectional": lambda: nn.GRU(4, 5, bias=False, bidirectional=True,
                                                batch_first=True),
}


def _state_loss(out):
    y, h = out
    h = h[0] if isinstance(h, tuple) else h
    return y.sum() + h.pow(2).sum()


@pytest.mark.parametrize("name", sorted(MODULES))
def test_recurrent_module_matches_cpu(name):
    torch.manual_seed(0)
    m = MODULES[name]()
    on_tpu = copy.deepcopy(m).to(TPU)
    x = torch.randn(3, 7, 4)
    out, out_tpu = m(x), on_tpu(x.to(TPU))
    torch.testing.assert_close(out_tpu[0].cpu(), out[0], **TOL)
    _state_loss(out).backward()
    _state_loss(out_tpu).backward()
    for (n, p), q in zip(m.named_parameters(), on_tpu.parameters(), strict=True):
        torch.testing.assert_close(q.grad.cpu(), p.grad, **GRAD_TOL, msg=lambda s, n=n: f"{n}: {s}")


@pytest.mark.parametrize("cell", [nn.LSTMCell, nn.GRUCell])
def test_cells_with_a_given_state_match_cpu(cell):
    torch.manual_seed(0)
    c = cell(4, 5)
    on_tpu = copy.deepcopy(c).to(TPU)
    x, h = torch.randn(3, 4, requires_grad=True), torch.randn(3, 5)
    state = (h, torch.randn(3, 5)) if cell is nn.LSTMCell else h
    out = c(x, state)
    x_tpu = x.detach().to(TPU).requires_grad_()
    out_tpu = on_tpu(x_tpu, tuple(s.to(TPU) for s in state) if isinstance(state, tuple)
                     else state.to(TPU))
    first, first_tpu = (out[0], out_tpu[0]) if isinstance(out, tuple) else (out, out_tpu)
    torch.testing.assert_close(first_tpu.cpu(), first, **TOL)
    first.pow(2).sum().backward()
    first_tpu.pow(2).sum().backward()
    torch.testing.assert_close(x_tpu.grad.cpu(), x.grad, **GRAD_TOL)
