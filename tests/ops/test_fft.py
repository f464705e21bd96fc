"""torch.fft and the window functions against CPU where the OpInfo sweep's samples say little:
the FFT primitives' refusals (torch.fft's own checks leave ihfft2/ihfftn's to them), and the
windows' out= forms and dtype refusals."""

from __future__ import annotations

import pytest
import torch
from conftest import raises_as_cpu

_aten = torch.ops.aten


@pytest.mark.parametrize("fn", [torch.fft.ihfft2, torch.fft.ihfftn])
@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_ihfftn_of_a_complex_input_is_refused_as_cpu(fn, dtype):
    # (it reaches _fft_r2c unchecked: the meta kernel's bare "Expected cond to be True")
    raises_as_cpu(lambda device: fn(torch.ones(4, 6, dtype=dtype, device=device)))


@pytest.mark.parametrize("call", [
    lambda x: _aten._fft_r2c(x, [1], 0, True),
    lambda x: _aten._fft_r2c(x, [1], 2, False),
    lambda x: _aten._fft_c2c(x, [1], 0, True),
    lambda x: _aten._fft_c2c(x, [], 0, False),
    lambda x: _aten._fft_c2r(x, [0, 1], 1, 10),
], ids=["r2c", "r2c_twosided", "c2c", "c2c_no_dim", "c2r"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64,
                                   torch.bool, torch.complex64])
def test_fft_primitives_refuse_dtypes_as_cpu(call, dtype):
    x = torch.ones(4, 6, dtype=dtype)
    try:
        expected = call(x)
    except RuntimeError:
        raises_as_cpu(lambda device: call(x.to(device)))
    else:
        torch.testing.assert_close(call(x.to("tpu")).cpu(), expected)


@pytest.mark.parametrize("call", [lambda x: _aten._fft_r2c(x, [], 0, True),
                                  lambda x: _aten._fft_c2r(x.cfloat(), [], 0, 4)],
                         ids=["r2c", "c2r"])
def test_fft_primitives_of_no_dimension_are_refused_as_cpu(call):
    raises_as_cpu(lambda device: call(torch.ones(4, 6, device=device)))


_WINDOW_OUTS = [
    lambda out: _aten.hann_window.out(5, out=out),
    lambda out: _aten.hann_window.periodic_out(5, False, out=out),
    lambda out: _aten.hamming_window.periodic_alpha_beta_out(6, True, 0.5, 0.3, out=out),
    lambda out: _aten.kaiser_window.beta_out(7, True, 3.0, out=out),
]


@pytest.mark.parametrize("call", _WINDOW_OUTS, ids=["hann", "hann_periodic", "hamming", "kaiser"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_window_out_is_built_in_its_dtype_as_cpu(call, dtype):
    # (hann_window's decomposition rounded a float16 window once, CPU's kernel after each step)
    out = torch.zeros(0, dtype=dtype)
    call(out)
    out_tpu = torch.zeros(0, dtype=dtype, device="tpu")
    call(out_tpu)
    torch.testing.assert_close(out_tpu.cpu(), out, rtol=0, atol=0)


@pytest.mark.parametrize("call", _WINDOW_OUTS, ids=["hann", "hann_periodic", "hamming", "kaiser"])
def test_window_out_of_an_integer_dtype_is_refused_as_cpu(call):
    raises_as_cpu(lambda device: call(torch.zeros(0, dtype=torch.int64, device=device)))


@pytest.mark.parametrize("fn", [torch.hann_window, torch.bartlett_window, torch.kaiser_window])
def test_window_of_an_integer_dtype_is_refused_as_cpu(fn):
    # CPU prints the options as the caller gave them (pinned_memory=false, not "(default)")
    raises_as_cpu(lambda device: fn(5, dtype=torch.int64, device=device))


@pytest.mark.parametrize("fn", [torch.fft.fft, torch.fft.rfft, torch.fft.irfft, torch.fft.hfft,
                                torch.fft.ihfft, torch.fft.fftn])
def test_fft_of_an_empty_batch_is_empty(fn):
    # Deliberately not CPU's: this build's MKL refuses a batch of none ("DFTI ERROR:
    # Inconsistent configuration parameters", pytorch#174984) where PocketFFT builds and
    # numpy return an empty result.
    x = torch.randn(0, 4)
    kwargs = {"dim": (1,)} if fn is torch.fft.fftn else {}
    out = fn(x.to("tpu"), **kwargs)
    meta = fn(x.to("meta"), **kwargs)
    assert out.shape == meta.shape and out.dtype == meta.dtype
