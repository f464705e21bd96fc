"""Pyro's stochastic variational inference on tpu: a MAP fit is deterministic and follows
CPU's step for step; a mean-field fit runs with its parameters kept on tpu."""

from __future__ import annotations

import pytest
import torch
from conftest import TPU, assert_same

pyro = pytest.importorskip("pyro")
import pyro.distributions as dist  # noqa: E402
from pyro.infer import SVI, Trace_ELBO  # noqa: E402
from pyro.infer.autoguide import AutoDelta, AutoNormal, init_to_mean  # noqa: E402
from pyro.optim import Adam  # noqa: E402


def _model(device):
    def model(data):
        def t(v):
            return torch.tensor(v, device=device)
        mu = pyro.sample("mu", dist.Normal(t(0.0), t(10.0)))
        sigma = pyro.sample("sigma", dist.LogNormal(t(0.0), t(1.0)))
        pyro.sample("w", dist.Dirichlet(torch.ones(3, device=device)))
        with pyro.plate("data", data.shape[0]):
            pyro.sample("obs", dist.Normal(mu, sigma), obs=data)
    return model


def _fit(device, guide_class, steps, **guide_kwargs):
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    model = _model(device)
    guide = guide_class(model, **guide_kwargs)
    svi = SVI(model, guide, Adam({"lr": 0.05}), Trace_ELBO())
    data = torch.linspace(-1.0, 3.0, 20, device=device)
    losses = torch.tensor([svi.step(data) for _ in range(steps)])
    return losses, dict(pyro.get_param_store().items())


def test_map_fit_follows_cpu():
    # AutoDelta started at the prior means has no random draws: every loss and parameter
    # is a deterministic function of the data.
    cpu_losses, cpu_params = _fit("cpu", AutoDelta, 10, init_loc_fn=init_to_mean)
    losses, params = _fit(TPU, AutoDelta, 10, init_loc_fn=init_to_mean)
    assert_same(losses, cpu_losses, rtol=1e-5)
    assert params.keys() == cpu_params.keys()
    for name, value in params.items():
        assert value.device.type == "tpu"
        assert_same(value, cpu_params[name], rtol=1e-5)


@pytest.mark.slow
def test_mean_field_fit_runs_on_tpu():
    losses, params = _fit(TPU, AutoNormal, 15)
    assert bool(torch.isfinite(losses).all())
    assert losses[-5:].mean() < losses[:5].mean()
    assert all(v.device.type == "tpu" for v in params.values())
