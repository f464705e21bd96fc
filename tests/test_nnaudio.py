"""nnAudio's spectrogram layers (STFT, mel, MFCC, constant-Q and variable-Q transforms,
gammatonegram: Fourier and wavelet kernels applied as 1-d convolutions) used unchanged with
``.to("tpu")`` give CPU's spectrograms, the inverse STFT gives CPU's waveform, and the
trainable STFT and mel kernels get CPU's gradients; a constant-Q transform in fused eager mode
and MFCC under ``torch.compile(backend="tpu")`` give CPU's spectrograms too.

nnAudio's Combined_Frequency_Periodicity (``scipy.signal.blackmanharris``, gone from SciPy)
and Griffin_Lim (``torch.istft`` of a real tensor) fail on CPU too and are left out. The
default test is one mel spectrogram; the rest is ``slow`` (cold compiles)."""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import TPU, assert_same
from model_zoo_checks import assert_same_gradients, check_outputs

import torchtpu

TOL = dict(rtol=1e-4, atol=1e-4)
SR = 8000


def _waves(n=2048):
    g = torch.Generator().manual_seed(0)
    t = torch.arange(n) / SR
    return torch.stack([torch.sin(2 * torch.pi * 440 * t) + 0.1 * torch.randn(n, generator=g),
                        torch.randn(n, generator=g)])


@pytest.fixture(scope="module")
def features():
    return pytest.importorskip("nnAudio.features")


def _check(layer, call=lambda m, x: m(x), n=2048):
    torch.manual_seed(0)
    x = _waves(n)
    check_outputs(lambda d: call(copy.deepcopy(layer).to(d), x.to(d)), **TOL)


def test_mel_spectrogram_matches_cpu(features):
    _check(features.MelSpectrogram(sr=SR, n_fft=128, n_mels=16, hop_length=64, verbose=False),
           n=1024)


LAYERS = {
    "stft_complex": lambda F: F.STFT(n_fft=128, hop_length=32, sr=SR, output_format="Complex",
                                     verbose=False),
    "stft_log_frequencies": lambda F: F.STFT(n_fft=128, hop_length=32, freq_scale="log",
                                             fmin=50, fmax=4000, sr=SR, verbose=False),
    "mfcc": lambda F: F.MFCC(sr=SR, n_mfcc=13, n_fft=256, n_mels=32, hop_length=64,
                             verbose=False),
    "cqt1992": lambda F: F.CQT1992(sr=SR, hop_length=64, fmin=220, n_bins=24),
    "cqt1992v2": lambda F: F.CQT1992v2(sr=SR, hop_length=64, fmin=220, n_bins=24,
                                       verbose=False),
    "cqt2010": lambda F: F.CQT2010(sr=SR, hop_length=64, fmin=110, n_bins=24, verbose=False),
    "cqt2010v2": lambda F: F.CQT2010v2(sr=SR, hop_length=64, fmin=55, n_bins=36,
                                       verbose=False),
    "vqt": lambda F: F.VQT(sr=SR, hop_length=64, fmin=55, n_bins=36, verbose=False),
    "gammatonegram": lambda F: F.Gammatonegram(sr=SR, n_fft=256, n_bins=32, hop_length=64,
                                               verbose=False),
}


@pytest.mark.slow
@pytest.mark.parametrize("layer", LAYERS)
def test_spectrograms_match_cpu(features, layer):
    _check(LAYERS[layer](features))


@pytest.mark.slow
def test_inverse_stft_matches_cpu(features):
    stft = features.STFT(n_fft=128, hop_length=32, sr=SR, output_format="Complex", iSTFT=True,
                         verbose=False)
    _check(stft, lambda m, x: m.inverse(m(x), onesided=True, length=x.shape[-1]))


@pytest.mark.slow
@pytest.mark.parametrize("trainable", ["stft", "mel"])
def test_trainable_kernels_get_cpu_gradients(features, trainable):
    if trainable == "stft":
        layer = features.STFT(n_fft=128, hop_length=32, sr=SR, output_format="Magnitude",
                              trainable=True, verbose=False)
    else:
        layer = features.MelSpectrogram(sr=SR, n_fft=256, n_mels=32, hop_length=64,
                                        trainable_mel=True, trainable_STFT=True, verbose=False)
    x = _waves()
    x_cpu, x_tpu = x.clone().requires_grad_(), x.to(TPU).requires_grad_()
    layer_tpu = copy.deepcopy(layer).to(TPU)
    for model, wave in ((layer, x_cpu), (layer_tpu, x_tpu)):
        model(wave).abs().mean().backward()
    assert_same(x_tpu.grad, x_cpu.grad, **TOL)
    assert_same_gradients(layer_tpu, layer, **TOL)


@pytest.mark.slow
def test_fused_and_compiled_spectrograms_match_cpu(features):
    """The constant-Q transform (a loop of downsampling convolutions) in fused eager mode;
    MFCC under torch.compile (Dynamo fails on the CQT's reflect padding on CPU too)."""
    x = _waves()
    cqt, mfcc = LAYERS["cqt2010v2"](features), LAYERS["mfcc"](features)
    expected = cqt(x), mfcc(x)
    with torchtpu.set_eager_mode("fused"):
        fused = copy.deepcopy(cqt).to(TPU)(x.to(TPU))
    compiled = torch.compile(copy.deepcopy(mfcc).to(TPU), backend="tpu")(x.to(TPU))
    assert_same((fused, compiled), expected, **TOL)
