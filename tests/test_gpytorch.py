"""gpytorch (and linear_operator) models used unchanged with ``.to("tpu")`` give CPU's loss,
hyperparameter gradients, Adam steps and posterior, and its NotPSDError / jitter-retry path.

tpu draws from its own generator (as cuda does), so the stochastic parts of gpytorch (the
CG/Lanczos probe vectors, the variational mean's random init) would not be comparable with
CPU; ``_cpu_draws`` makes ``torch.randn`` / ``randn_like`` draw on CPU and move the result, so
both devices run the same deterministic algorithm on the same probes. Data is tiny (~20
points); float32 sweeps, Matern, multitask and batch models are slow (cold compiles)."""

from __future__ import annotations

import contextlib
import math

import pytest
import torch
from conftest import TPU, assert_same

import torchtpu

gpytorch = pytest.importorskip("gpytorch")
linear_operator = pytest.importorskip("linear_operator")


@pytest.fixture
def _cpu_draws(monkeypatch):
    randn, randn_like = torch.randn, torch.randn_like

    def cpu_randn(*size, device=None, **kwargs):
        out = randn(*size, **kwargs)
        return out if device is None else out.to(device)

    monkeypatch.setattr(torch, "randn", cpu_randn)
    monkeypatch.setattr(torch, "randn_like", lambda t, **kw: randn_like(t.cpu(), **kw).to(t.device))


class _ExactGP(gpytorch.models.ExactGP):
    def __init__(self, x, y, likelihood, kernel):
        super().__init__(x, y, likelihood)
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = gpytorch.kernels.ScaleKernel(kernel)

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def _data(dtype, n=20):
    torch.manual_seed(0)
    x = torch.linspace(0, 1, n, dtype=dtype).unsqueeze(-1)
    y = torch.sin(x.squeeze(-1) * 2 * math.pi) + 0.1 * torch.randn(n, dtype=dtype)
    return x, y, torch.linspace(0, 1, 7, dtype=dtype).unsqueeze(-1)


def _exact_gp(device, dtype, kernel, settings, fast_pred_var, steps=2):
    """Loss and gradients of each step, parameters after ``steps`` Adam steps, and the
    posterior predictive mean and variance at test points."""
    x, y, xt = (t.to(device) for t in _data(dtype))
    likelihood = gpytorch.likelihoods.GaussianLikelihood()
    model = _ExactGP(x, y, likelihood, kernel()).to(device=device, dtype=dtype)
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    out = {}
    model.train()
    with settings:
        for i in range(steps):
            opt.zero_grad()
            loss = -mll(model(x), y)
            loss.backward()
            out[f"loss{i}"] = loss.detach()
            out.update({f"grad{i} {n}": p.grad.clone() for n, p in model.named_parameters()})
            opt.step()
        out.update({n: p.detach().clone() for n, p in model.named_parameters()})
        model.eval()
        with torch.no_grad(), gpytorch.settings.fast_pred_var(fast_pred_var):
            pred = likelihood(model(xt))
            out["mean"], out["variance"] = pred.mean, pred.variance
    return out


def _check(device_out, cpu_out, **tol):
    assert device_out.keys() == cpu_out.keys()
    for key in cpu_out:
        assert device_out[key].device.type == "tpu", key
        assert_same(device_out[key], cpu_out[key], **tol)


_TOL = {torch.float64: {"rtol": 1e-9, "atol": 1e-10}, torch.float32: {"rtol": 1e-4, "atol": 1e-4}}
_SETTINGS = {"cholesky": contextlib.nullcontext,
             "cg_lanczos": lambda: gpytorch.settings.max_cholesky_size(0)}


def _exact_case(dtype, kernel, path, fast):
    cpu = _exact_gp("cpu", dtype, kernel, _SETTINGS[path](), fast)
    tpu = _exact_gp(TPU, dtype, kernel, _SETTINGS[path](), fast)
    _check(tpu, cpu, **_TOL[dtype])


@pytest.mark.usefixtures("_cpu_draws")
@pytest.mark.parametrize("path", ["cholesky", pytest.param("cg_lanczos", marks=pytest.mark.slow)])
def test_exact_gp_float64(path):
    _exact_case(torch.float64, gpytorch.kernels.RBFKernel, path, fast=False)


