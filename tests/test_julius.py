"""julius on "tpu": fractional resampling, low/high/band-pass sinc filters (direct and FFT
convolution), band splitting and fft_conv1d give CPU's signals and gradients."""

from __future__ import annotations

import pytest
import torch
from model_zoo_checks import check_outputs

julius = pytest.importorskip("julius")

AUDIO = torch.randn(2, 3, 200, generator=torch.Generator().manual_seed(0))
KERNEL = torch.randn(4, 3, 31, generator=torch.Generator().manual_seed(1))


@pytest.mark.slow
def test_filters_and_resampling():
    def run(device):
        a = AUDIO.to(device)
        return [julius.resample_frac(a, 4, 5), julius.resample_frac(a, 3, 2, output_length=120),
                julius.resample_frac(a, 3, 2, full=True), julius.lowpass_filter(a, 0.1),
                julius.lowpass_filter(a, 0.1, fft=True), julius.highpass_filter(a, 0.2, fft=True),
                julius.bandpass_filter(a, 0.05, 0.2),
                julius.LowPassFilters([0.05, 0.2]).to(device)(a),
                *julius.bands.split_bands(a, 16000, n_bands=4),
                julius.fft_conv1d(a, KERNEL.to(device), stride=2, padding=3)]

    check_outputs(run)


@pytest.mark.slow
def test_gradients():
    def run(device):
        a = AUDIO.to(device).requires_grad_()
        resampled = julius.resample_frac(a, 4, 5)
        convolved = julius.fft_conv1d(a, torch.ones(2, 3, 17, device=device))
        grad, = torch.autograd.grad(resampled.pow(2).sum() + convolved.sin().sum(), a)
        return [resampled, convolved, grad]

    check_outputs(run)
