"""Bucketed dynamic shapes: varying sequence lengths reuse one program per bucket."""

from __future__ import annotations

import copy

import pytest
import torch
from compile_testlib import fresh_dynamo  # noqa: F401  (autouse fixture)
from conftest import TPU

from torchtpu.compile.buckets import parse
from torchtpu.debug import metrics, reset_metrics
from torchtpu.models.gpt import GPT, GPTConfig


def _forward_backward(model, idx, targets):
    logits, loss = model(idx, targets)
    loss.backward()
    return logits, loss


def test_gpt_lengths_share_bucket_programs_and_match_cpu():
    torch.manual_seed(0)
    cpu_model = GPT(GPTConfig.tiny(vocab_size=64, block_size=64))
    tpu_model = copy.deepcopy(cpu_model).to(TPU)
    options = {"buckets": {"sizes": (16, 32), "pad": {"targets": -100}}}
    step = torch.compile(_forward_backward, backend="tpu", options=options)
    reset_metrics()
    for length in (5, 7, 9, 13, 16, 20, 31):
        idx, targets = torch.randint(0, 64, (2, length)), torch.randint(0, 64, (2, length))
        logits_cpu, loss_cpu = _forward_backward(cpu_model, idx, targets)
        logits, loss = step(tpu_model, idx.to(TPU), targets.to(TPU))
        assert logits.shape == (2, length, 64)
        torch.testing.assert_close(logits.cpu(), logits_cpu, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(loss.cpu(), loss_cpu, rtol=1e-5, atol=1e-6)
        for a, b in zip(tpu_model.parameters(), cpu_model.parameters(), strict=True):
            torch.testing.assert_close(a.grad.cpu(), b.grad, rtol=1e-4, atol=1e-6)
            a.grad = b.grad = None
    graph = metrics()["graph"]
    # Length 5 is traced static; from 7 on one symbolic graph, one program per bucket.
    assert graph["dynamo_graph"] == 2
    assert graph["bucket_compile"] == 2
    assert metrics()["cache"]["bucket_hit"] == 4


def test_bucket_spec_forms():
    assert parse(None) is None
    assert parse([64, 16]).sizes == (16, 64)
    spec = parse({"sizes": [8], "pad": {1: -100}})
    assert spec.bucket(3) == 8 and spec.bucket(9) == 9 and spec.pad == {1: -100}


def _compare_lengths(fn, make, lengths=(5, 7, 9), **options):
    """``fn`` bucketed on tpu against CPU eager, per length; the graph metrics after."""
    compiled = torch.compile(fn, backend="tpu", options={"buckets": {"sizes": (8, 16),
                                                                     **options}})
    reset_metrics()
    for length in lengths:
        torch.manual_seed(length)
        args = make(length)
        expected = fn(*args)
        actual = compiled(*[a.to(TPU) if isinstance(a, torch.Tensor) else a for a in args])
        torch.testing.assert_close(actual.cpu(), expected, rtol=1e-5, atol=1e-5)
    return metrics()["graph"]


def _sequences(length):
    return (torch.randn(2, length, 4),)


def _attention(length):
    return tuple(torch.randn(2, 2, length, 8) for _ in range(3))


def _float_mask(length):
    mask = torch.zeros(2, length)
    mask[0, -2:] = float("-inf")
    return (*_attention(length), mask)


F = torch.nn.functional
# Each reads padded positions at some real one: the graph must run unpadded.
READS_PADDING = {
    "mean": (lambda x: x.mean(1), _sequences),
    "softmax": (lambda x: x.softmax(1), _sequences),
    "sort": (lambda x: x.sort(1).values, _sequences),
    "flip": (lambda x: x.flip(1), _sequences),
    "last": (lambda x: x[:, -1], _sequences),
    "length as a number": (lambda x: x.sum(1) / x.shape[1], _sequences),
    "positions counted down": (
        lambda x: x * torch.arange(x.shape[1], 0, -1, device=x.device)[:, None], _sequences),
    "layer_norm over it": (lambda x: F.layer_norm(x.transpose(1, 2), x.shape[1:2]), _sequences),
    "attention, no mask": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v), _attention),
    "mask padded with 0": (
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m[:, None, None]),
        _float_mask),
}


# The default suite runs three kinds (a reduction, attention, a size as a number); make
# test-slow all of them.
_DEFAULT_READS = {"mean", "attention, no mask", "length as a number"}


def test_an_output_slicing_cannot_cut_back_runs_unpadded_and_says_so():
    # Its size is one more than the input's (a decode step's grown cache): it was run
    # unpadded without a count or a note.
    from torchtpu.debug import explain_recompile

    graph = _compare_lengths(lambda x: torch.cat([x, x[:, :1]], dim=1) * 2, _sequences)
    assert graph["bucket_unpadded"] == 1
    assert "cannot be cut back by slicing" in explain_recompile()


