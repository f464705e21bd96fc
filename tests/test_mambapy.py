"""mambapy (pure-PyTorch Mamba) used unchanged with ``.to("tpu")``: its selective scan, both
the parallel (Blelloch) scan, which updates strided views of its inputs in place, and the
sequential one, trains as on CPU (loss, gradients, SGD steps) in strict and fused eager mode
and under ``torch.compile(backend="tpu")``; so do the bidirectional vision Mamba and Jamba
(Mamba + grouped-query attention + mixture-of-experts with its load-balancing loss); the
recurrent ``step`` inference gives the parallel forward's outputs. mamba2 needs mamba_ssm's
Triton kernels and is left out. All tests are ``slow`` (cold compiles: the parallel scan is
~30 s)."""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import TPU, assert_same
from model_zoo_checks import check_training

X = torch.randn(2, 12, 16, generator=torch.Generator().manual_seed(0))
VOCAB = 30
TOKENS = torch.randint(1, VOCAB, (2, 12), generator=torch.Generator().manual_seed(0))


def _mamba(**options):
    from mambapy.mamba import Mamba, MambaConfig

    return Mamba(MambaConfig(**(dict(d_model=16, n_layers=2, d_state=8) | options)))


def _vision_mamba():
    from mambapy import vim

    return vim.VMamba(vim.MambaConfig(d_model=16, n_layers=2, d_state=8))


def _jamba():
    from mambapy.jamba import JambaLM, JambaLMConfig

    return JambaLM(JambaLMConfig(d_model=16, n_layers=4, mlp_size=32, d_state=8,
                                 num_attention_heads=4, num_key_value_heads=2, num_experts=4,
                                 num_experts_per_tok=2, attn_layer_offset=1, attn_layer_period=2,
                                 expert_layer_offset=1, expert_layer_period=2,
                                 vocab_size=VOCAB))


def _mse(model, device):
    return model(X.to(device)).square().mean()


def _jamba_loss(model, device):
    from mambapy.jamba import load_balancing_loss

    logits, router_logits = model(TOKENS.to(device))
    return (torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB),
                                              TOKENS.to(device).reshape(-1))
            + 0.01 * load_balancing_loss(router_logits, 4, 2))


MODELS = {
    "parallel_scan": (_mamba, _mse),
    "sequential_scan": (lambda: _mamba(pscan=False), _mse),
    "inner_layernorms_mup_bias": (lambda: _mamba(n_layers=1, inner_layernorms=True, mup=True,
                                                 bias=True), _mse),
    "vision_bidirectional": (_vision_mamba, _mse),
    "jamba_moe_attention": (_jamba, _jamba_loss),
}


@pytest.mark.slow
@pytest.mark.parametrize("model", MODELS)
def test_training_matches_cpu(model):
    pytest.importorskip("mambapy")
    check_training(*MODELS[model])


@pytest.mark.slow
def test_parallel_scan_fused_training_matches_cpu():
    pytest.importorskip("mambapy")
    check_training(lambda: _mamba(n_layers=1), _mse, mode="fused")


@pytest.mark.slow
def test_parallel_scan_compiled_training_matches_cpu():
    pytest.importorskip("mambapy")
    check_training(lambda: _mamba(n_layers=1), _mse, mode="compile")


@pytest.mark.slow
def test_recurrent_steps_match_parallel_forward():
    pytest.importorskip("mambapy")
    torch.manual_seed(0)
    model = _mamba().eval()
    model_tpu = copy.deepcopy(model).to(TPU)

    def run(m, x):
        cfg = m.config
        caches = [(None, torch.zeros(len(x), cfg.d_inner, cfg.d_conv - 1, device=x.device))
                  for _ in range(cfg.n_layers)]
        outs = []
        for t in range(x.shape[1]):
            y, caches = m.step(x[:, t], caches)
            outs.append(y)
        return m(x), torch.stack(outs, 1)

    with torch.no_grad():
        parallel, stepped = run(model_tpu, X.to(TPU))
        expected = run(model, X)
    assert_same(stepped, parallel.cpu(), rtol=1e-4, atol=1e-4)
    assert_same((parallel, stepped), expected, rtol=1e-4, atol=1e-4)
