"""sbi used unchanged with ``device="tpu"``: a tiny neural posterior estimation run (200
simulations of a 2-D Gaussian model, a few epochs) gives CPU's training and validation losses,
network and posterior log-densities, for MAF and mixture-density estimators.

sbi builds the estimator and shuffles the data with the CPU's stream, but its prior checks draw
from the device's, so the CPU stream is seeded again before training; log-densities are
unnormalised (``norm_posterior=False``): the prior-support correction is a Monte-Carlo
estimate from device draws. ``slow`` (cold compiles)."""

from __future__ import annotations

import pytest
import torch
from conftest import TPU, assert_same

sbi = pytest.importorskip("sbi")
from sbi.inference import NPE  # noqa: E402
from sbi.utils import BoxUniform  # noqa: E402

pytestmark = pytest.mark.slow


def _npe(device, estimator):
    prior = BoxUniform(-2 * torch.ones(2, device=device), 2 * torch.ones(2, device=device))
    g = torch.Generator().manual_seed(1)
    theta = torch.rand(200, 2, generator=g) * 4 - 2
    x = theta + 0.1 * torch.randn(200, 2, generator=g)
    inference = NPE(prior, density_estimator=estimator, device=device,
                    show_progress_bars=False)
    inference.append_simulations(theta.to(device), x.to(device))
    torch.manual_seed(0)
    net = inference.train(max_num_epochs=3, training_batch_size=50, stop_after_epochs=100)
    posterior = inference.build_posterior(net)
    th = torch.tensor([[0.1, 0.2], [-1.0, 1.5]], device=device)
    log_prob = posterior.log_prob(th, x=torch.tensor([0.1, 0.3], device=device),
                                  norm_posterior=False)
    summary = inference.summary
    return ([torch.tensor(summary[k]) for k in ("training_loss", "validation_loss")],
            log_prob, list(net.parameters()))


@pytest.mark.filterwarnings("ignore:Maximum number of epochs")
@pytest.mark.parametrize("estimator", ["maf", "mdn"])
def test_neural_posterior_estimation_run(estimator, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # sbi's tensorboard logs go to ./sbi-logs
    assert_same(_npe(TPU, estimator), _npe("cpu", estimator), rtol=1e-4, atol=1e-4)
