"""torchtune's decoders used unchanged with ``.to("tpu")``: its llama3, qwen2 and gemma builders
with tiny configurations (2 layers, 32 wide, grouped-query attention), LoRA, its chunked
cross-entropy loss, and its KV-cached greedy generation give CPU's logits, losses, gradients,
AdamW steps and tokens.

torchtune 0.6 imports ``torchao.dtypes.nf4tensor``, which newer torchao moved to
``torchao.quantization.quantize_.workflows.nf4.nf4_tensor``; the module is aliased to its
new place before the import (nothing here quantizes). Generation is greedy (``top_k=1``): the
sampling draw comes from the device's stream. Everything is ``slow`` (cold compiles)."""

from __future__ import annotations

import copy
import importlib
import sys

import pytest
import torch
from conftest import TPU, assert_same
from model_zoo_checks import assert_same_gradients, assert_same_parameters

import torchtpu

try:
    importlib.import_module("torchao.dtypes.nf4tensor")
except ImportError:
    try:
        sys.modules["torchao.dtypes.nf4tensor"] = importlib.import_module(
            "torchao.quantization.quantize_.workflows.nf4.nf4_tensor")
    except ImportError:
        pass
torchtune = pytest.importorskip("torchtune")
from torchtune.generation import generate  # noqa: E402
from torchtune.models.gemma import gemma  # noqa: E402
from torchtune.models.llama3 import llama3, lora_llama3  # noqa: E402
from torchtune.models.qwen2 import qwen2  # noqa: E402
from torchtune.modules.loss import CEWithChunkedOutputLoss  # noqa: E402

pytestmark = pytest.mark.slow

TOL = dict(rtol=1e-4, atol=1e-4)
V = 64
_TINY = dict(vocab_size=V, num_layers=2, num_heads=4, num_kv_heads=2, embed_dim=32,
             max_seq_len=32, intermediate_dim=64)
BUILDERS = {
    "llama3": lambda: llama3(**_TINY),
    "qwen2": lambda: qwen2(**_TINY, tie_word_embeddings=True),
    "gemma": lambda: gemma(**{k: v for k, v in _TINY.items() if k != "max_seq_len"},
                           head_dim=8, max_seq_len=32),
    "lora_llama3": lambda: lora_llama3(["q_proj", "v_proj", "output_proj"],
                                       apply_lora_to_mlp=True, apply_lora_to_output=True,
                                       **_TINY, lora_rank=4, lora_alpha=8.0),
}


def _tokens():
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, V, (2, 12), generator=g)
    labels = tokens.roll(-1, 1)
    labels[:, -1] = -100
    labels[0, :3] = -100
    return tokens, labels


def _pair(name):
    torch.manual_seed(0)
    model = BUILDERS[name]()
    if name.startswith("lora"):
        for n, p in model.named_parameters():
            if "lora" in n:  # lora_b starts at zero: give the adapters a say
                torch.nn.init.normal_(p, std=0.1)
            p.requires_grad_("lora" in n)
    return model, copy.deepcopy(model).to(TPU)


@pytest.mark.parametrize("name", list(BUILDERS))
def test_decoder_chunked_loss_training_steps(name):
    model, model_tpu = _pair(name)
    tokens, labels = _tokens()
    loss_fn = CEWithChunkedOutputLoss(num_output_chunks=4)
    opts = []
    for m in (model, model_tpu):
        m.set_num_output_chunks(4)
        # SGD: AdamW's first step turns a gradient of rounding noise (a key bias's) into a
        # full-size step of either sign
        opts.append(torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=0.1))
    for step in range(3):
        logits, logits_tpu = model(tokens), model_tpu(tokens.to(TPU))
        if step == 0:
            assert_same(logits_tpu, logits, **TOL)
        loss, loss_tpu = loss_fn(logits, labels), loss_fn(logits_tpu, labels.to(TPU))
        assert_same(loss_tpu, loss, **TOL)
        for opt, lo in zip(opts, (loss, loss_tpu), strict=True):
            opt.zero_grad()
            lo.backward()
        if step == 0:
            assert_same_gradients(model_tpu, model, rtol=1e-3, atol=1e-4)
        for opt in opts:
            opt.step()
    assert_same_parameters(model_tpu, model, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_kv_cached_greedy_generation(mode):
    model, model_tpu = _pair("llama3")
    prompt = torch.tensor([[0, 0, 5, 7, 9], [3, 4, 5, 6, 7]])  # left-padded with pad_id 0
    for m, dev in ((model, "cpu"), (model_tpu, TPU)):
        with torch.device(dev):  # the caches are made on the default device, as on cuda
            m.eval().setup_caches(batch_size=2, dtype=torch.float32, decoder_max_seq_len=16)
    kw = dict(max_generated_tokens=6, pad_id=0, top_k=1, stop_tokens=[V - 1])
    with torch.no_grad(), torchtpu.set_eager_mode(mode):
        tokens, logits = generate(model, prompt, **kw)
        tokens_tpu, logits_tpu = generate(model_tpu, prompt.to(TPU), **kw)
    assert_same(tokens_tpu, tokens)
    assert_same(logits_tpu, logits, **TOL)
