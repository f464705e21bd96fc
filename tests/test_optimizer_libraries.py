"""Optimizers from outside torch.optim on tpu, against CPU: D-Adaptation, Prodigy, CAME, Adan,
GaLore, muP (MuAdam/MuSGD over MuReadout and set_base_shapes), torchao's low-bit AdamW
(quantized state in tensor subclasses, steps through torch.compile) and heavyball (steps
through its own inductor backend). Each trains a small model a few steps; losses, parameters
and state must match after each, also through GradScaler with an inf gradient and a state
dict carried tpu -> cpu -> tpu. The default suite runs Prodigy; ``-m slow`` the rest.
(pytorch-optimizer has test_pytorch_optimizer.py; torch-optimizer test_torch_optimizer.py.)"""

from __future__ import annotations

import io

import pytest
import torch
from conftest import TPU
from optimizer_library_checks import assert_matches_cpu, batches, state_of

import torchtpu


def _lib(name):
    return pytest.importorskip(name)


def _prodigy(p):
    return _lib("prodigyopt").Prodigy(p, lr=1.0, weight_decay=0.01, safeguard_warmup=True)


OPTIMIZERS = {
    "prodigy": _prodigy,
    "prodigy_plain": lambda p: _lib("prodigyopt").Prodigy(p, lr=1.0),
    "dadapt_adam": lambda p: _lib("dadaptation").DAdaptAdam(p, lr=1.0, weight_decay=0.01,
                                                             decouple=True),
    "dadapt_adagrad": lambda p: _lib("dadaptation").DAdaptAdaGrad(p, lr=1.0),
    "dadapt_sgd": lambda p: _lib("dadaptation").DAdaptSGD(p, lr=1.0, momentum=0.9),
    "dadapt_adan": lambda p: _lib("dadaptation").DAdaptAdan(p, lr=1.0),
    "dadapt_lion": lambda p: _lib("dadaptation").DAdaptLion(p, lr=1.0),
    "came": lambda p: _lib("came_pytorch").CAME(p, lr=1e-3, weight_decay=0.01),
    "adan": lambda p: _lib("adan_pytorch").Adan(p, lr=1e-2, weight_decay=0.02),
    "galore_adafactor": lambda p: _galore(p, "GaLoreAdafactor", relative_step=False,
                                          scale_parameter=False, warmup_init=False),
}
# (D-Adaptation's Adan and Adan divide by sqrt of second moments of gradient differences,
# near zero for the LayerNorm bias: CPU's float32 run is 1e-4 from its float64 one)
LOOSE = {"dadapt_adan": 1e-4, "adan": 2e-4}


def _galore(params, name, **kwargs):
    # Matrices projected on a rank-2 subspace refreshed every 2 steps; the rest plain.
    # (GaLoreAdamW's projection is an SVD's singular vectors, whose signs CPU's LAPACK and
    # XLA choose differently, as cuda's does; its Adam moments carried across a refresh then
    # differ. GaLoreAdafactor's factored moments do not depend on the signs.)
    params = list(params)
    return getattr(_lib("galore_torch"), name)(
        [{"params": [p for p in params if p.ndim < 2]},
         {"params": [p for p in params if p.ndim == 2], "rank": 2, "update_proj_gap": 2,
          "scale": 0.25, "proj_type": "std"}], lr=1e-2, **kwargs)


# ---- muP ----

class _MuNet(torch.nn.Module):
    def __init__(self, width: int):
        super().__init__()
        mup = _lib("mup")
        self.emb = torch.nn.Embedding(11, width)
        self.ln = torch.nn.LayerNorm(width)
        self.fc = torch.nn.Linear(width, width)
        self.out = mup.MuReadout(width, 3)

    def forward(self, idx):
        h = self.emb(idx)
        return self.out((h + torch.tanh(self.fc(self.ln(h)))).mean(1))


def _mu_model():
    # (set_base_shapes on CPU, then model.to(tpu): the Parameters keep their infshape)
    mup = _lib("mup")
    model = _MuNet(16)
    mup.set_base_shapes(model, _MuNet(4), delta=_MuNet(8))
    for p in model.parameters():
        if p.ndim == 2:
            mup.init.normal_(p, std=0.05)
    return model


# ---- torchao ----

def _ao_model():
    # torchao quantizes state of 4096 values or more: one such matrix, and small ones kept.
    return torch.nn.Sequential(torch.nn.Linear(6, 32), torch.nn.Tanh(),
                               torch.nn.Linear(32, 128), torch.nn.Tanh(), torch.nn.Linear(128, 3))


def _ao(name):
    ao = pytest.importorskip("torchao.optim")
    return lambda p: getattr(ao, name)(p, lr=1e-2)


# ---- default suite ----

def test_prodigy_matches_cpu():
    assert_matches_cpu(_prodigy, kind="mlp", steps=3)


# ---- slow sweeps ----

@pytest.mark.slow
def test_mup_adam_matches_cpu():
    mup = _lib("mup")
    assert_matches_cpu(lambda p: mup.MuAdam(p, lr=1e-2, weight_decay=0.01),
                       make_model=_mu_model, steps=3)


