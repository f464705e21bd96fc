"""xlstm used unchanged with ``.to("tpu")``, on its pure-PyTorch paths only (never its CUDA or
Triton kernels): the xLSTMLMModel block stack of mLSTM blocks (parallel stabilised backend)
and an sLSTM block (``backend="vanilla"``, a Python loop over time) and the xLSTMLarge model
on mlstm_kernels' native chunkwise and sequence kernels train as on CPU (loss, gradients,
SGD steps); the block stack's recurrent ``step`` gives its parallel forward's outputs, and
xLSTMLarge's inference mode (the sequence kernel, a state carried into the step kernel,
greedy ``generate``) gives CPU's logits and tokens.

xLSTMLarge is run with ``return_last_states=True``: with False its mLSTM layer unpacks the
kernel's single output tensor as ``(h, state)`` and fails on CPU too. All tests are ``slow``
(cold compiles: ~45 s a model)."""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import TPU, assert_same
from model_zoo_checks import check_training

VOCAB = 24
TOKENS = torch.randint(0, VOCAB, (2, 8), generator=torch.Generator().manual_seed(0))


def _stack_config():
    import xlstm

    return xlstm.xLSTMLMModelConfig(
        vocab_size=VOCAB, context_length=8, num_blocks=2, embedding_dim=16, slstm_at=[1],
        mlstm_block=xlstm.mLSTMBlockConfig(mlstm=xlstm.mLSTMLayerConfig(
            conv1d_kernel_size=4, qkv_proj_blocksize=4, num_heads=2)),
        slstm_block=xlstm.sLSTMBlockConfig(
            slstm=xlstm.sLSTMLayerConfig(backend="vanilla", num_heads=2, conv1d_kernel_size=4,
                                         bias_init="powerlaw_blockdependent"),
            feedforward=xlstm.FeedForwardConfig(proj_factor=1.3, act_fn="gelu")))


def _block_stack_lm():
    import xlstm

    return xlstm.xLSTMLMModel(_stack_config())


def _large(mode="train"):
    from xlstm.xlstm_large.model import xLSTMLarge, xLSTMLargeConfig

    return xLSTMLarge(xLSTMLargeConfig(
        embedding_dim=16, num_heads=2, num_blocks=2, vocab_size=VOCAB, mode=mode,
        inference_state_dtype="float32",
        chunkwise_kernel="chunkwise--native_autograd", sequence_kernel="native_sequence__native",
        step_kernel="native", chunk_size=4, return_last_states=True,
        autocast_kernel_dtype="float32"))


def _lm_loss(model, device):
    logits = model(TOKENS.to(device))
    logits = logits[0] if isinstance(logits, tuple) else logits
    return torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB),
                                             TOKENS.to(device).reshape(-1))


@pytest.mark.slow
@pytest.mark.parametrize("make", [_block_stack_lm, _large], ids=["block_stack", "large"])
def test_training_matches_cpu(make):
    pytest.importorskip("xlstm")
    check_training(make, _lm_loss)


@pytest.mark.slow
def test_block_stack_steps_match_parallel_forward():
    pytest.importorskip("xlstm")
    torch.manual_seed(0)
    model = _block_stack_lm().eval()
    model_tpu = copy.deepcopy(model).to(TPU)

    def run(m, tokens):
        state, outs = None, []
        for t in range(tokens.shape[1]):
            y, state = m.step(tokens[:, t:t + 1], state)
            outs.append(y)
        return m(tokens), torch.cat(outs, 1)

    with torch.no_grad():
        parallel, stepped = run(model_tpu, TOKENS.to(TPU))
        expected = run(model, TOKENS)
    assert_same(stepped, parallel.cpu(), rtol=1e-4, atol=1e-4)
    assert_same((parallel, stepped), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_large_inference_and_greedy_generation_match_cpu():
    pytest.importorskip("xlstm")
    torch.manual_seed(0)
    model = _large(mode="inference").eval()
    model_tpu = copy.deepcopy(model).to(TPU)

    def run(m, device):
        tokens = TOKENS.to(device)
        with torch.no_grad():
            logits, state = m(tokens)
            next_logits, _ = m(tokens[:, :1], state)
            generated = m.generate(prefill_tokens=tokens[:, :4], max_length=6,
                                   sampling_type="greedy")
        return logits, next_logits, generated[0]

    assert_same(run(model_tpu, TPU), run(model, "cpu"), rtol=1e-4, atol=1e-4)
