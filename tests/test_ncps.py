"""ncps' liquid networks used unchanged with ``.to("tpu")``: closed-form continuous-time (CfC)
RNNs in each mode (default, pure, no-gate), with mixed memory, a projection, a backbone MLP
and NCP wirings, and liquid time-constant (LTC) RNNs (an unrolled ODE solver with sparsity
masks from fully connected, NCP and random wirings, irregular time spans, unbatched input)
train as on CPU (loss, gradients, SGD steps), in strict and fused eager mode and under
``torch.compile(backend="tpu")``.

Time spans are given for a batch of one: ncps squeezes each step's span to shape (batch,)
and multiplies it with (batch, units) states, which fails on CPU too for other batches. All
tests are ``slow`` (the Python loop over time is a cold compile per step shape)."""

from __future__ import annotations

import pytest
import torch
from model_zoo_checks import check_training

_g = torch.Generator().manual_seed(0)
X = torch.randn(3, 6, 4, generator=_g)
TARGET = torch.randn(3, 6, 2, generator=_g)
SPANS = torch.rand(1, 6, 1, generator=_g) + 0.5


def _loss(model, device, x=X, spans=None):
    out, state = model(x.to(device), timespans=None if spans is None else spans.to(device))
    state = state[0] if isinstance(state, tuple) else state
    return (out[..., :2] - TARGET[:len(x)].to(device)).square().mean() + state.square().mean()


def _cfc(**options):
    from ncps.torch import CfC

    return lambda: CfC(4, 8, **options)


def _ltc(wiring=None, **options):
    from ncps import wirings
    from ncps.torch import LTC

    def make():
        units = 8 if wiring is None else wiring(wirings)
        return LTC(4, units, **options)

    return make


MODELS = {
    "cfc_projected": lambda: (_cfc(proj_size=2), _loss),
    "cfc_pure_mixed_memory": lambda: (_cfc(mode="pure", mixed_memory=True, backbone_units=16,
                                           backbone_layers=2), _loss),
    "cfc_no_gate_time_spans": lambda: (_cfc(mode="no_gate", activation="gelu"),
                                       lambda m, d: _loss(m, d, X[:1], SPANS)),
    "cfc_ncp_wiring": lambda: (_cfc_wired, _loss),
    "ltc_fully_connected": lambda: (_ltc(), _loss),
    "ltc_ncp_mixed_time_spans": lambda: (
        _ltc(lambda w: w.NCP(4, 3, 2, sensory_fanout=2, inter_fanout=2,
                             recurrent_command_synapses=2, motor_fanin=2, seed=0),
             mixed_memory=True),
        lambda m, d: _loss(m, d, X[:1], SPANS)),
    "ltc_random_unbatched_last": lambda: (
        _ltc(lambda w: w.Random(6, 2, sparsity_level=0.5, random_seed=0),
             return_sequences=False),
        lambda m, d: m(X[0].to(d))[0].square().sum()),
}


def _cfc_wired():
    from ncps.torch import CfC
    from ncps.wirings import AutoNCP

    return CfC(4, AutoNCP(10, 2, seed=0))


@pytest.mark.slow
@pytest.mark.parametrize("model", MODELS)
def test_training_matches_cpu(model):
    pytest.importorskip("ncps")
    check_training(*MODELS[model]())


@pytest.mark.slow
@pytest.mark.parametrize("model", ["cfc_projected", "ltc_fully_connected"])
def test_fused_training_matches_cpu(model):
    pytest.importorskip("ncps")
    check_training(*MODELS[model](), mode="fused")


@pytest.mark.slow
def test_compiled_ltc_training_matches_cpu():
    pytest.importorskip("ncps")
    check_training(*MODELS["ltc_fully_connected"](), mode="compile")