@pytest.mark.slow
def test_grad_scaler_skips_a_third_party_step_on_inf_as_on_cpu():
    # An inf gradient: the step is skipped (Prodigy's d and moments untouched) and the
    # scale halved; the next step runs.
    results = []
    for device in ("cpu", TPU):
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 2).to(device)
        opt = _prodigy(model.parameters())
        scaler = torch.amp.GradScaler(torch.device(device).type, init_scale=2.0 ** 10)
        for step, (x, y) in enumerate(batches("mlp", 3, batch=3)):
            x, y = x[:, :4].to(device), y[:, :2].to(device)
            opt.zero_grad()
            scaler.scale((model(x) - y).square().mean()).backward()
            if step == 1:
                model.bias.grad[0] = float("inf")
            scaler.step(opt)
            scaler.update()
            results.append((scaler.get_scale(), [p.detach().cpu().clone()
                                                 for p in model.parameters()], state_of(opt)))
    cpu, tpu = results[:3], results[3:]
    assert [s for s, _, _ in tpu] == [s for s, _, _ in cpu] == [2.0 ** 10, 2.0 ** 9, 2.0 ** 9]
    torch.testing.assert_close(tpu[1][1], tpu[0][1], rtol=0, atol=0)  # (skipped)
    for (_, params_t, state_t), (_, params_c, state_c) in zip(tpu, cpu, strict=True):
        torch.testing.assert_close(params_t, params_c, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close([v for _, v in state_t], [v for _, v in state_c],
                                   rtol=1e-5, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["strict", "fused"])
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_every_optimizer_matches_cpu(name, mode):
    with torchtpu.set_eager_mode(mode):
        assert_matches_cpu(OPTIMIZERS[name], rtol=LOOSE.get(name, 1e-5))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["MuAdamW", "MuSGD"])
def test_mup_optimizers_match_cpu(name):
    mup = _lib("mup")
    make = (lambda p: mup.MuSGD(p, lr=0.1, momentum=0.9)) if name == "MuSGD" else (
        lambda p: mup.MuAdamW(p, lr=1e-2, weight_decay=0.01))
    assert_matches_cpu(make, make_model=_mu_model, steps=4)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["AdamW8bit", "AdamW4bit", "AdamWFp8"])
def test_torchao_low_bit_adamw_matches_cpu(name):
    # Quantized state compared dequantized. (8-bit codes come from a binary search over a
    # code map: a moment within rounding of a code boundary may take the next code, on CPU
    # against float64 too; one such code moves a parameter by 2e-4 of its scale.)
    rtol = 3e-4 if name == "AdamW8bit" else 2e-5
    assert_matches_cpu(_ao(name), make_model=_ao_model, kind="mlp", steps=4, rtol=rtol,
                       state_rtol=2e-3 if name == "AdamW8bit" else rtol)


def _carried(make, make_model, devices):
    """Two steps on each device in turn, the state dicts passed through torch.save."""
    saved = None
    for device in devices:
        torch.manual_seed(0)
        model = make_model().to(device)
        opt = make(model.parameters())
        if saved is not None:
            model.load_state_dict(saved[0])
            opt.load_state_dict(saved[1])
        for x, y in batches("mlp", 2, batch=4):
            opt.zero_grad()
            (model(x.to(device)) - y.to(device)).square().mean().backward()
            opt.step()
        buffer = io.BytesIO()
        torch.save((model.state_dict(), opt.state_dict()), buffer)
        buffer.seek(0)
        saved = torch.load(buffer, weights_only=False)
    return [p.detach().cpu() for p in model.parameters()], state_of(opt)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["prodigy", "dadapt_adam", "AdamW4bit", "AdamWFp8"])
def test_state_dict_carried_tpu_cpu_tpu_trains_on_as_on_cpu(name):
    make = _ao(name) if name.startswith("AdamW") else OPTIMIZERS[name]
    expected = _carried(make, _ao_model, ["cpu"] * 3)
    actual = _carried(make, _ao_model, [TPU, "cpu", TPU])
    torch.testing.assert_close(actual[0], expected[0], rtol=2e-5, atol=1e-6)
    assert [k for k, _ in actual[1]] == [k for k, _ in expected[1]]
    torch.testing.assert_close([v for _, v in actual[1]], [v for _, v in expected[1]],
                               rtol=2e-5, atol=1e-6)


# (SOAP, PSGD and Muon variants left out: degenerate eigenbases, random draws, and
# stochastic rounding to bfloat16 in the Newton-Schulz iterations)
HEAVYBALL = ["AdamW", "AdamC", "AdEMAMix", "LaProp", "NAdam", "RMSprop", "SFAdamW",
             "HeavyKLShampoo", "OrthoLaProp", "SignLaProp", "UnscaledAdamW"]


@pytest.mark.slow
@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("name", HEAVYBALL)
def test_heavyball_matches_cpu(name, compiled, monkeypatch):
    # heavyball compiles its steps with its own backend over torch._inductor.compile unless
    # compile_mode is None. The CPU reference runs uncompiled (inductor's CPU autotuning
    # takes minutes); tpu as a user gets it.
    heavyball = _lib("heavyball")
    mode = heavyball.utils.compile_mode
    make = getattr(heavyball, name)

    def make_on(params):
        params = list(params)
        on_tpu = params[0].device.type == "tpu"
        monkeypatch.setattr(heavyball.utils, "compile_mode", mode if on_tpu and compiled
                            else None)
        return make(params, lr=1e-2)

    assert_matches_cpu(make_on, steps=4, kind="mlp")
