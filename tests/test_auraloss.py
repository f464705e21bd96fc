"""auraloss on "tpu": the STFT losses (single, multi-resolution, sum-and-difference), the
time-domain losses (SI-SDR, SD-SDR, SNR, ESR, DC, log-cosh) and the perceptual FIR filter
give CPU's loss values and input gradients. (MelSTFTLoss needs librosa, not installed.)"""

from __future__ import annotations

import pytest
import torch
from model_zoo_checks import check_outputs

auraloss = pytest.importorskip("auraloss")

_g = torch.Generator().manual_seed(0)
PRED, TARGET = torch.randn(2, 1, 1024, generator=_g), torch.randn(2, 1, 1024, generator=_g)

LOSSES = {
    "stft": lambda: auraloss.freq.STFTLoss(fft_size=256, hop_size=64, win_length=256),
    "multi_resolution": lambda: auraloss.freq.MultiResolutionSTFTLoss(
        fft_sizes=[128, 256], hop_sizes=[32, 64], win_lengths=[128, 256]),
    "sisdr": lambda: auraloss.time.SISDRLoss(),
    "sdsdr": lambda: auraloss.time.SDSDRLoss(),
    "snr": lambda: auraloss.time.SNRLoss(),
    "esr": lambda: auraloss.time.ESRLoss(),
    "dc": lambda: auraloss.time.DCLoss(),
    "logcosh": lambda: auraloss.time.LogCoshLoss(),
}


def _value_and_gradient(make):
    def run(device):
        pred = PRED.to(device).requires_grad_()
        value = make().to(device)(pred, TARGET.to(device))
        return [value, torch.autograd.grad(value, pred)[0]]
    return run


def test_time_domain_loss():
    check_outputs(_value_and_gradient(LOSSES["sisdr"]), rtol=1e-4, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("name", LOSSES)
def test_losses(name):
    check_outputs(_value_and_gradient(LOSSES[name]), rtol=1e-3, atol=1e-5)


@pytest.mark.slow
def test_sum_and_difference_and_perceptual_filter():
    def run(device):
        pred = PRED.to(device).requires_grad_()
        target = TARGET.to(device)
        stereo = auraloss.freq.SumAndDifferenceSTFTLoss(
            fft_sizes=[128], hop_sizes=[32], win_lengths=[128]).to(device)(
            torch.cat([pred, pred], 1), torch.cat([target, target.flip(-1)], 1))
        filtered = auraloss.perceptual.FIRFilter(filter_type="aw", fs=16000).to(device)(
            pred, target)
        value = stereo + filtered[0].pow(2).mean() + filtered[1].pow(2).mean()
        return [stereo, *filtered, torch.autograd.grad(value, pred)[0]]

    check_outputs(run, rtol=1e-3, atol=1e-5)
