"""schedulefree on tpu: the Schedule-Free optimizers (foreach and for-loop paths, the Closure,
Paper and Reference variants, the wrappers) train a small model as on CPU through
optimizer.train()/eval() switches: losses, the eval-mode (x) and train-mode (y) parameters,
the state (z, exp_avg_sq) and the group's scalars (k, weight_sum, lr_max). The default suite
runs two; ``-m slow`` sweeps every variant in strict and fused eager."""

from __future__ import annotations

import pytest
import torch
from conftest import TPU

import torchtpu

S = pytest.importorskip("schedulefree")

OPTIMIZERS = {
    "adamw": lambda p: S.AdamWScheduleFree(p, lr=1e-2, weight_decay=0.01, warmup_steps=2),
    "adamw_for_loop_r": lambda p: S.AdamWScheduleFree(p, lr=1e-2, weight_decay=0.01, r=1.0,
                                                      foreach=False),
    "adamw_tensor_lr": lambda p: S.AdamWScheduleFree(p, lr=torch.tensor(1e-2), warmup_steps=2),
    "adamw_closure": lambda p: S.AdamWScheduleFreeClosure(p, lr=1e-2, weight_decay=0.01,
                                                          warmup_steps=2),
    "adamw_paper": lambda p: S.AdamWScheduleFreePaper(p, lr=1e-2, weight_decay=0.01,
                                                      warmup_steps=2),
    "adamw_paper_for_loop": lambda p: S.AdamWScheduleFreePaper(p, lr=1e-2, weight_decay=0.01,
                                                               foreach=False),
    "adamw_reference": lambda p: S.AdamWScheduleFreeReference(p, lr=1e-2, weight_decay=0.01,
                                                              warmup_steps=2),
    "adamw_reference_decay_at_z": lambda p: S.AdamWScheduleFreeReference(
        p, lr=1e-2, weight_decay=0.01, decay_at_z=True),
    "radam": lambda p: S.RAdamScheduleFree(p, lr=1e-2, weight_decay=0.01),
    "radam_for_loop_loud": lambda p: S.RAdamScheduleFree(p, lr=1e-2, weight_decay=0.01,
                                                         foreach=False, silent_sgd_phase=False),
    "radam_closure": lambda p: S.RAdamScheduleFreeClosure(p, lr=1e-2, weight_decay=0.01),
    "sgd": lambda p: S.SGDScheduleFree(p, lr=0.1, weight_decay=0.01, warmup_steps=2),
    "sgd_for_loop": lambda p: S.SGDScheduleFree(p, lr=0.1, momentum=0.5, foreach=False),
    "sgd_closure": lambda p: S.SGDScheduleFreeClosure(p, lr=0.1, weight_decay=0.01,
                                                      warmup_steps=2),
    "sgd_reference": lambda p: S.SGDScheduleFreeReference(p, lr=0.1, weight_decay=0.01,
                                                          warmup_steps=2),
    "wrapper_sgd": lambda p: S.ScheduleFreeWrapper(torch.optim.SGD(p, lr=0.1, momentum=0.5),
                                                   weight_decay_at_y=0.01),
    "wrapper_reference_sgd": lambda p: S.ScheduleFreeWrapperReference(
        torch.optim.SGD(p, lr=0.1), weight_decay_at_y=0.01),
}


def _train(name: str, device: str, steps: int = 3) -> list:
    torch.manual_seed(0)
    # (no bias before the batch norm: its gradient is rounding noise, which Adam scales to lr)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8, bias=False), torch.nn.BatchNorm1d(8),
                                torch.nn.Tanh(), torch.nn.Linear(8, 3)).to(device)
    opt = OPTIMIZERS[name](model.parameters())
    closure_variant = not hasattr(opt, "train")  # (the Closure variants have no modes)
    g = torch.Generator().manual_seed(1)
    out = []
    for _ in range(2):
        model.train()
        if not closure_variant:
            opt.train()
        for _ in range(steps):
            x = torch.randn(5, 6, generator=g).to(device)

            def closure(x=x):
                loss = model(x).square().mean()
                loss.backward()
                return loss

            loss = opt.step(closure) if closure_variant else closure()
            if not closure_variant:
                opt.step()
            opt.zero_grad()
            out.append(loss.detach().cpu())
        model.eval()
        if not closure_variant:
            opt.eval()
        out.append(model(torch.ones(2, 6, device=device)).detach().cpu())
        out += [p.detach().cpu().clone() for p in model.parameters()]
    for p in model.parameters():
        out += [v.detach().cpu() for _, v in sorted(opt.state[p].items())
                if isinstance(v, torch.Tensor)]
    group = opt.param_groups[0]
    out.append(torch.tensor([float(v) for _, v in sorted(group.items())
                             if isinstance(v, (int, float)) and not isinstance(v, bool)]))
    return out


def _matches_cpu(name: str) -> None:
    cpu, tpu = _train(name, "cpu"), _train(name, TPU)
    assert len(tpu) == len(cpu)
    for i, (a, e) in enumerate(zip(tpu, cpu, strict=True)):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-6 + 1e-5 * e.abs().max().item(),
                                   msg=lambda m, i=i: f"{name} item {i}: {m}")


# ---- default suite ----

@pytest.mark.parametrize("name", ["adamw"])
def test_schedule_free_matches_cpu(name):
    _matches_cpu(name)


# ---- slow sweep ----

@pytest.mark.slow
@pytest.mark.parametrize("mode", ["strict", "fused"])
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_every_schedule_free_variant_matches_cpu(name, mode):
    with torchtpu.set_eager_mode(mode):
        _matches_cpu(name)
