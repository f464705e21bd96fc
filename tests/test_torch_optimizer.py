"""torch-optimizer on tpu: each optimizer it exports takes five steps on a small conv + MLP
model as on CPU (losses, parameters, and every state tensor and scalar), with the options that
change its branches. The default suite runs a few with shape-specific or second-order paths;
``-m slow`` sweeps every optimizer, in strict and fused eager, and a compiled step."""

from __future__ import annotations

import pytest
import torch
from conftest import TPU

import torchtpu

topt = pytest.importorskip("torch_optimizer")

OPTIMIZERS = {
    "A2GradExp": lambda p: topt.A2GradExp(p, lips=1.0),
    "A2GradInc": lambda p: topt.A2GradInc(p),
    "A2GradUni": lambda p: topt.A2GradUni(p),
    "AccSGD": lambda p: topt.AccSGD(p, lr=1e-2, weight_decay=0.01),
    "AdaBelief": lambda p: topt.AdaBelief(p, lr=1e-2, weight_decay=0.01),
    "AdaBelief_amsgrad_decoupled": lambda p: topt.AdaBelief(
        p, lr=1e-2, amsgrad=True, weight_decouple=True, fixed_decay=True, rectify=False,
        weight_decay=0.01),
    "AdaBound": lambda p: topt.AdaBound(p, lr=1e-2, weight_decay=0.01),
    "AdaBound_amsbound": lambda p: topt.AdaBound(p, lr=1e-2, amsbound=True),
    "AdaMod": lambda p: topt.AdaMod(p, lr=1e-2, weight_decay=0.01),
    # (Adafactor's factored path takes matrices: its 4-d branch fails on CPU too)
    "Adafactor": lambda p: topt.Adafactor(p, lr=1e-2, weight_decay=0.01),
    "Adafactor_relative_step": lambda p: topt.Adafactor(p, lr=None, relative_step=True,
                                                     warmup_init=True, beta1=0.9),
    "Adahessian": lambda p: topt.Adahessian(p, lr=1e-1, weight_decay=0.01),
    "AdamP": lambda p: topt.AdamP(p, lr=1e-2, weight_decay=0.01),
    "AdamP_nesterov": lambda p: topt.AdamP(p, lr=1e-2, nesterov=True, delta=0.5),
    "AggMo": lambda p: topt.AggMo(p, lr=1e-2, weight_decay=0.01),
    "Apollo": lambda p: topt.Apollo(p, lr=1e-2, weight_decay=0.01, warmup=2),
    "Apollo_init_lr": lambda p: topt.Apollo(p, lr=1e-2, weight_decay=0.01, init_lr=0.05),
    "DiffGrad": lambda p: topt.DiffGrad(p, lr=1e-2, weight_decay=0.01),
    "LARS": lambda p: topt.LARS(p, lr=1e-2, weight_decay=0.01, momentum=0.9),
    "LARS_nesterov": lambda p: topt.LARS(p, lr=1e-2, weight_decay=0.01, momentum=0.9,
                                      nesterov=True, dampening=0),
    "Lamb": lambda p: topt.Lamb(p, lr=1e-2, weight_decay=0.01),
    "Lamb_adam_clamp_debias": lambda p: topt.Lamb(p, lr=1e-2, weight_decay=0.01, adam=True,
                                               clamp_value=0.5, debias=True),
    "Lookahead": lambda p: topt.Lookahead(torch.optim.Adam(p, lr=1e-2), k=2),
    "MADGRAD": lambda p: topt.MADGRAD(p, lr=1e-2, weight_decay=0.01),
    "MADGRAD_no_momentum": lambda p: topt.MADGRAD(p, lr=1e-2, momentum=0, weight_decay=0.01),
    "NovoGrad": lambda p: topt.NovoGrad(p, lr=1e-2, weight_decay=0.01),
    "NovoGrad_amsgrad": lambda p: topt.NovoGrad(p, lr=1e-2, amsgrad=True, grad_averaging=True),
    "PID": lambda p: topt.PID(p, lr=1e-2, weight_decay=0.01, momentum=0.9),
    "QHAdam": lambda p: topt.QHAdam(p, lr=1e-2, weight_decay=0.01),
    "QHAdam_decoupled": lambda p: topt.QHAdam(p, lr=1e-2, weight_decay=0.01,
                                           decouple_weight_decay=True),
    "QHM": lambda p: topt.QHM(p, lr=1e-2, weight_decay=0.01, momentum=0.9),
    "QHM_direct": lambda p: topt.QHM(p, lr=1e-2, weight_decay=0.01, momentum=0.9,
                                  weight_decay_type="direct"),
    "RAdam": lambda p: topt.RAdam(p, lr=1e-2, weight_decay=0.01),
    "Ranger": lambda p: topt.Ranger(p, lr=1e-2, weight_decay=0.01, k=2),
    "RangerQH": lambda p: topt.RangerQH(p, lr=1e-2, weight_decay=0.01, k=2),
    "RangerVA": lambda p: topt.RangerVA(p, lr=1e-2, weight_decay=0.01, k=2),
    "SGDP": lambda p: topt.SGDP(p, lr=1e-2, weight_decay=0.01, momentum=0.9),
    "SGDP_nesterov": lambda p: topt.SGDP(p, lr=1e-2, weight_decay=0.01, momentum=0.9,
                                      nesterov=True, delta=0.5),
    "SGDW": lambda p: topt.SGDW(p, lr=1e-2, weight_decay=0.01, momentum=0.9),
    "SGDW_nesterov": lambda p: topt.SGDW(p, lr=1e-2, weight_decay=0.01, momentum=0.9,
                                      nesterov=True),
    "SWATS": lambda p: topt.SWATS(p, lr=1e-2, weight_decay=0.01),
    "SWATS_nesterov_amsgrad": lambda p: topt.SWATS(p, lr=1e-2, weight_decay=0.01, amsgrad=True,
                                                nesterov=True),
    # (epsilon 0.1: with the default 1e-4 the inverse fourth roots amplify float32 rounding
    # past 1e-5 on CPU itself, against a float64 run)
    "Shampoo": lambda p: topt.Shampoo(p, lr=1e-2, weight_decay=0.01, momentum=0.5,
                                   update_freq=2, epsilon=0.1),
    "Yogi": lambda p: topt.Yogi(p, lr=1e-2, weight_decay=0.01),
}
# State whose float32 rounding is amplified on CPU as much: AdaMod's lr / sqrt(v) where a
# gradient is near zero (CPU's own error against float64 is 2e-5 there).
LOOSE_STATE = {"AdaMod": 1e-4}


