"""TorchScript modules on tpu: saved, loaded, traced and scripted modules moved there."""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import assert_same


def test_torchscript_save_and_load_with_tpu(tmp_path):
    # A loaded script module's .to('tpu') asserted "param must be a Parameter"; loading with
    # map_location='tpu' gave tensors without values; saving a tpu module recursed forever.
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3)).eval()
    x = torch.randn(5, 4)
    expected = net(x)
    path = tmp_path / "net.pt"
    torch.jit.save(torch.jit.script(net), path)
    for module in (torch.jit.load(path).to("tpu"), torch.jit.load(path, map_location="tpu")):
        assert all(t.device.type == "tpu" for t in module.state_dict().values())
        assert_same(module(x.to("tpu")), expected)
    on_tpu = torch.jit.trace(net.to("tpu"), x.to("tpu"))
    torch.jit.save(on_tpu, path)  # written from a CPU copy: the module stays on tpu
    assert next(on_tpu.parameters()).device.type == "tpu"
    assert_same(torch.jit.load(path)(x), expected)


def test_torchscript_conv_and_rnn_modules_move_to_tpu():
    # A trace records aten::_convolution, which asks a backend of its own for
    # convolution_overrideable; a scripted RNN reads the weight list it was scripted with.
    torch.manual_seed(0)
    x, seq = torch.randn(2, 3, 8, 8), torch.randn(3, 5, 8)
    for net, inp in ((torch.nn.Conv2d(3, 4, 3), x), (torch.nn.ConvTranspose2d(3, 4, 3, 2), x),
                     (torch.nn.Conv1d(3, 4, 3), x[:, :, 0])):
        traced = torch.jit.trace(net, (inp,)).to("tpu")
        assert_same(traced(inp.to("tpu")), net(inp), rtol=1e-5)
    conv = torch.nn.Conv2d(3, 4, 3)
    on_tpu = [t.to("tpu").requires_grad_() for t in (x, conv.weight.detach(), conv.bias.detach())]
    on_cpu = [t.detach().clone().requires_grad_() for t in (x, conv.weight, conv.bias)]
    args = ([1, 1], [0, 0], [1, 1], False, [0, 0], 1, False, False, True, True)
    for tensors in (on_tpu, on_cpu):
        torch._convolution(*tensors, *args).square().sum().backward()
    for a, e in zip(on_tpu, on_cpu, strict=True):
        assert_same(a.grad, e.grad, rtol=1e-5, atol=1e-4)

    class Wrapper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = torch.nn.LSTM(8, 16, batch_first=True)

        def forward(self, x):
            return self.rnn(x)[0]

    net = Wrapper()
    scripted = torch.jit.script(net).to("tpu")
    assert_same(scripted(seq.to("tpu")), net(seq), rtol=1e-5)


@pytest.mark.parametrize("net, shape, other", [
    (torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4),
                         torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(64, 5)),
     (2, 3, 4, 4), (1, 3, 4, 4)),
    (torch.nn.Conv1d(4, 4, 3, groups=2, stride=2), (2, 4, 9), (3, 4, 11)),
    (torch.nn.ConvTranspose2d(3, 2, 3, stride=2), (1, 3, 5, 5), (2, 3, 4, 4)),
], ids=["conv_bn_linear", "conv1d_groups", "conv_transpose"])
def test_tracing_on_tpu_records_convolutions(net, shape, other):
    # A meta kernel's shape checks read traced values (TypeError), and the tracer leaves
    # convolution to what CPU's kernel calls: nothing recorded it, so the trace failed.
    torch.manual_seed(0)
    x, y = torch.randn(shape), torch.randn(other)
    net.eval()
    expected, expected_other = net(x), net(y)
    reference = copy.deepcopy(net)  # a trace keeps the mode it was traced in: eval
    reference(x).square().sum().backward()
    grads = [p.grad for p in reference.parameters()]
    traced = torch.jit.trace(net.to("tpu"), x.to("tpu"))
    assert "aten::convolution" in str(traced.inlined_graph)
    assert_same(traced(x.to("tpu")), expected, rtol=1e-5, atol=1e-5)
    assert_same(traced(y.to("tpu")), expected_other, rtol=1e-5, atol=1e-5)
    traced(x.to("tpu")).square().sum().backward()  # and gradients flow through it
    for p, g in zip(net.parameters(), grads, strict=True):
        assert_same(p.grad, g, rtol=1e-4, atol=1e-4)


def test_an_op_error_inside_torchscript_keeps_its_message():
    # The interpreter reported "...RuntimeError: " with nothing after it.
    torch.manual_seed(0)
    traced = torch.jit.trace(torch.nn.Embedding(10, 4), (torch.tensor([[1, 2]]),))
    with pytest.raises(RuntimeError) as on_cpu:
        traced(torch.tensor([[1, 12]]))
    with pytest.raises(RuntimeError) as on_tpu:
        traced.to("tpu")(torch.tensor([[1, 12]], device="tpu"))
    assert str(on_tpu.value).endswith("RuntimeError: index out of range in self")
    assert str(on_cpu.value).rstrip().endswith("RuntimeError: index out of range in self")