@pytest.mark.parametrize("case", [
    pytest.param(case, id=name, marks=() if name in _DEFAULT_READS else pytest.mark.slow)
    for name, case in READS_PADDING.items()])
def test_a_graph_that_reads_padded_positions_runs_unpadded(case):
    fn, make = case
    graph = _compare_lengths(fn, make)
    assert graph["bucket_unpadded"] == 1
    assert "bucket_compile" in graph  # one program per size, as without buckets


# Real positions never read padded ones: one program per bucket.
IGNORES_PADDING = {
    "elementwise and a prefix scan": (lambda x: (x * 2).cumsum(1).relu(), _sequences),
    # q, k and v of one projection share their length (separate inputs could differ, and
    # a shorter key sequence would let real queries see padded keys: run unpadded)
    "causal attention": (lambda qkv: F.scaled_dot_product_attention(*qkv.unbind(0),
                                                                    is_causal=True),
                         lambda length: (torch.randn(3, 2, 2, length, 8),)),
    "mask padded with -inf": (
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m[:, None, None]),
        _float_mask),
}


@pytest.mark.parametrize("case", IGNORES_PADDING.values(), ids=IGNORES_PADDING.keys())
def test_a_graph_that_ignores_padded_positions_shares_bucket_programs(case):
    fn, make = case
    graph = _compare_lengths(fn, make, lengths=(5, 7, 9, 11), pad={"m": float("-inf")})
    assert "bucket_unpadded" not in graph
    assert graph["bucket_compile"] == 2  # 7 -> 8; 9 and 11 -> 16


def test_a_pad_naming_no_input_is_pointed_out():
    # "target" for "targets": the loss's padded targets are then 0, not its ignore_index
    def loss(logits, targets):
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)

    with pytest.warns(UserWarning, match=r"'pad' names \['target'\], no input of this graph "
                                         r"\(its inputs: \['logits', 'targets'\]\)"):
        graph = _compare_lengths(loss, lambda n: (torch.randn(2, n, 4),
                                                  torch.randint(0, 4, (2, n))),
                                 pad={"target": -100})
    assert graph["bucket_unpadded"] == 1


def test_a_number_argument_is_passed_as_it_is():
    graph = _compare_lengths(lambda x, k: x * k, lambda n: (torch.ones(3), n))
    assert "bucket_compile" not in graph or graph.get("bucket_unpadded", 0) == 0


def test_a_smaller_last_batch_trains_as_on_cpu():
    # The batch dimension turns symbolic at the first smaller batch; the mean loss over
    # padded rows would divide by the bucket.
    torch.manual_seed(0)
    cpu = torch.nn.Linear(4, 1)
    tpu = copy.deepcopy(cpu).to(TPU)

    def step_of(net):
        opt = torch.optim.SGD(net.parameters(), lr=0.1)

        def step(x, y):
            loss = F.mse_loss(net(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss
        return step

    compiled = torch.compile(step_of(tpu), backend="tpu", options={"buckets": [64, 128]})
    eager = step_of(cpu)
    for batch in (32, 32, 20, 32, 12):
        x, y = torch.randn(batch, 4), torch.randn(batch, 1)
        torch.testing.assert_close(compiled(x.to(TPU), y.to(TPU)).cpu(), eager(x, y))
    torch.testing.assert_close(tpu.weight.detach().cpu(), cpu.weight.detach())


def test_a_write_into_a_padded_input_reaches_the_caller():
    def scale(x):
        x.mul_(2)
        return x + 1

    compiled = torch.compile(scale, backend="tpu", options={"buckets": [8, 16]})
    for length in (5, 7, 9):
        x = torch.ones(2, length, device=TPU)
        out = compiled(x)
        assert torch.equal(x.cpu(), torch.full((2, length), 2.0))
        assert torch.equal(out.cpu(), torch.full((2, length), 3.0))


def test_cut_outputs_are_contiguous_tensors_of_their_own():
    compiled = torch.compile(lambda x: x * 2, backend="tpu", options={"buckets": [8, 16]})
    for length in (5, 7):
        out = compiled(torch.ones(2, length, 3, device=TPU))
    assert out.is_contiguous() and out.view(-1).shape == (42,)
    assert out.untyped_storage().nbytes() == 42 * 4


@pytest.mark.parametrize("spec", [8, "816", [8.7], [True, 16], [-8, 16], {"size": [8]},
                                  {"sizes": [8], "pad": -100}, {"sizes": [8], "pad": {"x": "a"}}])
def test_malformed_bucket_options_are_refused(spec):
    with pytest.raises(ValueError, match="torchtpu: (unknown )?bucket"):
        parse(spec)
