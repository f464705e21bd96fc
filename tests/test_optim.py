"""torch.optim on tpu parameters (for-loop, foreach and fused paths) equals CPU."""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import assert_same, raises_as_cpu

import torchtpu

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
    "adagrad": lambda p, kw: torch.optim.Adagrad(p, lr=0.1, lr_decay=0.05, weight_decay=0.1,
                                                 initial_accumulator_value=0.1, **kw),
    "adagrad_max": lambda p, kw: torch.optim.Adagrad(p, lr=0.1, maximize=True, **kw),
    "adagrad_tensor_lr": lambda p, kw: torch.optim.Adagrad(p, lr=torch.tensor(0.1), **kw),
}
PATHS = {"for-loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}


def _train(device, make_opt, path, steps=4):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    model.to(device)
    opt = make_opt(model.parameters(), PATHS.get(path))
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
    if name.endswith("tensor_lr") and path == "foreach":
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


@pytest.mark.parametrize("dtype", [torch.complex64, torch.int64])
@pytest.mark.parametrize("name", ["sgd", "adagrad", "adamw_kernel"])
def test_fused_steps_refuse_what_cpus_kernels_refuse(name, dtype):
    # SGD checks only its first parameter's dtype, Adagrad only for complex: the kernel
    # refuses the rest (Adam's own checks refuse them before it, naming the device).
    def bad(device):
        params = [torch.nn.Parameter(torch.ones(2, device=device)),
                  torch.nn.Parameter(torch.ones(2, device=device).to(dtype), requires_grad=False)]
        for p in params:
            p.grad = torch.ones_like(p)
        if name == "adamw_kernel":
            lists = [[p.detach() for p in params], [p.grad for p in params]]
            steps = [torch.tensor(1.0, device=device) for _ in params]
            return _FUSED_STEPS["adamw"](lists + lists[1:] * 2, steps)
        OPTIMS[name](params, {"fused": True}).step()

    raises_as_cpu(bad, Exception)


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


_ADAMW_KW = dict(beta1=0.9, beta2=0.99, weight_decay=0.1, eps=1e-8, amsgrad=False,
                 maximize=False)
_FUSED_STEPS = {
    "adamw": lambda lists, steps, **kw: torch._fused_adamw_(*lists, [], steps, lr=0.01,
                                                           **_ADAMW_KW, **kw),
    "adagrad": lambda lists, steps, **kw: torch._fused_adagrad_(
        *lists[:3], steps, lr=0.1, lr_decay=0.01, weight_decay=0.1, eps=1e-10, maximize=False,
        **kw),
}


@pytest.mark.parametrize("found_inf", [0.0, 1.0])
@pytest.mark.parametrize("name", _FUSED_STEPS)
def test_fused_step_unscales_and_skips_on_inf(name, found_inf):
    # What GradScaler passes: grads are divided by the scale (and kept so); an inf skips all.
    def step(device):
        g = torch.Generator().manual_seed(0)
        lists = [[torch.randn(5, 3, generator=g), torch.randn(7, generator=g)] for _ in range(4)]
        lists[2:] = [[t.abs() for t in ts] for ts in lists[2:]]  # second moments, sums
        lists = [[t.to(device) for t in ts] for ts in lists]
        steps = [torch.tensor(3.0, device=device) for _ in range(2)]
        _FUSED_STEPS[name](lists, steps, grad_scale=torch.tensor(4.0, device=device),
                           found_inf=torch.tensor(found_inf, device=device))
        return lists

    assert_same(step("tpu"), step("cpu"), rtol=1e-6, atol=1e-7)


def test_grad_scaler_scale_updates_as_cpu():
    # CPU multiplies the float scale by the double factor and rounds once: factors that are
    # not powers of two drifted 1 ulp a step when rounded to float32 first.
    def run(device):
        scale, tracker = torch.tensor([7.0], device=device), torch.zeros(1, dtype=torch.int32,
                                                                          device=device)
        scales = []
        for found in (0, 0, 1, 0, 0, 0, 1, 0):
            torch._amp_update_scale_(scale, tracker, torch.tensor([float(found)], device=device),
                                     1.1, 0.3, 2)
            scales.append(scale.item())
        return scales, tracker

    tpu, cpu = run("tpu"), run("cpu")
    assert tpu[0] == cpu[0]
    assert_same(tpu[1], cpu[1])


@pytest.mark.parametrize("found_inf,inv_scale,grad", [
    (torch.zeros(1, dtype=torch.float64), torch.ones(1), torch.ones(2)),
    (torch.zeros(1), torch.ones(1, dtype=torch.float16), torch.ones(2)),
    (torch.zeros(2), torch.ones(1), torch.ones(2)),
    (torch.zeros(1), torch.ones(2), torch.ones(2)),
    (torch.zeros(1), torch.ones(1), torch.ones(2, dtype=torch.int64)),
])
def test_grad_scaler_unscale_checks_as_cpu(found_inf, inv_scale, grad):
    raises_as_cpu(lambda d: torch._amp_foreach_non_finite_check_and_unscale_(
        [grad.to(d)], found_inf.to(d), inv_scale.to(d)), Exception)


def test_a_multi_tensor_step_counts_as_a_write_for_autograd():
    # Stepping between a forward and its backward: the weight the backward needs was changed.
    w = torch.nn.Parameter(torch.ones(3, 3, device="tpu"))
    y = (torch.ones(2, 3, device="tpu", requires_grad=True) @ w).sum()
    w.grad = torch.ones_like(w)
    torch.optim.SGD([w], lr=0.5, foreach=True).step()
    assert w._version == 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_differentiable_nesterov_steps_give_cpus_gradient_of_the_first_weights():
    # SGD takes its foreach path here; the bias's gradient is a view its nesterov update
    # writes, which autograd follows only when the write is counted.
    def gradient(device):
        torch.manual_seed(0)
        w0 = torch.randn(4, 3).to(device).requires_grad_()
        b0 = torch.randn(3).to(device).requires_grad_()
        x = torch.randn(5, 4).to(device)
        w, b = w0.clone(), b0.clone()
        opt = torch.optim.SGD([w, b], lr=0.1, momentum=0.9, nesterov=True, differentiable=True)
        for _ in range(2):
            w.grad, b.grad = torch.autograd.grad((x @ w + b).square().sum(), [w, b],
                                                 create_graph=True)
            opt.step()
        return torch.autograd.grad((x @ w + b).square().sum(), [w0, b0])

    assert_same(gradient("tpu"), gradient("cpu"), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("maximize", [False, True])
def test_sparse_adam_trains_a_sparse_embedding_as_on_cpu(eager_mode, maximize):
    # Its gradient is sparse, as on CPU (torchtpu/sparse.py): the rows a batch did not look up
    # keep their values and moments.
    def train(device):
        torch.manual_seed(0)
        table = torch.nn.Embedding(10, 4, sparse=True, padding_idx=0).to(device)
        opt = torch.optim.SparseAdam(table.parameters(), lr=0.1, betas=(0.8, 0.9),
                                     maximize=maximize)
        for ids in ([1, 2, 2, 5], [0, 7, 1, 3], [4, 4, 4, 4]):
            table(torch.tensor(ids, device=device)).pow(2).sum().backward()
            opt.step()
            opt.zero_grad()
        state = opt.state[table.weight]
        return table.weight.detach(), state["exp_avg"], state["exp_avg_sq"], state["step"]

    tpu, cpu = train("tpu"), train("cpu")
    assert_same(tpu[:3], cpu[:3], rtol=1e-5, atol=1e-6)
    assert tpu[3] == cpu[3] == 3
    assert torch.equal(tpu[0][[6, 8, 9]].cpu(), cpu[0][[6, 8, 9]])  # never looked up
    with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients"):
        p = torch.nn.Parameter(torch.ones(2))
        p.grad = torch.ones(2)
        torch.optim.SparseAdam([p]).step()



# The optimizers beyond SGD/Adam/AdamW/Adagrad, which have no fused kernel. The default
# suite takes two of them (one path each); -m slow runs all, both paths, maximize and a
# tensor lr.
OTHER_OPTIMS = {
    "nadam_decoupled": (torch.optim.NAdam, dict(lr=1e-2, weight_decay=0.1,
                                                decoupled_weight_decay=True)),
    "radam_decoupled": (torch.optim.RAdam, dict(lr=1e-2, weight_decay=0.1,
                                                decoupled_weight_decay=True)),
    "adamax": (torch.optim.Adamax, dict(lr=1e-2, weight_decay=0.1)),
    "asgd": (torch.optim.ASGD, dict(lr=1e-2, weight_decay=0.1, t0=2)),
    "rprop": (torch.optim.Rprop, dict(lr=1e-2)),
    "rmsprop_centered": (torch.optim.RMSprop, dict(lr=1e-2, centered=True, momentum=0.9,
                                                   weight_decay=0.1)),
    "adadelta": (torch.optim.Adadelta, dict(lr=1.0, weight_decay=0.1)),
    "adafactor": (torch.optim.Adafactor, dict(lr=1e-2, weight_decay=0.1)),
}
_VARIANTS = {"for-loop": {"foreach": False}, "foreach": {"foreach": True},
             "maximize": {"maximize": True}, "tensor_lr": {"foreach": False}}


def _other_cases(variants=_VARIANTS, default=(("nadam_decoupled", "foreach"),
                                              ("adafactor", "for-loop"))):
    for name in OTHER_OPTIMS:
        for variant in variants:
            yield pytest.param(name, variant, id=f"{name}-{variant}",
                               marks=() if (name, variant) in default else pytest.mark.slow)


def _other(name, tensor_lr=False, **extra):
    cls, kw = OTHER_OPTIMS[name]
    if tensor_lr:  # a fresh one for each run: the scheduler writes it in place
        return lambda params, _: cls(params, **{**kw, **extra, "lr": torch.tensor(kw["lr"])})
    return lambda params, _: cls(params, **{**kw, **extra})


@pytest.mark.parametrize("name,variant", list(_other_cases()))
def test_other_optimizers_match_cpu(name, variant):
    # 1e-5: RMSprop's centered sqrt(avg - mean^2) is 1 ulp off where CPU's MKL sqrt is (1 in
    # 5 float32 values here are not correctly rounded on CPU; XLA's are).
    extra = dict(_VARIANTS[variant], tensor_lr=variant == "tensor_lr")
    tpu = _train("tpu", _other(name, **extra), None)
    cpu = _train("cpu", _other(name, **extra), None)
    assert_same(tpu, cpu, rtol=1e-5, atol=1e-5)



@pytest.fixture
def capturable_on_cpu(monkeypatch):
    """CPU runs the capturable algorithms too (they refuse CPU only because CUDA graphs
    need a device): tpu's capturable steps are then held to the same code on CPU."""
    import importlib

    import torch.optim.optimizer as base
    devices = base._get_capturable_supported_devices
    for name in ("optimizer", "adam", "adamw", "nadam", "radam", "adamax", "asgd", "rmsprop",
                 "rprop", "adadelta"):
        module = importlib.import_module(f"torch.optim.{name}")
        if hasattr(module, "_get_capturable_supported_devices"):
            monkeypatch.setattr(module, "_get_capturable_supported_devices",
                                lambda supports_xla=True: [*devices(supports_xla), "cpu"])


@pytest.mark.parametrize("name,variant", list(_other_cases(
    {"foreach": 0, "for-loop": 0}, default=(("nadam_decoupled", "foreach"),))))
def test_capturable_steps_match_cpu(capturable_on_cpu, name, variant):
    # The step counts and bias corrections stay on the device as tensors; the lr too.
    if name == "adafactor" or (name == "radam_decoupled" and variant == "for-loop"):
        pytest.skip("PyTorch: no capturable path")
    extra = dict(_VARIANTS[variant], capturable=True, tensor_lr=True)
    tpu = _train("tpu", _other(name, **extra), None)
    cpu = _train("cpu", _other(name, **extra), None)
    assert_same(tpu, cpu, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("line_search", [pytest.param(None, marks=pytest.mark.slow),
                                         "strong_wolfe"])
def test_lbfgs_steps_as_on_cpu(line_search):
    # Its steps read the loss and the curvature back (.item()) to decide the next one. A
    # well-conditioned problem: on Rosenbrock a 1-ulp difference in a dot product (XLA's
    # fuses a multiply-add where CPU rounds the product) grows into another path.
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(6, 3, generator=g), torch.randn(6, generator=g)

    def run(device):
        w = torch.nn.Parameter(torch.zeros(3, device=device))
        opt = torch.optim.LBFGS([w], lr=0.5, max_iter=6, history_size=3,
                                line_search_fn=line_search)

        def closure():
            opt.zero_grad()
            loss = (a.to(device) @ w - b.to(device)).square().sum() + 0.1 * w.pow(4).sum()
            loss.backward()
            return loss

        losses = [opt.step(closure).detach() for _ in range(2)]
        return losses, w.detach(), opt.state[w]["func_evals"], opt.state[w]["n_iter"]

    assert_same(run("tpu"), run("cpu"), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(torch.optim, "Muon"), reason="no torch.optim.Muon")
def test_muon_orthogonalises_its_update_as_on_cpu():
    def run(device):
        w = torch.nn.Parameter(torch.randn(8, 6, generator=torch.Generator().manual_seed(0))
                               .to(device))
        opt = torch.optim.Muon([w], lr=0.02, weight_decay=0.1, adjust_lr_fn="match_rms_adamw")
        x = torch.randn(5, 8, generator=torch.Generator().manual_seed(1)).to(device)
        for _ in range(3):
            (x @ w).square().mean().backward()
            opt.step()
            opt.zero_grad()
        return w.detach(), opt.state[w]["momentum_buffer"]

    assert_same(run("tpu"), run("cpu"), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("name", [n for n in OTHER_OPTIMS if n != "adafactor"])
def test_other_optimizers_complex_and_differentiable_steps_match_cpu(name, foreach):
    def complex_step(device):
        p = torch.nn.Parameter(torch.randn(4, 3, dtype=torch.complex64,
                                           generator=torch.Generator().manual_seed(0)).to(device))
        opt = _other(name, foreach=foreach)([p], None)
        for _ in range(3):
            ((p * p.conj()).real.sum() + p.abs().pow(3).sum()).backward()
            opt.step()
            opt.zero_grad()
        return p.detach(), [v for v in opt.state[p].values() if isinstance(v, torch.Tensor)]

    def gradient_through_steps(device):
        g = torch.Generator().manual_seed(0)
        w0 = torch.randn(4, 3, generator=g).to(device).requires_grad_()
        x = torch.randn(5, 4, generator=g).to(device)
        w = w0.clone()
        opt = _other(name, foreach=foreach, differentiable=True)([w], None)
        w.grad, = torch.autograd.grad((x @ w).tanh().square().sum(), [w], create_graph=True)
        opt.step()
        return torch.autograd.grad((x @ w).square().sum(), [w0])

    assert_same(complex_step("tpu"), complex_step("cpu"), rtol=1e-5, atol=1e-5)
    if not foreach:  # PyTorch: "_foreach ops don't support autograd"
        assert_same(gradient_through_steps("tpu"), gradient_through_steps("cpu"), rtol=1e-4,
                    atol=1e-4)


@pytest.mark.parametrize("name", ["nadam_decoupled",
                                  *[pytest.param(n, marks=pytest.mark.slow)
                                    for n in ("adafactor", "asgd")]])
def test_a_cpu_state_dict_trains_on_in_a_tpu_optimizer_and_back(name):
    # load_state_dict moves the moments to the parameter's device and keeps `step` on CPU
    # (it is a tensor there unless capturable); the state dict of the tpu optimizer loads
    # back into a CPU one.
    torch.manual_seed(0)
    cpu_model = torch.nn.Linear(4, 3)
    tpu_model = torch.nn.Linear(4, 3).to("tpu")
    cpu_opt = _other(name)(cpu_model.parameters(), None)
    tpu_opt = _other(name)(tpu_model.parameters(), None)
    x = torch.randn(6, 4)

    def step(model, opt):
        model(x.to(model.weight.device)).square().sum().backward()
        opt.step()
        opt.zero_grad()

    step(cpu_model, cpu_opt)
    tpu_model.load_state_dict(cpu_model.state_dict())
    tpu_opt.load_state_dict(copy.deepcopy(cpu_opt.state_dict()))
    moments = [v for k, v in tpu_opt.state[tpu_model.weight].items() if k != "step"]
    assert all(v.device.type == "tpu" for v in moments if isinstance(v, torch.Tensor))
    for _ in range(2):
        step(cpu_model, cpu_opt)
        step(tpu_model, tpu_opt)
    assert_same(list(tpu_model.parameters()), list(cpu_model.parameters()), rtol=1e-5,
                atol=1e-6)
    back_model = torch.nn.Linear(4, 3)
    back_model.load_state_dict({k: v.cpu() for k, v in tpu_model.state_dict().items()})
    back_opt = _other(name)(back_model.parameters(), None)
    back_opt.load_state_dict(tpu_opt.state_dict())
    step(back_model, back_opt)
    step(cpu_model, cpu_opt)
    assert_same(list(back_model.parameters()), list(cpu_model.parameters()), rtol=1e-5,
                atol=1e-6)


_SCHEDULERS = {
    "one_cycle": lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.05, total_steps=8),
    "warm_restarts": lambda o: torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(
        o, T_0=2, T_mult=2, eta_min=1e-4),
    "sequential": lambda o: torch.optim.lr_scheduler.SequentialLR(o, [
        torch.optim.lr_scheduler.LinearLR(o, start_factor=0.1, total_iters=3),
        torch.optim.lr_scheduler.LambdaLR(o, lambda epoch: 0.9 ** epoch)], milestones=[3]),
}


@pytest.mark.parametrize("name,tensor_lr", [
    (name, tensor_lr) if (name, tensor_lr) in (("one_cycle", True), ("warm_restarts", False))
    else pytest.param(name, tensor_lr, marks=pytest.mark.slow)
    for name in _SCHEDULERS for tensor_lr in (False, True)])
def test_lr_schedulers_drive_a_tpu_optimizer_as_on_cpu(name, tensor_lr):
    # A tensor lr (capturable Adam's on the device) is written in place by the scheduler.
    def run(device):
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 3).to(device)
        lr = torch.tensor(0.01, device=device) if tensor_lr else 0.01
        opt = torch.optim.Adam(model.parameters(), lr=lr, capturable=tensor_lr and device != "cpu")
        sched = _SCHEDULERS[name](opt)
        x, lrs = torch.randn(5, 4), []
        for _ in range(6):
            model(x.to(device)).square().mean().backward()
            opt.step()
            opt.zero_grad()
            sched.step()
            lrs.append(float(opt.param_groups[0]["lr"]))
        return lrs, list(model.parameters())

    tpu, cpu = run("tpu"), run("cpu")
    assert tpu[0] == pytest.approx(cpu[0], rel=1e-6)
    assert_same(tpu[1], cpu[1], rtol=1e-5, atol=1e-6)


def test_reduce_lr_on_plateau_reads_a_tpu_loss():
    def run(device):
        model = torch.nn.Linear(2, 1).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=1, factor=0.5,
                                                           threshold=0.05, cooldown=1)
        lrs = []
        for loss in (1.0, 0.9, 0.95, 0.96, 0.97, 0.5, 0.6, 0.7, 0.8):
            sched.step(torch.tensor(loss, device=device))
            lrs.append(opt.param_groups[0]["lr"])
        return lrs, sched.best

    assert run("tpu") == run("cpu")


@pytest.mark.parametrize("use_buffers", [pytest.param(False, marks=pytest.mark.slow), True])
def test_swa_averages_and_update_bn_over_a_tpu_loader_as_on_cpu(use_buffers):
    # EMA over parameters (and the BatchNorm statistics with use_buffers), SWALR's annealing,
    # then update_bn recomputing the statistics from a loader of tpu batches.
    from torch.optim import swa_utils

    def run(device):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.BatchNorm1d(6),
                                    torch.nn.ReLU(), torch.nn.Linear(6, 2)).to(device)
        ema = swa_utils.AveragedModel(model, multi_avg_fn=swa_utils.get_ema_multi_avg_fn(0.9),
                                      use_buffers=use_buffers)
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        swa_lr = swa_utils.SWALR(opt, swa_lr=0.05, anneal_epochs=3, anneal_strategy="cos")
        g = torch.Generator().manual_seed(1)
        batches = [torch.randn(8, 4, generator=g).to(device) for _ in range(4)]
        lrs = []
        for x in batches:
            model(x).square().mean().backward()
            opt.step()
            opt.zero_grad()
            ema.update_parameters(model)
            swa_lr.step()
            lrs.append(opt.param_groups[0]["lr"])
        swa_utils.update_bn(batches, ema)
        ema.eval()
        return lrs, list(ema.parameters()), list(ema.buffers()), ema(batches[0])

    tpu, cpu = run("tpu"), run("cpu")
    assert tpu[0] == pytest.approx(cpu[0], rel=1e-12)
    assert_same(tpu[1:], cpu[1:], rtol=1e-5, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["fused", "compile"])
def test_a_whole_step_in_fused_eager_or_compiled_equals_strict(mode):
    # Forward, backward, NAdam's foreach step and a scheduler as one program (fused eager
    # records them; torch.compile traces the step): the numbers strict eager gives.
    def run(how):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(),
                                    torch.nn.Linear(8, 3)).to("tpu")
        opt = torch.optim.NAdam(model.parameters(), lr=torch.tensor(0.01),
                                decoupled_weight_decay=True, weight_decay=0.1)
        sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)

        def step(x):
            loss = model(x).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss.detach()

        if how == "compile":
            step = torch.compile(step, backend="tpu")
        g = torch.Generator().manual_seed(1)
        with torchtpu.set_eager_mode("fused" if how == "fused" else "strict"):
            losses = []
            for _ in range(3):
                losses.append(step(torch.randn(5, 6, generator=g).to("tpu")))
                sched.step()
            return [t.cpu() for t in [*losses, *model.parameters(),
                                      *_state_tensors(opt, model.parameters())]]

    assert_same(run(mode), run("strict"), rtol=1e-5, atol=1e-6)


def _state_tensors(opt, params):
    return [v for p in params for _, v in sorted(opt.state[p].items())
            if isinstance(v, torch.Tensor)]
