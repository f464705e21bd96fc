"""Sequence models on tpu against CPU: nn.LSTM, nn.GRU and their cells (outputs, final
states, every parameter's gradient), packed sequences and CTC with lengths on the host. On an
accelerator PyTorch runs the RNNs through its fused cells (_thnn_fused_lstm_cell,
_thnn_fused_gru_cell) and their workspace backwards; CPU does not."""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import TPU, raises_as_cpu
from torch import nn

import torchtpu

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


@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_packed_sequences_through_a_gru_match_cpu(enforce_sorted):
    torch.manual_seed(0)
    m = nn.GRU(4, 5, batch_first=True)
    on_tpu = copy.deepcopy(m).to(TPU)
    x = torch.randn(3, 6, 4)
    lengths = torch.tensor([6, 4, 2] if enforce_sorted else [2, 6, 4])  # lengths stay on the host

    def run(module, inputs):
        inputs = inputs.clone().requires_grad_()
        packed = nn.utils.rnn.pack_padded_sequence(inputs, lengths, batch_first=True,
                                                   enforce_sorted=enforce_sorted)
        y, h = module(packed)
        padded, lens = nn.utils.rnn.pad_packed_sequence(y, batch_first=True)
        (padded.pow(2).sum() + h.sum()).backward()
        return packed.batch_sizes, padded, h, inputs.grad, lens

    cpu, tpu = run(m, x), run(on_tpu, x.detach().to(TPU))
    assert tpu[0].device.type == "cpu" and torch.equal(tpu[0], cpu[0])  # as from cuda
    for a, b in zip(tpu[1:4], cpu[1:4], strict=True):
        torch.testing.assert_close(a.cpu(), b, **GRAD_TOL)
    assert torch.equal(tpu[4], cpu[4])


def test_pack_padded_sequence_refuses_bad_lengths_as_cpu():
    x = torch.randn(3, 4, 2)
    for lengths in ([4, 2, 0], [2, 4, 1], [4, 2]):
        raises_as_cpu(lambda d, lengths=lengths: torch._pack_padded_sequence(
            x.to(d), torch.tensor(lengths), True))


@pytest.mark.parametrize("shape, lengths", [((0, 0), []), ((0, 1, 10), [[11, 14], [14, 2]])])
def test_pack_padded_sequence_refuses_empty_input_before_its_lengths_as_cpu(shape, lengths):
    # CPU's first check is for an empty input; a tpu one fell through to the lengths checks or
    # to an index_select of float rows (upstream test_packed_sequence).
    raises_as_cpu(lambda d: torch._pack_padded_sequence(
        torch.randn(shape, device=d), torch.tensor(lengths, dtype=torch.int64), True))


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("shape", [(), (3,)])
def test_pack_padded_sequence_of_a_0d_or_1d_input_raises_index_error_as_cpu(shape, batch_first):
    # A tpu input of fewer than two dimensions raised ValueError from unpacking its shape.
    raises_as_cpu(lambda d: torch._pack_padded_sequence(
        torch.ones(shape, device=d), torch.tensor([1]), batch_first), IndexError)


@pytest.mark.parametrize("reduction", ["sum", "mean", "none"])
@pytest.mark.parametrize("kind", ["host", "list"])
def test_ctc_loss_takes_lengths_from_the_host_as_on_cuda(reduction, kind):
    # The mean divided a tpu loss by CPU target lengths (PyTorch's composite for a tensor
    # subclass): a device error.
    torch.manual_seed(0)
    log_probs = torch.randn(12, 2, 5).log_softmax(2)
    targets = torch.tensor([[1, 2, 2], [1, 3, 4]])
    lengths = torch.tensor([12, 10]), torch.tensor([3, 2])
    cpu = log_probs.clone().requires_grad_()
    loss = nn.functional.ctc_loss(cpu, targets, *lengths, reduction=reduction)
    loss.sum().backward()
    tpu = log_probs.to(TPU).requires_grad_()
    given = [v.tolist() for v in lengths] if kind == "list" else lengths
    loss_tpu = nn.functional.ctc_loss(tpu, targets.to(TPU), *given, reduction=reduction)
    loss_tpu.sum().backward()
    torch.testing.assert_close(loss_tpu.cpu(), loss, **TOL)
    torch.testing.assert_close(tpu.grad.cpu(), cpu.grad, **GRAD_TOL)


def test_ctc_loss_with_new_length_lists_compiles_nothing_new():
    # As static arguments each new list of lengths compiled the loss and its backward again.
    def step(target_lengths):
        log_probs = torch.randn(6, 4, 5, device=TPU, requires_grad=True)
        targets = torch.randint(1, 5, (4, 3), device=TPU)
        nn.functional.ctc_loss(log_probs.log_softmax(2), targets, [6] * 4, target_lengths,
                               reduction="sum").backward()
        return log_probs.grad.sum().item()

    step([3, 2, 1, 3])
    before = torchtpu.metrics()["compile"]
    step([1, 1, 2, 3])
    assert torchtpu.metrics()["compile"] == before
