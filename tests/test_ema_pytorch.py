"""ema-pytorch on "tpu": EMA (warm-up power schedule, update_after_step, BatchNorm buffers,
copying the average back into the online model) and PostHocEMA's synthesized averages follow
the same weights as on CPU."""

from __future__ import annotations

import pytest
import torch
from model_zoo_checks import check_outputs

pytest.importorskip("ema_pytorch")
from ema_pytorch import EMA, PostHocEMA  # noqa: E402

X = torch.randn(8, 6, generator=torch.Generator().manual_seed(0))


def _train(net, ema, device, steps):
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for _ in range(steps):
        net(X.to(device)).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
        ema.update()


def test_ema_with_warmup_and_buffers():
    def run(device):
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.BatchNorm1d(8),
                                  torch.nn.Linear(8, 1)).to(device)
        ema = EMA(net, beta=0.9, update_after_step=2, update_every=1, power=0.75)
        _train(net, ema, device, 5)
        return [ema(X.to(device)), *ema.ema_model.parameters(), *ema.ema_model.buffers(),
                ema.step, ema.get_current_decay()]

    check_outputs(run)


@pytest.mark.slow
def test_ema_copied_back_into_the_model():
    def run(device):
        torch.manual_seed(0)
        net = torch.nn.Linear(6, 3).to(device)
        ema = EMA(net, beta=0.9, update_after_step=0, update_every=1,
                  update_model_with_ema_every=3, include_online_model=False)
        _train(net, ema, device, 7)
        return [net.weight, ema.ema_model.weight]

    check_outputs(run)


@pytest.mark.slow
def test_post_hoc_ema_synthesis(tmp_path):
    def run(device):
        torch.manual_seed(0)
        net = torch.nn.Linear(6, 3).to(device)
        folder = tmp_path / str(device).replace(":", "_")
        post_hoc = PostHocEMA(net, sigma_rels=(0.05, 0.28), update_every=1,
                              checkpoint_every_num_steps=2, checkpoint_folder=str(folder))
        _train(net, post_hoc, device, 6)
        synthesized = post_hoc.synthesize_ema_model(sigma_rel=0.15)
        return [synthesized.ema_model.weight, synthesized(X.to(device))]

    check_outputs(run)
