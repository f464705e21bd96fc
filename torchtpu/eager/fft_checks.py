"""CPU's checks of the FFT primitives' arguments.

torch.fft's functions check their input before they reach ``_fft_r2c``/``_fft_c2c``/``_fft_c2r``
(``rfft expects a real input tensor``), but ihfft2/ihfftn hand a complex input straight to
``_fft_r2c``, and a caller may reach the primitives directly: PyTorch's meta kernels then raise
a bare ``Expected cond to be True``, where CPU's kernels (aten/src/ATen/native/mkl/SpectralOps.cpp)
name the dtype they found.
"""

from __future__ import annotations

import torch

from ..ops.dtypes import scalar_type_name, to_torch_dtype

_aten = torch.ops.aten
# what CPU says of a transform of no dimension, where r2c and c2r read the last one
_NO_DIM = "ArrayRef: attempted to access back() of empty list"


def _r2c_check(self, dim, *_) -> str | None:
    dtype = to_torch_dtype(self.dtype)
    if not dtype.is_floating_point:
        return f"Only supports floating-point dtypes, but found: {scalar_type_name(dtype)}"
    if not dim:
        return _NO_DIM
    if dtype not in (torch.float32, torch.float64):
        return f"MKL FFT doesn't support tensors of type: {scalar_type_name(dtype)}"
    return None


def _complex_only(needs_dim: bool):
    def check(self, dim, *_) -> str | None:
        dtype = to_torch_dtype(self.dtype)
        if not dtype.is_complex:
            return f"Only supports complex dtypes, but found: {scalar_type_name(dtype)}"
        return _NO_DIM if needs_dim and not dim else None

    return check


CHECKS = {
    _aten._fft_r2c.default: _r2c_check,
    _aten._fft_c2c.default: _complex_only(needs_dim=False),
    _aten._fft_c2r.default: _complex_only(needs_dim=True),
}
