"""Errors that depend on values, not shapes: strict eager reads the values where CPU's
kernels check them (division by zero, a bound past the dtype's range, an assertion)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from conftest import assert_same, raises_as_cpu
from value_check_cases import CASES


@pytest.mark.parametrize("bad", [
    lambda d: torch.tensor([5, 7], device=d) // 0,
    lambda d: torch.tensor([5, 7], device=d) % torch.tensor([2, 0], device=d),
    lambda d: torch.fmod(torch.tensor([5, 7], device=d), 0),
    lambda d: torch.div(torch.tensor([5, 7], device=d), torch.tensor(0, device=d),
                        rounding_mode="trunc"),
    lambda d: torch.tensor([5, 7], device=d).floor_divide_(torch.tensor([0, 1], device=d)),
    lambda d: 5 // torch.tensor([0], device=d),
    # the divisor as the result's dtype: int8 by 2**31 or by a 0-d 256 divides by 0
    lambda d: torch.tensor([5, 7], dtype=torch.int8, device=d) // 2**31,
    lambda d: torch.tensor([5, 7], dtype=torch.int8, device=d) % torch.tensor(256, device=d),
], ids=["floordiv_number", "remainder_tensor", "fmod", "div_trunc", "in_place", "reflected",
        "wrapped_number", "wrapped_0d"])
def test_integer_division_by_zeroraises_as_cpu(bad):
    # XLA gives a value (-1, the dividend, 0); CPU raises. Strict and debug eager wait for
    # a tensor divisor's values, as they do for indices.
    raises_as_cpu(bad)


@pytest.mark.parametrize("bound", [1e39, 70000.0, 3e38])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32])
def test_clamp_bounds_that_overflow_the_result_dtype_raise_as_cpu(dtype, bound):
    # (an int32 tensor clamped by a float is clamped as float32; inf is no overflow)
    for clamp in (lambda t: t.clamp(max=bound), lambda t: t.clamp_min(-bound)):
        x = torch.ones(2, dtype=dtype)
        try:
            expected = clamp(x)
        except RuntimeError:
            raises_as_cpu(lambda d, clamp=clamp: clamp(torch.ones(2, dtype=dtype, device=d)))
        else:
            assert_same(clamp(x.to("tpu")), expected)


@pytest.mark.parametrize("name", CASES)
def test_the_values_fused_eager_checks_raise_at_once_in_strict_eager(name):
    fn, x, index = CASES[name]
    raises_as_cpu(lambda d: fn(x.to(d), index.to(d)), Exception)


@pytest.mark.parametrize("lengths", [([5], [7]), ([7], [2])], ids=["targets", "inputs"])
def test_ctc_lengths_on_tpu_are_checked_in_strict_eager(lengths):
    # (as cuda's kernel, which reads them on the host; fused eager does not wait for them)
    log_probs = torch.randn(5, 1, 4).log_softmax(2)
    raises_as_cpu(lambda d: F.ctc_loss(log_probs.to(d), torch.tensor([[1, 2]], device=d),
                                       *(torch.tensor(n, device=d) for n in lengths)))


@pytest.mark.parametrize("dtype, limits", [
    (torch.uint8, (-1, 5)), (torch.uint8, (-0.5, 0)), (torch.uint8, (2, 300)),
    (torch.int8, (-200, 3)), (torch.float16, (-1e6, 1.0)),
    # integer limits are truncated; a float tensor's are not
    (torch.uint8, (-0.5, 250.9)), (torch.int64, (-1.5, 2.7)), (torch.bfloat16, (-1.5, 2.7))])
def test_hardtanh_limits_are_checked_as_cpu(dtype, limits):
    x = torch.tensor([0, 1, 3, 100], dtype=dtype)
    for inplace in (False, True):
        try:
            expected = F.hardtanh(x.clone(), *limits, inplace=inplace)
        except RuntimeError:
            raises_as_cpu(lambda d, i=inplace: F.hardtanh(x.to(d), *limits, inplace=i))
        else:
            assert_same(F.hardtanh(x.to("tpu"), *limits, inplace=inplace), expected)


def test_division_by_zero_that_cpu_allows():
    x = torch.tensor([5.0, -7.0])
    for op in (lambda t: t // 0, lambda t: t % 0.0, lambda t: torch.div(t.long(), 0),
               lambda t: t.long() // 2):
        assert_same(op(x.to("tpu")), op(x))
    # an empty result divides nothing, whatever the (broadcast) divisor holds
    empty = torch.zeros(0, 3, dtype=torch.long)
    for op in (lambda t, d: t % torch.tensor(0, device=d), lambda t, d: t // 0,
               lambda t, d: t.fmod_(torch.zeros(1, 3, dtype=torch.long, device=d))):
        assert_same(op(empty.to("tpu"), "tpu"), op(empty, "cpu"))


@pytest.mark.parametrize("value", [0, 1.0, float("nan"), False, [1, 1], []], ids=str)
@pytest.mark.parametrize("message", [(), ("the batch is empty",)], ids=["plain", "message"])
def test_assert_async_raises_as_cpu(value, message):
    def check(device):
        torch._assert_async(torch.tensor(value, device=device), *message)

    try:
        check("cpu")
    except RuntimeError:
        raises_as_cpu(check)
    else:
        check("tpu")



_NAN, _INF = float("nan"), float("inf")


@pytest.mark.parametrize("bad", [
    lambda d: torch.multinomial(torch.tensor([1.0, -1.0, 1.0], device=d), 2),
    lambda d: torch.multinomial(torch.tensor([[1.0, 1.0], [0.0, 0.0]], device=d), 1),
    # with replacement, more than one draw: row by row, element by element, other messages
    lambda d: torch.multinomial(torch.tensor([1.0, _NAN, -1.0], device=d), 2, True),
    lambda d: torch.multinomial(torch.tensor([[1.0, _INF], [1.0, 1.0]], device=d), 2, True),
    lambda d: torch.multinomial(torch.tensor([[0.0, 0.0], [1.0, -1.0]], device=d), 2, True),
    lambda d: torch.bernoulli(torch.tensor([0.5, 1.5], device=d)),
    lambda d: torch.zeros(2, device=d).bernoulli_(torch.tensor([0.5, _NAN], device=d)),
    lambda d: torch.normal(torch.zeros(2, device=d), torch.tensor([1.0, -1.0], device=d)),
    lambda d: torch.normal(0.0, torch.tensor([1.0, _NAN], device=d)),
    lambda d: torch.normal(torch.zeros(2, device=d), torch.tensor([1.0, -1.0, 1.0], device=d)),
    # valid std: CPU's broadcast message, not jnp's ValueError
    lambda d: torch.normal(torch.zeros(2, 3, device=d), torch.ones(3, 2, device=d)),
    lambda d: torch.poisson(torch.tensor([2.0, -1.0], device=d)),
], ids=["multinomial_negative", "multinomial_zero_row", "multinomial_replaced_nan",
        "multinomial_replaced_inf", "multinomial_replaced_zero_row_first", "bernoulli",
        "bernoulli_tensor_p", "normal_std", "normal_nan_std", "normal_std_before_shapes",
        "normal_shapes", "poisson"])
def test_random_parameters_raise_as_cpu(bad):
    # CPU's samplers check their parameters' values (cuda asserts on the device); strict and
    # debug eager read them as they read indices.
    raises_as_cpu(bad)


@pytest.mark.parametrize("lengths", [[0, 2, 3, 0], [[0, 3, 3, 0], [2, 3, 0, 0]], [-1, 7]],
                         ids=["short", "rows", "negative"])
def test_segment_reduce_checks_its_lengths_unless_unsafe(lengths):
    def bad(device):
        lengths_t = torch.tensor(lengths, device=device)
        data = torch.arange(6.0 * lengths_t.ndim, device=device).reshape(-1, 6).squeeze(0)
        torch._segment_reduce(data, "sum", lengths=lengths_t, axis=lengths_t.ndim - 1)

    raises_as_cpu(bad)
    # unsafe=True skips the check, as on CPU (offsets are never checked)
    data = torch.arange(6.0)
    assert_same(torch._segment_reduce(data.to("tpu"), "sum", lengths=torch.tensor(
        [1, 1], device="tpu"), unsafe=True), torch._segment_reduce(
        data, "sum", lengths=torch.tensor([1, 1]), unsafe=True))


@pytest.mark.parametrize("value", [-1e5, 1e39, float("inf"), 300, 1 + 2j])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float8_e4m3fn,
                                   torch.float32, torch.uint8, torch.complex64])
def test_scalar_tensor_rounds_or_refuses_numbers_as_cpu(dtype, value):
    # CPU's scalar_tensor rounds a number past float16's range to inf (fill_ would raise),
    # saturates float8, refuses 1e39 as float32 or complex64; tpu's went through fill_, so
    # x_half[mask] = -1e5 (geomloss's log-weights) raised where CPU wrote -inf
    def make(device):
        return torch.scalar_tensor(value, dtype=dtype, device=device)

    try:
        expected = make("cpu")
    except RuntimeError:
        raises_as_cpu(make)
        return
    assert_same(make("tpu").view(torch.uint8 if dtype.itemsize == 1 else dtype),
                expected.view(torch.uint8 if dtype.itemsize == 1 else dtype))
    if dtype in (torch.float16, torch.bfloat16):  # a traced scalar_tensor: the same rule
        compiled = torch.compile(lambda: make("tpu"), backend="tpu")
        assert_same(compiled(), expected)


def test_half_tensor_set_by_an_overflowing_number_as_cpu():
    def run(device):
        x = torch.zeros(4, dtype=torch.float16, device=device)
        x[torch.tensor([True, False, False, False], device=device)] = -100000
        x[2] = 1e6
        x[torch.zeros(4, dtype=torch.bool, device=device)] = 7e4  # selects nothing
        return x

    assert_same(run("tpu"), run("cpu"))


@pytest.mark.parametrize("value", [True, False])
def test_functional_assert_async_and_its_token_as_cpu(value):
    # torch.export's functionalized asserts: the token factory had no tpu kernel
    def check(device):
        token = torch.ops.aten._make_dep_token(device=device)
        assert token.shape == () and token.device.type == device
        return torch.ops.aten._functional_assert_async.msg(
            torch.tensor(value, device=device), "x must be positive", token).shape

    if value:
        assert check("tpu") == check("cpu")
    else:
        raises_as_cpu(check)


_FILLS = [  # (elements, dtype, number)
    (1, torch.float16, 1e6), (2, torch.float16, 1e6), (1, torch.float16, 65519.0),
    (1, torch.bfloat16, -1e39), (2, torch.bfloat16, 1e39), (1, torch.float16, 1 + 1j),
    (1, torch.float8_e4m3fn, 1e6), (1, torch.float8_e4m3fn, -math.inf),
    (2, torch.float8_e4m3fn, 450.0), (2, torch.float8_e4m3fn, math.inf),
    (2, torch.float8_e5m2fnuz, math.inf), (1, torch.float32, 1e39), (2, torch.uint16, 1e10),
    (1, torch.complex64, 1e39), (2, torch.complex64, complex(1, 1e39)),
]


@pytest.mark.parametrize("fill", [
    lambda n, dtype, v, d: torch.zeros(n, dtype=dtype, device=d).fill_(v),
    lambda n, dtype, v, d: torch.zeros(n + 1, dtype=dtype, device=d)[:n].fill_(v),
    lambda n, dtype, v, d: torch.full((n, 1), v, dtype=dtype, device=d),
], ids=["fill_", "fill_view", "full"])
def test_numbers_past_a_dtypes_range_fill_as_cpu(fill):
    # CPU fills one element through scalar_fill: into a 16-bit or 8-bit float unchecked (1e6
    # is inf in float16; float8_e4m3fn saturates at 448), where more elements raise. No
    # infinity goes into a float8 without one; complex64 checks each part.
    for n, dtype, value in _FILLS:
        def run(d, n=n, dtype=dtype, value=value):
            return fill(n, dtype, value, d)
        try:
            expected = run("cpu")
        except RuntimeError:
            raises_as_cpu(run)
        else:
            assert_same(run("tpu"), expected, rtol=0, atol=0)
