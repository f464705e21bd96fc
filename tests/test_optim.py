"""torch.optim on tpu parameters, foreach on and off, equals CPU."""

from __future__ import annotations

import pytest
import torch
from conftest import assert_same

OPTIMS = {
    "sgd": lambda p, fe: torch.optim.SGD(p, lr=0.1, momentum=0.9, foreach=fe),
    "sgd_nesterov_wd": lambda p, fe: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True,
                                                     weight_decay=0.01, foreach=fe),
    "adam": lambda p, fe: torch.optim.Adam(p, lr=1e-2, foreach=fe),
    "adamw": lambda p, fe: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1, foreach=fe),
    "adamw_amsgrad": lambda p, fe: torch.optim.AdamW(p, lr=1e-2, amsgrad=True, foreach=fe),
}


def _train(device, make_opt, foreach, steps=4):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    model.to(device)
    opt = make_opt(model.parameters(), foreach)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(steps):
        x = torch.randn(5, 6, generator=g).to(device)
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        sched.step()
        losses.append(loss.detach())
    return losses, [p.detach() for p in model.parameters()]


@pytest.mark.parametrize("foreach", [False, True], ids=["for-loop", "foreach"])
@pytest.mark.parametrize("name", OPTIMS)
def test_optimizer_matches_cpu(name, foreach):
    cpu = _train("cpu", OPTIMS[name], foreach)
    tpu = _train("tpu", OPTIMS[name], foreach)
    assert all(p.device.type == "tpu" for p in tpu[1])
    assert_same(tpu, cpu, rtol=1e-5, atol=1e-6)


def test_optimizer_state_lives_on_tpu():
    p = torch.nn.Parameter(torch.ones(3, device="tpu"))
    opt = torch.optim.Adam([p], lr=0.1)
    p.grad = torch.ones(3, device="tpu")
    opt.step()
    state = opt.state[p]
    assert state["exp_avg"].device.type == "tpu"
