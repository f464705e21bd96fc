"""torch.distributions on tpu against CPU: every distribution's deterministic methods,
gradients, validation errors and KL terms match; draws land on tpu inside the support."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import TPU, assert_same
from distribution_checks import check_bad_example, check_example
from torch.distributions import (
    Bernoulli,
    Beta,
    Binomial,
    Categorical,
    Cauchy,
    Chi2,
    ContinuousBernoulli,
    Dirichlet,
    Exponential,
    FisherSnedecor,
    Gamma,
    GeneralizedPareto,
    Geometric,
    Gumbel,
    HalfCauchy,
    HalfNormal,
    Independent,
    InverseGamma,
    Kumaraswamy,
    Laplace,
    LKJCholesky,
    LogisticNormal,
    LogNormal,
    LowRankMultivariateNormal,
    MixtureSameFamily,
    Multinomial,
    MultivariateNormal,
    NegativeBinomial,
    Normal,
    OneHotCategorical,
    OneHotCategoricalStraightThrough,
    Pareto,
    Poisson,
    RelaxedBernoulli,
    RelaxedOneHotCategorical,
    StudentT,
    TransformedDistribution,
    Uniform,
    VonMises,
    Weibull,
    Wishart,
    kl_divergence,
)
from torch.distributions.transforms import AffineTransform, ExpTransform, SigmoidTransform


def _t(*values):
    return torch.tensor(values, requires_grad=True)


def _pos(*shape, low=0.5, high=3.0):
    g = torch.Generator().manual_seed(sum(shape) + 7)
    return (torch.rand(shape, generator=g) * (high - low) + low).requires_grad_()


def _real(*shape):
    g = torch.Generator().manual_seed(sum(shape) + 11)
    return torch.randn(shape, generator=g).requires_grad_()


_COV = [[2.0, 0.3], [0.3, 0.5]]

# (distribution, parameters): one or two cases each, small and away from the edges where
# float32 draws underflow (those edges are CPU's behaviour too, checked in the slow sweep).
EXAMPLES = [
    (Bernoulli, lambda: {"probs": _t(0.7, 0.2, 0.4)}),
    (Bernoulli, lambda: {"logits": _t(-1.0, 0.0, 2.0)}),
    (Geometric, lambda: {"probs": _t(0.7, 0.2, 0.4)}),
    (Beta, lambda: {"concentration1": _pos(2, 3), "concentration0": _pos(2, 3, low=0.3)}),
    (Categorical, lambda: {"probs": _t([0.1, 0.2, 0.7], [0.5, 0.3, 0.2])}),
    (Categorical, lambda: {"logits": _t([0.0, -1.0, 3.0], [1.0, 1.0, 1.0])}),
    (Binomial, lambda: {"probs": _t([0.1, 0.5, 0.9], [0.3, 0.0, 1.0]), "total_count": 10}),
    (Binomial, lambda: {"logits": _t(-1.0, 2.0), "total_count": torch.tensor([4.0, 7.0])}),
    (NegativeBinomial, lambda: {"probs": _t([0.1, 0.5], [0.9, 0.0]), "total_count": 6}),
    (Multinomial, lambda: {"probs": _t([0.1, 0.2, 0.7], [0.5, 0.3, 0.2]), "total_count": 8}),
    (Cauchy, lambda: {"loc": _real(3), "scale": _pos(3)}),
    (Chi2, lambda: {"df": _pos(2, 3, low=1.0, high=5.0)}),
    (StudentT, lambda: {"df": _pos(4, low=1.0, high=6.0), "loc": _real(4), "scale": _pos(4)}),
    (Dirichlet, lambda: {"concentration": _pos(2, 3)}),
    (Exponential, lambda: {"rate": _pos(5)}),
    (FisherSnedecor, lambda: {"df1": _pos(4, low=1.0, high=6.0),
                              "df2": _pos(4, low=2.0, high=8.0)}),
    (Gamma, lambda: {"concentration": _pos(2, 3, low=0.3), "rate": _pos(2, 3)}),
    (Gumbel, lambda: {"loc": _real(4), "scale": _pos(4)}),
    (HalfCauchy, lambda: {"scale": _pos(3)}),
    (HalfNormal, lambda: {"scale": _pos(3)}),
    (Independent, lambda: {"base_distribution": Normal(_real(2, 3), _pos(2, 3)),
                           "reinterpreted_batch_ndims": 1}),
    (Kumaraswamy, lambda: {"concentration1": _pos(4, low=1.0, high=2.0),
                           "concentration0": _pos(4, low=1.0, high=2.0)}),
    (LKJCholesky, lambda: {"dim": 3, "concentration": torch.tensor([0.5, 1.0, 2.0])}),
    (Laplace, lambda: {"loc": _real(4), "scale": _pos(4)}),
    (LogNormal, lambda: {"loc": _real(4), "scale": _pos(4, low=0.2, high=1.0)}),
    (LogisticNormal, lambda: {"loc": _real(2, 3), "scale": _pos(2, 3, low=0.2, high=1.0)}),
    (LowRankMultivariateNormal, lambda: {"loc": _real(3, 2), "cov_factor": _real(2, 1),
                                         "cov_diag": _t(1.5, 0.5)}),
    (MultivariateNormal, lambda: {"loc": _real(3, 2), "covariance_matrix": _t(*_COV)}),
    (MultivariateNormal, lambda: {"loc": _real(2), "precision_matrix": _t(*_COV)}),
    (MultivariateNormal, lambda: {"loc": _real(2, 2),
                                  "scale_tril": _t([[1.0, 0.0], [0.4, 0.7]],
                                                   [[2.0, 0.0], [-0.3, 0.5]])}),
    (Normal, lambda: {"loc": _real(2, 3), "scale": _pos(2, 3)}),
    (OneHotCategorical, lambda: {"probs": _t([0.1, 0.2, 0.7], [0.5, 0.3, 0.2])}),
    (OneHotCategoricalStraightThrough, lambda: {"logits": _t([0.0, -1.0, 3.0])}),
    (Pareto, lambda: {"scale": _pos(3), "alpha": _pos(3, low=1.0, high=3.0)}),
    (Poisson, lambda: {"rate": _pos(5, low=0.1, high=20.0)}),
    (RelaxedBernoulli, lambda: {"temperature": _t(0.7), "probs": _t(0.7, 0.2, 0.4)}),
    (RelaxedOneHotCategorical, lambda: {"temperature": _t(1.5),
                                        "logits": _t([0.0, -1.0, 3.0], [1.0, 1.0, 1.0])}),
    (TransformedDistribution, lambda: {"base_distribution": Normal(_real(3), _pos(3)),
                                       "transforms": [AffineTransform(1.0, 2.0),
                                                      ExpTransform()]}),
    (TransformedDistribution, lambda: {"base_distribution": Normal(_real(3), _pos(3)),
                                       "transforms": SigmoidTransform()}),
    (Uniform, lambda: {"low": _t(0.0, -1.0, 2.0), "high": _t(1.0, 3.0, 2.5)}),
    (Weibull, lambda: {"scale": _pos(4), "concentration": _pos(4, low=0.8, high=3.0)}),
    (Wishart, lambda: {"covariance_matrix": _t(*_COV), "df": _t(3.0, 4.5)}),
    (MixtureSameFamily, lambda: {"mixture_distribution": Categorical(_pos(3)),
                                 "component_distribution": Normal(_real(3), _pos(3))}),
    (VonMises, lambda: {"loc": _t(0.0, math.pi / 2), "concentration": _t(1.0, 10.0)}),
    (ContinuousBernoulli, lambda: {"probs": _t(0.7, 0.2, 0.5)}),
    (InverseGamma, lambda: {"concentration": _pos(3, low=1.0), "rate": _pos(3)}),
    (GeneralizedPareto, lambda: {"loc": _real(4), "scale": _pos(4),
                                 "concentration": _t(-0.2, 0.0, 0.1, 0.3)}),
]

BAD_EXAMPLES = [
    (Bernoulli, {"probs": _t(1.1, 0.2, 0.4)}),
    (Beta, {"concentration1": _t(0.0), "concentration0": _t(-2.0)}),
    (Categorical, {"probs": _t([-0.1, 0.2, 0.3], [0.5, 0.3, 0.2])}),
    (Binomial, {"probs": _t([-1e-7, 0.2, 0.3], [0.5, 0.3, 0.2]), "total_count": 10}),
    (Cauchy, {"loc": torch.tensor([[0.0], [-2.0]]), "scale": torch.tensor([[-1e-6], [1.0]])}),
    (Dirichlet, {"concentration": _t(-2.0)}),
    (Gamma, {"concentration": _t(1.0, 1.0), "rate": _t(0.0, 0.0)}),
    (LKJCholesky, {"dim": 2, "concentration": 0.0}),
    (MultivariateNormal, {"loc": _t(1.0, 1.0), "covariance_matrix": _t([1.0, 0.0], [0.0, -2.0])}),
    (Normal, {"loc": _t(1.0, 0.0), "scale": _t(1e-5, -1e-5)}),
    (OneHotCategorical, {"probs": _t([0.0, 0.0], [0.0, 0.0])}),
    (Poisson, {"rate": _t(-0.1)}),
    (Uniform, {"low": _t(1.0), "high": _t(0.0)}),
    (Wishart, {"covariance_matrix": _t([1.0, 1.0], [1.0, -2.0]), "df": _t(3.0)}),
    (GeneralizedPareto, {"loc": _t(0.0, 0.0), "scale": _t(-1.0, -100.0),
                         "concentration": _t(0.0, 0.0)}),
]


def _id(case):
    return case[0].__name__


# The default suite checks the distributions most code draws from (policy gradients, VAEs,
# mixtures, Bayesian priors); every example runs in the slow sweep.
_DEFAULT = {Normal, Categorical, Bernoulli, Dirichlet, Gamma, Independent, Poisson}


def _cases(examples, *, every):
    seen = set()
    for case in examples:
        default = case[0] in _DEFAULT and case[0] not in seen
        seen.add(case[0])
        marks = () if default or every else (pytest.mark.slow,)
        yield pytest.param(case, id=_id(case), marks=marks)


@pytest.fixture(autouse=True)
def _validate_args():
    before = torch.distributions.Distribution._validate_args
    torch.distributions.Distribution.set_default_validate_args(True)
    yield
    torch.distributions.Distribution.set_default_validate_args(before)


@pytest.mark.parametrize("case", _cases(EXAMPLES, every=False))
def test_distribution_matches_cpu(case):
    torch.manual_seed(0)
    check_example(case[0], case[1]())


@pytest.mark.slow
@pytest.mark.parametrize("case", _cases(EXAMPLES, every=True))
def test_distribution_matches_cpu_float64(case):
    torch.manual_seed(0)
    check_example(case[0], case[1](), dtype=torch.float64)


@pytest.mark.parametrize("case", BAD_EXAMPLES, ids=[_id(c) for c in BAD_EXAMPLES])
def test_invalid_parameters_raise_as_on_cpu(case):
    check_bad_example(*case)


def test_kl_divergence_between_families_matches_cpu():
    def pairs(dev):
        def t(*v):
            return torch.tensor(v, device=dev)
        return [
            (Normal(t(0.0, 1.0), t(1.0, 2.0)), Normal(t(0.5, -1.0), t(0.7, 1.0))),
            (Beta(t(0.5, 2.0), t(1.5, 3.0)), Beta(t(2.0, 1.0), t(1.0, 0.5))),
            (Gamma(t(0.5, 2.0), t(1.5, 3.0)), Exponential(t(2.0, 1.0))),
            (Dirichlet(t(0.5, 2.0, 1.0)), Dirichlet(t(1.0, 1.0, 3.0))),
            (Categorical(t(0.2, 0.3, 0.5)), Categorical(t(0.6, 0.3, 0.1))),
            (Bernoulli(t(0.3, 0.9)), Poisson(t(1.0, 2.0))),
            (Uniform(t(0.0, 1.0), t(1.0, 3.0)), Normal(t(0.5, 2.0), t(1.0, 1.0))),
        ]
    for (p, q), (pc, qc) in zip(pairs(TPU), pairs("cpu"), strict=True):
        assert_same(kl_divergence(p, q), kl_divergence(pc, qc), rtol=1e-5)


def test_dirichlet_grad_small_concentrations_match_cpu_in_float32():
    # Beta/Dirichlet rsample gradients: near a digamma pole CPU's float32 digamma (stepped in
    # float32, summed in float64) differs from an exact one by ~1e-3 relative.
    g = torch.Generator().manual_seed(0)
    alpha = torch.logspace(-3, -1, 8).repeat_interleave(8)
    total = alpha + torch.logspace(-1, 0.5, 8).repeat(8)
    x = torch.rand(64, generator=g) * 0.4 + 0.05
    on_tpu = torch._dirichlet_grad(x.to(TPU), alpha.to(TPU), total.to(TPU))
    assert_same(on_tpu, torch._dirichlet_grad(x, alpha, total), rtol=1e-5, atol=0)


def test_standard_gamma_grad_of_a_tiny_draw_at_large_concentration_matches_cpu():
    # x ** alpha is subnormal in float64 here: CPU keeps it, XLA flushes it to zero.
    alpha = torch.tensor([100.0, 112.6, 30.0, 5.0], dtype=torch.float64)
    x = torch.tensor([7.9e-4, 1.5e-3, 1e-3, 0.01], dtype=torch.float64)
    for dtype in (torch.float32, torch.float64):
        a, s = alpha.to(dtype), x.to(dtype)
        expected = torch._standard_gamma_grad(a, s)
        assert bool((expected > 0).all())
        assert_same(torch._standard_gamma_grad(a.to(TPU), s.to(TPU)), expected, rtol=1e-5)