def _model(mlp: bool) -> torch.nn.Module:
    torch.manual_seed(0)
    if mlp:
        return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(72, 8), torch.nn.Tanh(),
                                   torch.nn.Linear(8, 3))
    return torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3), torch.nn.Tanh(), torch.nn.Flatten(),
                               torch.nn.Linear(48, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))


def _state(opt, params) -> list:
    state = []
    for p in params:
        for key, value in sorted(opt.state.get(p, {}).items()):
            values = value if isinstance(value, (list, tuple)) else [value]
            if isinstance(value, dict):
                values = [value[k] for k in sorted(value)]
            state += [(key, v.detach().cpu() if isinstance(v, torch.Tensor) else v)
                      for v in values]
    return state


def _train(name: str, device: str, steps: int = 5):
    # Adahessian's Rademacher vectors come from torch.randint_like, whose tpu stream is not
    # CPU's (as cuda's is not): they are drawn on CPU for both runs.
    draws = torch.Generator().manual_seed(3)

    def randint_like(p, high, **_):
        return torch.randint(0, high, p.shape, generator=draws, dtype=p.dtype).to(p.device)

    model = _model(mlp=name.startswith("Adafactor")).to(device)
    opt = OPTIMIZERS[name](model.parameters())
    g = torch.Generator().manual_seed(1)
    losses = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch, "randint_like", randint_like)
        for _ in range(steps):
            x = torch.randn(4, 2, 6, 6, generator=g).to(device)
            y = torch.randn(4, 3, generator=g).to(device)

            def closure(x=x, y=y):
                opt.zero_grad()
                loss = (model(x) - y).square().mean()
                loss.backward(create_graph=name == "Adahessian")
                losses.append(loss.detach().cpu())
                return loss

            if name.startswith("A2Grad"):  # (their step takes no closure)
                closure()
                opt.step()
            else:
                opt.step(closure)
    params = list(model.parameters())
    return losses, [p.detach().cpu() for p in params], _state(opt, params)


def _matches_cpu(name: str, steps: int = 5) -> None:
    cpu, tpu = _train(name, "cpu", steps), _train(name, TPU, steps)
    torch.testing.assert_close(tpu[0], cpu[0], rtol=1e-5, atol=1e-6)
    # (parameters: atol relative to each tensor's scale, for XLA's fused reassociation)
    for a, e in zip(tpu[1], cpu[1], strict=True):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-6 + 1e-5 * e.abs().max().item())
    assert [k for k, _ in tpu[2]] == [k for k, _ in cpu[2]]
    rtol = LOOSE_STATE.get(name, 1e-5)
    for (key, a), (_, e) in zip(tpu[2], cpu[2], strict=True):
        if isinstance(e, torch.Tensor):
            assert a.dtype == e.dtype, key
            torch.testing.assert_close(a, e, rtol=rtol, atol=1e-6 + rtol * e.abs().max().item(),
                                       msg=lambda m, key=key: f"{name} state {key}: {m}")
        else:
            assert a == pytest.approx(e, rel=1e-5, abs=1e-6), key


# ---- default suite ----

def test_optimizer_matches_cpu():
    # (a branch for 4-d conv weights: a Hessian-diagonal block mean, through a create_graph
    # backward; Shampoo's preconditioners are in the slow sweep)
    _matches_cpu("Adahessian", steps=3)


def test_ranger_matches_cpu_in_fused_eager():
    with torchtpu.set_eager_mode("fused"):
        _matches_cpu("Ranger")


# ---- slow sweeps ----

@pytest.mark.slow
@pytest.mark.parametrize("mode", ["strict", "fused"])
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_every_optimizer_matches_cpu(name, mode):
    with torchtpu.set_eager_mode(mode):
        _matches_cpu(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["Lamb", "Yogi", "MADGRAD", "AdaBelief"])
def test_compiled_step_matches_cpu(name):
    # (a fresh Dynamo cache each: after several optimizers through one step function Dynamo
    # tensorifies their float hyperparameters and trips its own guard assert, on CPU too)
    torch._dynamo.reset()
    results = []
    for device in ("cpu", TPU):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(),
                                    torch.nn.Linear(8, 3)).to(device)
        opt = OPTIMIZERS[name](model.parameters())

        def step(x, model=model, opt=opt):
            loss = model(x).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss

        if device != "cpu":
            step = torch.compile(step)
        g = torch.Generator().manual_seed(1)
        losses = [step(torch.randn(5, 6, generator=g).to(device)).detach().cpu()
                  for _ in range(4)]
        results.append((losses, [p.detach().cpu() for p in model.parameters()]))
    torch.testing.assert_close(results[1], results[0], rtol=1e-5, atol=1e-6)
