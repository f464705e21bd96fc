"""Ops CPU's kernels are not built for a dtype of refuse it on tpu too, with CPU's words."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import raises_as_cpu

pytestmark = pytest.mark.usefixtures("eager_mode")

c64, b, i64 = torch.complex64, torch.bool, torch.int64


def _t(x, values):
    return torch.tensor(values, device=x.device)


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
    # binary kernels, dispatched on the result dtype of both operands
    ("atan2 of a real and a complex", torch.float32, lambda x: torch.atan2(x, x.to(c64))),
    ("fmod", c64, lambda x: torch.fmod(x, x)), ("remainder", c64, lambda x: x % 2),
    ("remainder by a complex number", torch.float32, lambda x: torch.remainder(x, 1j)),
    ("floor_divide", c64, lambda x: x // x),
    ("div rounding", c64, lambda x: torch.div(x, 2, rounding_mode="trunc")),
    ("hypot of ints", i64, lambda x: torch.hypot(x, x)),
    ("hypot", c64, lambda x: torch.hypot(x, x)), ("copysign", c64, lambda x: x.copysign(x)),
    ("nextafter of ints", i64, lambda x: torch.nextafter(x, x)),
    ("logaddexp of ints", i64, lambda x: torch.logaddexp(x, x)),
    ("logaddexp2 of bools", b, lambda x: torch.logaddexp2(x, x)),
    ("xlogy by a 0-d complex", torch.float32, lambda x: torch.xlogy(x, x[0, 0].to(c64))),
    ("xlog1py of a number", c64, lambda x: torch.special.xlog1py(2, x)),
    ("igamma of ints", i64, lambda x: torch.igamma(x, x)),
    ("zeta", c64, lambda x: torch.special.zeta(x, 2.0)),
    ("chebyshev_polynomial_t", c64, lambda x: torch.special.chebyshev_polynomial_t(x, 2)),
    ("hermite_polynomial_h", torch.bfloat16, lambda x: torch.special.hermite_polynomial_h(x, x)),
    ("ldexp by a bool exponent", torch.float32, lambda x: torch.ldexp(x, x > 0.3)),
    ("addcmul of bools", b, lambda x: torch.addcmul(x, x, x)),
    # (bools are integers to CPU's check, and its words have two spaces the meta's lack)
    ("addcdiv by bools", torch.float32, lambda x: torch.addcdiv(x, x > 0.3, x > 0.5)),
    ("addcdiv of integers", i64, lambda x: torch.addcdiv(x, x, x)),
    # cdist's kernel: float32/64 only, both inputs in the first one's dtype (a matrix product
    # where it takes that form), integers refused before with c10's dtype names
    ("cdist", torch.float16, lambda x: torch.cdist(x, x)),
    ("cdist with p=1", torch.bfloat16, lambda x: torch.cdist(x, x, p=1.0)),
    ("batched cdist", torch.bfloat16, lambda x: torch.cdist(x[None], x[None])),
    ("cdist of two dtypes", torch.float32, lambda x: torch.cdist(x, x.double(), p=3.0)),
    ("cdist as a product of two dtypes", torch.float32,
     lambda x: torch.cdist(x, x.double(), compute_mode="use_mm_for_euclid_dist")),
    ("cdist of integers", i64, lambda x: torch.cdist(x.float(), x)),
    ("cdist_backward", torch.float16, lambda x: torch.ops.aten._cdist_backward(
        x[:, :2], x, x, 1.0, x[:, :2])),
    # nn kernels built for floating dtypes
    ("glu", i64, lambda x: F.glu(x.reshape(3, 2))),
    ("prelu", c64, lambda x: F.prelu(x, torch.ones(1, dtype=x.dtype, device=x.device))),
    ("multi_margin_loss", i64, lambda x: F.multi_margin_loss(x, _t(x, [0, 2]))),
    ("multilabel_margin_loss", b, lambda x: F.multilabel_margin_loss(
        x, _t(x, [[0, -1, 1], [2, -1, 0]]))),
    ("unfold", i64, lambda x: F.unfold(x.reshape(1, 1, 2, 3), 2)),
    ("fold", torch.uint8, lambda x: F.fold(x.reshape(1, 2, 3), (1, 4), (1, 2))),
    ("threshold of bools", b, lambda x: F.threshold(x, 0.5, 1)),
    ("group_norm", c64, lambda x: F.group_norm(x, 1)),
    ("batch_norm", i64, lambda x: F.batch_norm(x, None, None, training=True)),
    ("batch_norm with float stats", i64, lambda x: F.batch_norm(
        x, torch.zeros(3, device=x.device), torch.ones(3, device=x.device))),
    ("instance_norm", b, lambda x: F.instance_norm(x[None])),
    ("softmax", c64, lambda x: torch.softmax(x, 0)),
    ("log_softmax over the last dim", c64, lambda x: torch.log_softmax(x, -1)),
    ("grid_sample", i64, lambda x: F.grid_sample(
        x.reshape(1, 1, 2, 3), torch.zeros(1, 1, 1, 2, dtype=x.dtype, device=x.device),
        align_corners=False)),
    ("smooth_l1_loss", i64, lambda x: F.smooth_l1_loss(x, x)),
    ("huber_loss", b, lambda x: F.huber_loss(x, x)),
    ("hardtanh_backward", i64, lambda x: torch.ops.aten.hardtanh_backward(x, x, -1, 1)),
    ("bilinear of bools", b, lambda x: F.bilinear(x, x, torch.ones(
        4, 3, 3, dtype=torch.bool, device=x.device))),
    # (its output has the input's dtype, which the float loss cannot be cast into)
    ("soft_margin_loss of integers", torch.uint8, lambda x: F.soft_margin_loss(x, x)),
    ("soft_margin_loss of an integer by a float target", i64,
     lambda x: F.soft_margin_loss(x, x.double())),
    # (a decomposition's matmul checks as the user's would)
    ("_euclidean_dist of two dtypes", torch.float32,
     lambda x: torch.ops.aten._euclidean_dist(x, x.double())),
]


@pytest.mark.parametrize("name, dtype, op", CASES, ids=[c[0] for c in CASES])
def test_a_dtype_cpus_kernel_is_not_built_for_is_refused_as_cpu(name, dtype, op):
    raises_as_cpu(lambda device: op(_x(device, dtype)), Exception)


def test_lcm_of_bools_is_refused_as_cpu():
    raises_as_cpu(lambda device: torch.lcm(_x(device, b), _x(device, b)), NotImplementedError,
                  tpu_kernels=True)


@pytest.mark.parametrize("rows, columns, mode", [
    (6, 3, "use_mm_for_euclid_dist"), (0, 3, "use_mm_for_euclid_dist_if_necessary"),
    (4, 0, "donot_use_mm_for_euclid_dist")])
def test_half_cdist_runs_where_cpu_computes_it_without_its_kernel(rows, columns, mode):
    # a matrix product, an empty result or zeros
    def dist(device):
        x = (torch.arange(rows * columns) / 7).to(torch.float16).reshape(rows, columns)
        return torch.cdist(x.to(device), x[:4].to(device) + 1, compute_mode=mode)

    assert torch.equal(dist("tpu").cpu(), dist("cpu"))


@pytest.mark.parametrize("op", [
    lambda d: torch.gcd(torch.ones(0, device=d), torch.ones(5, device=d)),
    lambda d: torch.fmod(torch.ones(2, 3, dtype=c64, device=d), torch.ones(4, 3, device=d)),
    lambda d: torch.ones(2, 1, device=d).lcm_(torch.ones(2, 2, 5, device=d)),
    lambda d: torch.ones(2, 1, dtype=b, device=d).remainder_(torch.ones(2, 3, dtype=b,
                                                                        device=d)),
], ids=["gcd", "fmod", "lcm_", "remainder_"])
def test_shapes_are_checked_before_the_kernels_dtypes_as_on_cpu(op):
    # TensorIterator broadcasts (and checks an in-place op's self) before it picks a kernel
    raises_as_cpu(op)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_the_dtypes_cpus_kernels_take_still_run(dtype):
    for op in (torch.floor, torch.sign, torch.trunc, torch.relu, lambda x: torch.heaviside(x, x)):
        assert torch.equal(op(_x("tpu", dtype)).cpu(), op(_x("cpu", dtype)))
