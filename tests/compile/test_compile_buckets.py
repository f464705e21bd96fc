"""Bucketed dynamic shapes: varying sequence lengths reuse one program per bucket."""

from __future__ import annotations

import copy

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