@pytest.mark.slow
@pytest.mark.usefixtures("_cpu_draws")
@pytest.mark.parametrize("fast", [False, True])
@pytest.mark.parametrize("path", ["cholesky", "cg_lanczos"])
@pytest.mark.parametrize("kernel", ["rbf", "matern", "periodic"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_exact_gp_sweep(dtype, kernel, path, fast):
    kernel = {"rbf": gpytorch.kernels.RBFKernel, "matern": gpytorch.kernels.MaternKernel,
              "periodic": gpytorch.kernels.PeriodicKernel}[kernel]
    _exact_case(dtype, kernel, path, fast)


@pytest.mark.slow
@pytest.mark.usefixtures("_cpu_draws")
@pytest.mark.parametrize("path", ["cholesky", "cg_lanczos"])
@pytest.mark.parametrize("mode", ["fused", "debug"])
def test_exact_gp_eager_modes(mode, path):
    """linear_cg tests convergence on the host every iteration, so fused eager flushes
    (and compiles a new program) mid-solve; values must still match."""
    cpu = _exact_gp("cpu", torch.float64, gpytorch.kernels.RBFKernel, _SETTINGS[path](), True)
    with torchtpu.set_eager_mode(mode):
        tpu = _exact_gp(TPU, torch.float64, gpytorch.kernels.RBFKernel, _SETTINGS[path](), True)
    _check(tpu, cpu, **_TOL[torch.float64])


class _SVGP(gpytorch.models.ApproximateGP):
    def __init__(self, inducing):
        dist = gpytorch.variational.CholeskyVariationalDistribution(inducing.size(0))
        strategy = gpytorch.variational.VariationalStrategy(self, inducing, dist,
                                                            learn_inducing_locations=True)
        super().__init__(strategy)
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def _svgp(device, dtype, steps=2):
    x, y, xt = (t.to(device) for t in _data(dtype))
    model = _SVGP(x[::4].clone()).to(device=device, dtype=dtype)
    likelihood = gpytorch.likelihoods.GaussianLikelihood().to(device=device, dtype=dtype)
    mll = gpytorch.mlls.VariationalELBO(likelihood, model, num_data=x.size(0))
    opt = torch.optim.Adam([*model.parameters(), *likelihood.parameters()], lr=0.05)
    out = {}
    for i in range(steps):
        opt.zero_grad()
        loss = -mll(model(x), y)
        loss.backward()
        out[f"loss{i}"] = loss.detach()
        opt.step()
    out.update({n: p.detach().clone() for n, p in model.named_parameters()})
    model.eval()
    likelihood.eval()
    with torch.no_grad():
        pred = likelihood(model(xt))
        out["mean"], out["variance"] = pred.mean, pred.variance
    return out


@pytest.mark.slow
@pytest.mark.usefixtures("_cpu_draws")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_variational_gp(dtype):
    _check(_svgp(TPU, dtype), _svgp("cpu", dtype), **_TOL[dtype])


class _MultitaskGP(gpytorch.models.ExactGP):
    def __init__(self, x, y, likelihood):
        super().__init__(x, y, likelihood)
        self.mean_module = gpytorch.means.MultitaskMean(gpytorch.means.ConstantMean(), num_tasks=2)
        self.covar_module = gpytorch.kernels.MultitaskKernel(gpytorch.kernels.RBFKernel(),
                                                             num_tasks=2, rank=1)

    def forward(self, x):
        return gpytorch.distributions.MultitaskMultivariateNormal(self.mean_module(x),
                                                                  self.covar_module(x))


class _BatchGP(gpytorch.models.ExactGP):
    def __init__(self, x, y, likelihood):
        super().__init__(x, y, likelihood)
        batch = torch.Size([2])
        self.mean_module = gpytorch.means.ConstantMean(batch_shape=batch)
        self.covar_module = gpytorch.kernels.ScaleKernel(
            gpytorch.kernels.RBFKernel(batch_shape=batch), batch_shape=batch)

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def _two_output_gp(device, dtype, kind, steps=2):
    torch.manual_seed(0)
    x = torch.linspace(0, 1, 15, dtype=dtype).unsqueeze(-1)
    y = torch.stack([torch.sin(6 * x[:, 0]), torch.cos(6 * x[:, 0])], -1)
    y = y + 0.1 * torch.randn(15, 2, dtype=dtype)
    if kind == "multitask":
        likelihood = gpytorch.likelihoods.MultitaskGaussianLikelihood(num_tasks=2)
        model_cls = _MultitaskGP
    else:
        likelihood = gpytorch.likelihoods.GaussianLikelihood(batch_shape=torch.Size([2]))
        model_cls, x, y = _BatchGP, x.expand(2, 15, 1), y.mT.contiguous()
    x, y = x.to(device), y.to(device)
    model = model_cls(x, y, likelihood).to(device=device, dtype=dtype)
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    out = {}
    model.train()
    for i in range(steps):
        opt.zero_grad()
        loss = -mll(model(x), y).sum()
        loss.backward()
        out[f"loss{i}"] = loss.detach()
        opt.step()
    out.update({n: p.detach().clone() for n, p in model.named_parameters()})
    model.eval()
    with torch.no_grad():
        pred = likelihood(model(x[..., :5, :]))
        out["mean"], out["variance"] = pred.mean, pred.variance
    return out


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["multitask", "batch"])
def test_multitask_and_batch_gp(kind):
    dtype = torch.float64
    _check(_two_output_gp(TPU, dtype, kind), _two_output_gp("cpu", dtype, kind), **_TOL[dtype])


def test_not_psd_raises_and_jitter_retry():
    """A non-PSD matrix raises the same errors as on CPU (torch's LinAlgError, then
    linear_operator's NotPSDError after its jitter retries); a singular PSD one is rescued by
    the jitter retry with CPU's factor."""
    from linear_operator.utils.cholesky import psd_safe_cholesky
    from linear_operator.utils.errors import NotPSDError

    indefinite = torch.tensor([[1.0, 2.0], [2.0, 1.0]], dtype=torch.float64)
    errors = {}
    for device in ("cpu", TPU):
        with pytest.raises(torch.linalg.LinAlgError) as plain:
            torch.linalg.cholesky(indefinite.to(device))
        with pytest.raises(NotPSDError) as retried, pytest.warns(Warning):
            psd_safe_cholesky(indefinite.to(device), max_tries=2)
        errors[device] = (str(plain.value), str(retried.value))
    assert errors[TPU] == errors["cpu"]
    singular = torch.ones(4, 4, dtype=torch.float64)
    with pytest.warns(Warning):
        expected = psd_safe_cholesky(singular)
    with pytest.warns(Warning):
        actual = psd_safe_cholesky(singular.to(TPU))
    assert_same(actual, expected)
