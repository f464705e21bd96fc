"""BoTorch on "tpu" (float64, as BoTorch asks): a SingleTaskGP with Normalize / Standardize
transforms, its posterior, Monte-Carlo acquisition values and their gradients, the fit of
its hyperparameters and optimize_acqf give CPU's numbers.

BoTorch's quasi-random draws are CPU's on any device: SobolEngine runs on the host and
SobolQMCNormalSampler / draw_sobol_samples move its points to the model's device, so with
a fixed sampler seed both devices use the same base samples. Every test is ``slow``: the
smallest (a model with its initial hyperparameters) compiles 122 programs, 15 s from a cold
compile cache, and test_gpytorch.py covers its path by default; the fit (L-BFGS-B reads the
loss on the host every step), optimize_acqf, the other acquisition functions and fused eager
follow."""

from __future__ import annotations

import warnings

import pytest
import torch
from conftest import TPU, assert_same

import torchtpu

botorch = pytest.importorskip("botorch")
from botorch.acquisition import (  # noqa: E402
    qLogExpectedImprovement,
    qLogNoisyExpectedImprovement,
    qUpperConfidenceBound,
)
from botorch.models import ModelListGP, SingleTaskGP  # noqa: E402
from botorch.models.transforms import Normalize, Standardize  # noqa: E402
from botorch.sampling import SobolQMCNormalSampler  # noqa: E402
from gpytorch.mlls import ExactMarginalLogLikelihood  # noqa: E402

TOL = dict(rtol=1e-6, atol=1e-8)


def _data():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(12, 2, dtype=torch.float64, generator=g) * 4
    y = torch.stack([torch.sin(x[:, 0]) + torch.cos(x[:, 1]), x[:, 0] * 0.3 - x[:, 1]], -1)
    candidates = torch.rand(5, 3, 2, dtype=torch.float64, generator=g) * 4
    return x, y + 0.05 * torch.randn(y.shape, dtype=torch.float64, generator=g), candidates


def _model(device, fit=False, outputs=1):
    x, y, _ = _data()
    model = SingleTaskGP(x.to(device), y[:, :outputs].to(device),
                         input_transform=Normalize(2), outcome_transform=Standardize(outputs))
    if fit:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (L-BFGS-B's convergence notes)
            botorch.fit.fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    return model.eval()


def _acquisition(device, fit=False):
    model = _model(device, fit)
    _, y, candidates = _data()
    x = candidates.to(device).requires_grad_()
    acq = qLogExpectedImprovement(model, best_f=y[:, 0].max().to(device),
                                  sampler=SobolQMCNormalSampler(torch.Size([64]), seed=1))
    value = acq(x)
    value.sum().backward()
    return [value, x.grad]


@pytest.mark.slow
def test_posterior_with_transforms():
    def run(device):
        posterior = _model(device).posterior(_data()[2][0].to(device))
        return [posterior.mean, posterior.variance]

    assert_same(run(TPU), run("cpu"), **TOL)


@pytest.mark.slow
def test_q_log_ei_and_gradients():
    assert_same(_acquisition(TPU), _acquisition("cpu"), **TOL)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_fit_and_acquisitions(mode):
    def run(device):
        model = _model(device, fit=True)
        _, y, candidates = _data()
        x = candidates.to(device).requires_grad_()
        acq = qUpperConfidenceBound(model, beta=0.2,
                                    sampler=SobolQMCNormalSampler(torch.Size([64]), seed=2))
        ucb = acq(x)
        ucb.sum().backward()
        nei = qLogNoisyExpectedImprovement(
            model, _data()[0].to(device), prune_baseline=False,
            sampler=SobolQMCNormalSampler(torch.Size([32]), seed=3))(x.detach())
        samples = SobolQMCNormalSampler(torch.Size([8]), seed=5)(model.posterior(x.detach()[0]))
        params = [p.detach() for p in model.parameters()]
        return [*params, ucb, x.grad, nei, samples]

    with torchtpu.set_eager_mode(mode):
        assert_same(run(TPU), run("cpu"), rtol=1e-4, atol=1e-6)
        assert_same(_acquisition(TPU, fit=True), _acquisition("cpu", fit=True),
                    rtol=1e-4, atol=1e-6)


@pytest.mark.slow
def test_optimize_acqf():
    # (given starting points: BoTorch picks them from its raw samples with torch.multinomial,
    # a draw from tpu's own stream; the L-BFGS-B runs from there are deterministic)
    start = torch.rand(2, 2, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(4))

    def run(device):
        model = _model(device, fit=True)
        acq = qLogExpectedImprovement(model, best_f=model.train_targets.max(),
                                      sampler=SobolQMCNormalSampler(torch.Size([32]), seed=1))
        bounds = torch.tensor([[0.0, 0.0], [4.0, 4.0]], dtype=torch.float64, device=device)
        return botorch.optim.optimize_acqf(acq, bounds, q=2, num_restarts=2,
                                           batch_initial_conditions=(start * 4).to(device),
                                           options={"maxiter": 20})

    assert_same(run(TPU), run("cpu"), rtol=1e-4, atol=1e-6)


@pytest.mark.slow
def test_multi_output_models():
    def run(device):
        _, _, candidates = _data()
        both = _model(device, outputs=2).posterior(candidates[0].to(device))
        listed = ModelListGP(_model(device), _model(device)).posterior(candidates.to(device))
        return [both.mean, both.variance, listed.mean, listed.variance]

    assert_same(run(TPU), run("cpu"), **TOL)


@pytest.mark.slow
def test_multi_task_posterior():
    # (gpytorch's interpolation builds a sparse COO matrix: refused before tpu had them)
    from botorch.models import MultiTaskGP

    g = torch.Generator().manual_seed(0)
    X = torch.rand(10, 2, dtype=torch.float64, generator=g)
    X = torch.cat([X, (torch.arange(10) % 2).double()[:, None]], 1)
    Y, test_x = torch.sin(X[:, :1] * 3), torch.rand(4, 2, dtype=torch.float64, generator=g)

    def run(device):
        torch.manual_seed(1)  # (the task covariance's factor is initialised at random)
        model = MultiTaskGP(X.to(device), Y.to(device), task_feature=-1).eval()
        with torch.no_grad():
            posterior = model.posterior(test_x.to(device))
        return [posterior.mean, posterior.variance]

    assert_same(run(TPU), run("cpu"), **TOL)
