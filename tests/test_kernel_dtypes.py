"""Ops CPU's kernels are not built for a dtype of refuse it on tpu too, with CPU's words."""

from __future__ import annotations

import pytest
import torch
from conftest import raises_as_cpu

pytestmark = pytest.mark.usefixtures("eager_mode")

c64, b, i64 = torch.complex64, torch.bool, torch.int64


def _x(device, dtype):
    return (torch.arange(6, dtype=torch.float32).reshape(2, 3) / 7 + 0.1).to(dtype).to(device)


CASES = [
    ("floor", c64, torch.floor), ("ceil", c64, torch.ceil), ("trunc", c64, torch.trunc),
    ("fix", c64, torch.fix), ("sign", c64, torch.sign), ("signbit", c64, torch.signbit),
    ("round", c64, torch.round), ("round to decimals", i64, lambda x: torch.round(x, decimals=0)),
    ("round to 2 decimals", c64, lambda x: torch.round(x, decimals=2)),
    ("relu of bools", b, torch.relu), ("relu", c64, torch.relu),
    ("relu6", b, torch.nn.functional.relu6), ("softplus", i64, torch.nn.functional.softplus),
    ("gelu", i64, torch.nn.functional.gelu), ("frac", c64, torch.frac),
    ("silu", b, torch.nn.functional.silu), ("selu", c64, torch.selu),
    ("leaky_relu", b, torch.nn.functional.leaky_relu), ("mish", c64, torch.nn.functional.mish),
    ("hardshrink", c64, torch.nn.functional.hardshrink),
    ("logsigmoid", i64, torch.nn.functional.logsigmoid),
    ("rrelu", i64, lambda x: torch.rrelu(x, training=True)), ("rrelu in eval", c64, torch.rrelu),
    ("nansum", c64, torch.nansum), ("isposinf", c64, torch.isposinf),
    ("erf", c64, torch.erf), ("special.round", b, torch.special.round),
    ("bessel_j0", torch.bfloat16, torch.special.bessel_j0),
    ("svdvals", torch.float16, torch.linalg.svdvals), ("histc", b, torch.histc),
    ("trace", b, torch.trace), ("mode", c64, torch.mode),
    ("heaviside", c64, lambda x: torch.heaviside(x, x)),
    ("logaddexp2", c64, lambda x: torch.logaddexp2(x, x)),
    ("cumsum_", b, lambda x: x.cumsum_(0)), ("cumprod_", b, lambda x: x.cumprod_(1)),
    ("cumsum_ in another dtype", torch.float32, lambda x: x.cumsum_(0, dtype=torch.float64)),
    ("heaviside of two dtypes", torch.float32, lambda x: torch.heaviside(x, x.double())),
    ("heaviside by a 0-d of another dtype", torch.float32,
     lambda x: torch.heaviside(x, x[0, 0].double())),
    ("heaviside into a complex out", torch.float32,
     lambda x: torch.heaviside(x, x, out=torch.empty_like(x, dtype=c64))),
]


@pytest.mark.parametrize("name, dtype, op", CASES, ids=[c[0] for c in CASES])
def test_a_dtype_cpus_kernel_is_not_built_for_is_refused_as_cpu(name, dtype, op):
    raises_as_cpu(lambda device: op(_x(device, dtype)), Exception)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_the_dtypes_cpus_kernels_take_still_run(dtype):
    for op in (torch.floor, torch.sign, torch.trunc, torch.relu, lambda x: torch.heaviside(x, x)):
        assert torch.equal(op(_x("tpu", dtype)).cpu(), op(_x("cpu", dtype)))
