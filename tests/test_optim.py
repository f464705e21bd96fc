"""torch.optim on tpu parameters (for-loop, foreach and fused paths) equals CPU."""

from __future__ import annotations

import pytest
import torch
from conftest import assert_same

OPTIMS = {
    "sgd": lambda p, kw: torch.optim.SGD(p, lr=0.1, momentum=0.9, **kw),
    "sgd_nesterov_wd": lambda p, kw: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True,
                                                     weight_decay=0.01, **kw),
    "sgd_dampening_max": lambda p, kw: torch.optim.SGD(p, lr=0.1, momentum=0.5, dampening=0.2,
                                                       maximize=True, **kw),
    "adam": lambda p, kw: torch.optim.Adam(p, lr=1e-2, **kw),
    "adam_wd_max_betas": lambda p, kw: torch.optim.Adam(p, lr=1e-2, weight_decay=0.1,
                                                        maximize=True, betas=(0.3, 0.9), **kw),
    "adamw": lambda p, kw: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1, **kw),
    "adamw_amsgrad": lambda p, kw: torch.optim.AdamW(p, lr=1e-2, amsgrad=True, **kw),
    "adamw_tensor_lr": lambda p, kw: torch.optim.AdamW(p, lr=torch.tensor(1e-2), **kw),
}
PATHS = {"for-loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}


def _train(device, make_opt, path, steps=4):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    model.to(device)
    opt = make_opt(model.parameters(), PATHS[path])
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


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", OPTIMS)
def test_optimizer_matches_cpu(name, path):
    if name == "adamw_tensor_lr" and path == "foreach":
        pytest.skip("PyTorch: lr as a Tensor is not supported for capturable=False and foreach")
    cpu = _train("cpu", OPTIMS[name], path)
    tpu = _train("tpu", OPTIMS[name], path)
    assert all(p.device.type == "tpu" for p in tpu[1])
    assert_same(tpu, cpu, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", ["adam", "adamw_amsgrad", "sgd"])
def test_complex_parameters_match_cpu(name, path):
    # Adam and AdamW update a complex parameter through torch.view_as_real(param).
    def train(device):
        p = torch.nn.Parameter(torch.randn(4, 3, dtype=torch.complex64,
                                           generator=torch.Generator().manual_seed(0)).to(device))
        opt = OPTIMS[name]([p], PATHS[path])
        for _ in range(3):
            loss = (p * p.conj()).real.sum() + p.abs().pow(3).sum()
            loss.backward()
            opt.step()
            opt.zero_grad()
        return p.detach()

    if path == "fused":
        pytest.skip("PyTorch: fused optimizers take floating point parameters only")
    assert_same(train("tpu"), train("cpu"), rtol=1e-5, atol=1e-6)


def test_optimizer_state_lives_on_tpu():
    p = torch.nn.Parameter(torch.ones(3, device="tpu"))
    opt = torch.optim.Adam([p], lr=0.1)
    p.grad = torch.ones(3, device="tpu")
    opt.step()
    state = opt.state[p]
    assert state["exp_avg"].device.type == "tpu"


def test_multi_tensor_paths_are_the_default():
    # Without them every parameter's update is a dozen separate ops per step.
    from torch.optim.optimizer import _default_to_fused_or_foreach
    from torch.utils._foreach_utils import _has_foreach_support

    params = list(torch.nn.Linear(3, 2).to("tpu").parameters())
    assert _default_to_fused_or_foreach(params, differentiable=False) == (False, True)
    assert _has_foreach_support(params, torch.device("tpu"))


@pytest.mark.parametrize("found_inf", [0.0, 1.0])
def test_fused_adamw_unscales_and_skips_on_inf(found_inf):
    # What GradScaler passes: grads are divided by the scale (and kept so); an inf skips all.
    def step(device):
        g = torch.Generator().manual_seed(0)
        lists = [[torch.randn(5, 3, generator=g), torch.randn(7, generator=g)] for _ in range(4)]
        lists[3] = [t.abs() for t in lists[3]]  # second moments
        lists = [[t.to(device) for t in ts] for ts in lists]
        steps = [torch.tensor(3.0, device=device) for _ in range(2)]
        torch._fused_adamw_(*lists, [], steps, lr=0.01, beta1=0.9, beta2=0.99,
                            weight_decay=0.1, eps=1e-8, amsgrad=False, maximize=False,
                            grad_scale=torch.tensor(4.0, device=device),
                            found_inf=torch.tensor(found_inf, device=device))
        return lists

    assert_same(step("tpu"), step("cpu"), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("fused", [False, True], ids=["unscale-then-step", "fused-adamw"])
def test_grad_scaler_matches_cpu(fused):
    # GradScaler as a cuda training loop uses it: an inf step is skipped and backs the scale
    # off; growth every 2 clean steps. fused=True hands grad_scale/found_inf to the kernel.
    def run(device):
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 3).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, fused=fused or None)
        scaler = torch.amp.GradScaler(device, init_scale=1024.0, growth_interval=2)
        x = torch.randn(5, 4).to(device)
        scales = []
        for i in range(5):
            with torch.autocast(device, dtype=torch.bfloat16):
                loss = model(x).float().square().mean()
            if i == 2:
                loss = loss * float("inf")
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
            scales.append(scaler.get_scale())
        return scales, [p.detach() for p in model.parameters()]

    cpu_scales, cpu_params = run("cpu")
    tpu_scales, tpu_params = run("tpu")
    assert tpu_scales == cpu_scales == [1024.0, 2048.0, 1024.0, 1024.0, 2048.0]
    assert_same(tpu_params, cpu_params, rtol=1e-5, atol=1e-6)
