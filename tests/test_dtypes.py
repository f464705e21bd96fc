"""dtypes report and compute as in PyTorch: promotion, 64-bit, low precision."""

from __future__ import annotations

import threading
import warnings

import pytest
import torch
from conftest import TPU, assert_same, raises_as_cpu, run_both

import torchtpu

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.int16,
          torch.int32, torch.int64, torch.uint8, torch.bool, torch.complex64]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_round_trip_keeps_dtype_and_values(dtype):
    c = (torch.arange(-3, 9) % 5).to(dtype) if dtype != torch.bool else torch.arange(6) % 2 == 0
    t = c.to("tpu")
    assert t.dtype == dtype
    assert_same(t, c)


def test_int64_and_float64_stay_64_bit():
    big = torch.tensor([2**40 + 1, -(2**50)], dtype=torch.int64)
    run_both(lambda x: [x + 1, x * 3, x // 7, x.sum()], big)
    precise = torch.tensor([1.0 + 1e-12, 1e300], dtype=torch.float64)
    run_both(lambda x: [x - 1, x * 2, x.sqrt()], precise, rtol=0, atol=0)


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: a + b,
        lambda a, b: a * 2.5,
        lambda a, b: a / b,
        lambda a, b: a // b,
        lambda a, b: a % b,
        lambda a, b: a > b,
        lambda a, b: a + True,
        lambda a, b: a * torch.tensor(2.0),
        lambda a, b: torch.where(a > 0, a, b),
    ],
)
@pytest.mark.parametrize(
    "dtypes",
    [(torch.int64, torch.float32), (torch.int32, torch.int64), (torch.uint8, torch.int8),
     (torch.bool, torch.int64), (torch.float16, torch.float32), (torch.bfloat16, torch.int64),
     (torch.float32, torch.float64), (torch.int64, torch.int64)],
    ids=str,
)
def test_type_promotion(fn, dtypes):
    a = (torch.arange(1, 7) % 4 + 1).to(dtypes[0])
    b = (torch.arange(2, 8) % 3 + 1).to(dtypes[1])
    run_both(fn, a, b, rtol=1e-2, atol=1e-2)


def test_zero_dim_tensor_does_not_promote_dimensioned():
    run_both(lambda a, s: [a * s, (a + s).dtype == a.dtype], torch.ones(3, dtype=torch.float16),
             torch.tensor(3.0, dtype=torch.float64))


@pytest.mark.parametrize("dtypes", [(torch.int32, torch.float16), (torch.uint8, torch.bfloat16),
                                    (torch.float32, torch.float64), (torch.bool, torch.int64)],
                         ids=str)
def test_ldexp_by_a_0d_exponent_promotes_as_cpu(dtypes):
    # an integer self by a 0-d half exponent is half on CPU (int-to-float promotion of both)
    run_both(torch.ldexp, torch.arange(1, 4).to(dtypes[0]), torch.tensor(3).to(dtypes[1]))


def test_ldexp_into_an_integer_refuses_as_cpu():
    ints = lambda device: torch.arange(1, 4, dtype=torch.int32, device=device)  # noqa: E731
    raises_as_cpu(lambda device: ints(device).ldexp_(ints(device)))
    raises_as_cpu(lambda device: torch.ldexp(ints(device), ints(device), out=ints(device)))


@pytest.mark.parametrize("op, other", [
    (torch.copysign, -1), (torch.xlogy, -1), (torch.copysign, torch.tensor(-3)),
    (torch.atan2, torch.tensor(-3)), (torch.xlogy, torch.tensor(-3)),
], ids=["copysign_number", "xlogy_number", "copysign_0d", "atan2_0d", "xlogy_0d"])
def test_ops_that_take_integers_as_floats_cast_each_operand_as_cpu(op, other):
    # the result is float: -1 is -1.0, not uint8's 255 first
    def run(device):
        return op(torch.tensor([1, 2, 0], dtype=torch.uint8, device=device), other)

    assert_same(run("tpu"), run("cpu"))


def test_shifting_bools_promotes_as_cpu():
    # bools << 1 are int64 on CPU (the meta kernel of __lshift__ refuses any bool tensor)
    run_both(lambda b: [b << 1, b >> 1, b << torch.tensor(2, dtype=torch.int8), 1 << b],
             torch.tensor([True, False, True]))


@pytest.mark.parametrize("op", [
    lambda x: x.fmod_(1j), lambda x: x.bitwise_and_(torch.ones_like(x, dtype=torch.float32)),
    lambda x: x.floor_divide_(torch.ones_like(x, dtype=torch.complex64)),
    lambda x: x.__ilshift__(1.5), lambda x: x.atan2_(torch.ones_like(x, dtype=torch.complex64)),
    # a comparison gives bools, whatever it compares in: its kernel's refusal stands
    lambda x: x.float().lt_(1j), lambda x: torch.ge(x, 1j, out=torch.empty_like(x, dtype=float)),
], ids=["fmod_", "bitwise_and_", "floor_divide_", "ilshift", "atan2_", "lt_", "ge_out"])
def test_inplace_cast_is_refused_before_the_kernels_dtypes_as_cpu(op):
    raises_as_cpu(lambda device: op(torch.arange(1, 4, device=device)))


def test_inplace_cannot_narrow_type():
    x = torch.ones(3, dtype=torch.int64, device="tpu")
    with pytest.raises(RuntimeError, match="can't be cast"):
        x.add_(1.5)
    y = torch.ones(3, device="tpu")
    y.add_(torch.ones(3, dtype=torch.int64, device="tpu"))  # widening is fine
    assert y.dtype == torch.float32


def test_bf16_math_within_bf16_tolerance():
    # The product and the row sum apart: a bfloat16 dot summing its float32 products in
    # another order than CPU's (fused eager's program picks its own kernel) rounds a near-tie
    # the other way, and the sum of a product's row adds 64 such ulps of up to 0.25, beyond
    # any tolerance for a row that cancels to near 0.
    x = torch.randn(64, 64, generator=torch.Generator().manual_seed(0))
    run_both(lambda a: [a @ a.t(), a.sum(1), a.softmax(-1), a.exp()], x.bfloat16(),
             rtol=2e-2, atol=2e-2)


def test_conversions():
    run_both(lambda x: [x.long(), x.int(), x.half(), x.bool(), x.double(), x.to(torch.uint8)],
             torch.tensor([0.0, 1.7, -2.2, 3.5]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64])
def test_dequantize_of_a_tensor_not_quantized_is_to_float32_as_cpu(dtype):
    x = torch.tensor([0.0, 1.7, -2.2, 3.5]).to(dtype)
    run_both(lambda t: t.dequantize(), x)
    xt = x.to(TPU)
    assert (xt.dequantize() is xt) == (x.dequantize() is x)


@pytest.mark.parametrize("convert", [lambda c: c.float(), lambda c: c.to(torch.float64),
                                     lambda c: torch.empty(2, device=c.device).copy_(c),
                                     lambda c: c.to(torch.int16)],
                         ids=["float", "to", "copy_", "int"])
def test_complex_to_real_keeps_the_real_part_and_warns_once_as_cpu(convert, monkeypatch):
    from torchtpu.eager import special

    monkeypatch.setattr(special, "_warned_of_imaginary", False)
    c = torch.tensor([1.5 + 2j, -3 - 1j])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.simplefilter("error", DeprecationWarning)  # jax's, for casting a complex
        assert_same(c.to("tpu").bool(), c.bool())  # no warning: nonzero-ness is kept
        out = convert(c.to("tpu"))
        convert(c.to("tpu"))  # once a process, as CPU's TORCH_WARN_ONCE
    assert [str(w.message) for w in caught if w.category is UserWarning] == [
        "Casting complex values to real discards the imaginary part"]
    assert_same(out, convert(c))


def test_autocast_follows_pytorchs_accelerator_policy():
    # ATen's policy for CUDA and XPU, with bfloat16 the default dtype as on CPU and TPUs.
    x = torch.randn(4, 5, device="tpu")
    b, d = x.bfloat16(), x.double()
    with torch.autocast("tpu"):
        assert torch.get_autocast_dtype("tpu") == torch.bfloat16
        assert (x @ x.T).dtype == torch.bfloat16
        assert (d @ d.T).dtype == torch.float64  # float64 is never cast
        assert b.softmax(-1).dtype == b.exp().dtype == torch.float32
        assert torch.nn.functional.layer_norm(b, (5,)).dtype == torch.float32
        assert b.sum().dtype == b.cumsum(0).dtype == b.norm().dtype == torch.float32
        assert b.sum(dtype=torch.bfloat16).dtype == b.log_softmax(0, torch.bfloat16).dtype \
            == torch.bfloat16  # a dtype the caller gives stays
        assert torch.addcmul(x, b, b).dtype == torch.float32  # the widest input
        assert torch.addcmul(b, b, b).dtype == torch.bfloat16
        assert (b + b).dtype == torch.bfloat16  # everything else as is
    with torch.autocast("tpu", dtype=torch.float16):
        assert (x @ x.T).dtype == torch.float16


def test_autocast_defaults_to_bfloat16_in_every_thread():
    # PyTorch keeps the autocast dtype per thread, a new one starting at float16 for a
    # PrivateUse1 device; a dtype a thread chooses stays its own.
    seen = {}

    def work(name, chosen=None):
        if chosen is not None:
            torch.set_autocast_dtype("tpu", chosen)
        x = torch.randn(3, 3, device="tpu")
        with torch.autocast("tpu"):
            seen[name] = (torch.get_autocast_dtype("tpu"), (x @ x).dtype)

    for name, chosen in (("default", None), ("float16", torch.float16)):
        thread = threading.Thread(target=work, args=(name, chosen))
        thread.start()
        thread.join()
    assert seen == {"default": (torch.bfloat16,) * 2, "float16": (torch.float16,) * 2}
    assert torch.get_autocast_dtype("tpu") == torch.bfloat16


def test_autocast_rms_norm_vdot_and_interpolate():
    # CUDA's lists in this PyTorch: rms_norm in float32, vdot in its widest input's dtype; and
    # F.interpolate (its .vec overloads) float32 under torch.compile as in eager.
    import torchtpu.compile  # noqa: F401 (registers the backend)

    x = torch.randn(2, 3, 4, 4, device="tpu").bfloat16()
    interpolate = lambda t: torch.nn.functional.interpolate(t, scale_factor=2,  # noqa: E731
                                                            mode="bilinear")
    with torch.autocast("tpu"):
        assert torch.nn.functional.rms_norm(x, (4,)).dtype == torch.float32
        assert torch.vdot(x.flatten(), x.flatten().float()).dtype == torch.float32
        assert interpolate(x).dtype == torch.float32
        assert torch.compile(interpolate, backend="tpu")(x).dtype == torch.float32


def test_autocast_bf16_matches_cpu_autocast():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    x, y = torch.randn(5, 4), torch.tensor([0, 1, 2, 0, 1])
    results = []
    for device in ("cpu", "tpu"):
        model.to(device)
        model.zero_grad()
        with torch.autocast(device, dtype=torch.bfloat16):
            out = model(x.to(device))
            loss = torch.nn.functional.cross_entropy(out, y.to(device))
        loss.backward()
        assert out.dtype == torch.bfloat16 and loss.dtype == torch.float32
        results.append((out, loss, model[0].weight.grad.clone()))
    assert results[1][2].dtype == torch.float32
    assert_same(results[1], results[0], rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("make", [
    lambda d: torch.linspace(0, 1 + 1j, 3, device=d),
    lambda d: torch.linspace(0j, 2j, 3, device=d),
    lambda d: torch.linspace(0, 1, 4, dtype=torch.complex64, device=d),
    lambda d: torch.logspace(0, 1j, 2, device=d),
])
def test_complex_linspace_and_logspace_as_cpu(make):
    # A complex endpoint makes the result complex; it stepped in float64 and lost its imaginary
    # part.
    assert_same(make("tpu"), make("cpu"), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int32])
def test_integer_logspace_as_cpu(dtype):
    # Its step subtracted the endpoints in the output type (uint8's 0 - 1 wrapped to 255);
    # powers past the type's range saturated (CPU converts through int32: 2**20 is 0 in int8);
    # one step is a checked fill on CPU.
    for start, end, steps in ((1, 0, 4), (4.3, 1.2, 4), (-3, 5, 4), (20, 3, 7), (2, 0, 1)):
        expected = torch.logspace(start, end, steps, 2.0, dtype=dtype)
        got = torch.logspace(start, end, steps, 2.0, dtype=dtype, device="tpu")
        assert torch.equal(got.cpu(), expected), (start, end, got, expected)
    raises_as_cpu(lambda d: torch.logspace(40, 3, 1, 2.0, dtype=dtype, device=d))
    raises_as_cpu(lambda d: torch.logspace(200, 3, 1, 10.0, device=d))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_linspace_is_cpus_bit_for_bit(dtype):
    # float32 stepped in float64 (a third of the values 1 ulp off CPU's, which steps in
    # float32 and rounds start + step * i once).
    for start, end in ((-1, 1), (0.1, 7.3), (5, -5)):
        for steps in (2, 7, 28, 1000):
            expected = torch.linspace(start, end, steps, dtype=dtype)
            assert torch.equal(torch.linspace(start, end, steps, dtype=dtype, device="tpu").cpu(),
                               expected)



@pytest.mark.filterwarnings("ignore:torch.range is deprecated")
@pytest.mark.parametrize("args, dtype", [
    ((0, 5), None), ((0, 1, 0.1), None), ((1.5, -2.25, -0.75), torch.float64),
    ((0, 1, 0.1), torch.float16), ((0, 1, 0.1), torch.bfloat16), ((-1.5, 4.9, 1.7), torch.int64),
    ((100, 130, 10), torch.int8), ((3, 3), torch.int32),
])
def test_range_includes_its_end_as_cpu(args, dtype):
    expected = torch.range(*args, dtype=dtype)
    actual = torch.range(*args, dtype=dtype, device=TPU)
    assert actual.dtype == expected.dtype
    assert torch.equal(actual.cpu(), expected)


@pytest.mark.filterwarnings("ignore:torch.range is deprecated")
@pytest.mark.parametrize("args, dtype, exc", [
    ((0, 5, 0), None, RuntimeError), ((0, 5, -1), None, RuntimeError),
    ((float("nan"), 5), None, RuntimeError), ((0, float("inf")), torch.float16, RuntimeError),
    ((0, float("inf")), torch.int64, RuntimeError), ((0, 1e300), torch.float16, RuntimeError),
    ((0, 5), torch.complex64, NotImplementedError), ((0, 5), torch.bool, NotImplementedError),
])
def test_range_refuses_as_cpu(args, dtype, exc):
    raises_as_cpu(lambda d: torch.range(*args, dtype=dtype, device=d), exc)


@pytest.mark.parametrize("args, dtype", [
    ((0, 5.5), torch.int32), ((0, 5.5), torch.int64), ((0, 2.5, 0.5), torch.int16),
    ((-2.5, 3.7, 1.5), torch.uint8), ((10, -3, -2), None), ((0, 1, 0.1), None),
])
def test_arange_counts_as_cpu(args, dtype):
    # CPU counts every integer dtype but int64 from the bounds as doubles: 6 elements of int32
    # from 0 to 5.5, 5 of int64 (the meta kernel's count and ours gave 5 for both).
    expected = torch.arange(*args, dtype=dtype)
    assert torch.equal(torch.arange(*args, dtype=dtype, device=TPU).cpu(), expected)


@pytest.mark.parametrize("args, dtype, exc", [
    ((float("nan"), 5), None, RuntimeError), ((-5, float("nan")), None, RuntimeError),
    ((0, 5, float("nan")), None, RuntimeError), ((0, 1e20, 1e-10), None, RuntimeError),
    ((0, 2**63 - 1, 2**61), None, RuntimeError), ((0, 5, 0.3), torch.int64, ValueError),
    ((0, 5), torch.complex64, NotImplementedError), ((0, 5), torch.bool, NotImplementedError),
])
def test_arange_refuses_as_cpu(args, dtype, exc):
    # PyTorch's Python reference checks in another order (a NaN bound was "inconsistent with
    # step sign"), an overflowing count failed inside prims.iota, bool and complex were made.
    raises_as_cpu(lambda d: torch.arange(*args, dtype=dtype, device=d), exc)

@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid_of_the_identity_is_cpus_bit_for_bit(align_corners):
    # Its points fall on pixel centres, where grid_sample's gradient jumps: a grid 1 ulp off
    # (PyTorch's decomposition scales linspace's endpoints) changed the gradient (the spatial
    # transformer tutorial trained otherwise).
    theta = torch.tensor([[[1.0, 0, 0], [0, 1, 0]]])
    for size in ((1, 1, 28, 28), (1, 3, 5, 7)):
        expected = torch.nn.functional.affine_grid(theta, size, align_corners=align_corners)
        got = torch.nn.functional.affine_grid(theta.to("tpu"), size, align_corners=align_corners)
        assert torch.equal(got.cpu(), expected)


def test_log_softmax_of_an_empty_low_precision_tensor():
    x = torch.empty(0, 3, dtype=torch.bfloat16)
    assert_same(torch.log_softmax(x.to("tpu"), -1), torch.log_softmax(x, -1))


def test_where_takes_a_uint8_condition_as_cpu():
    # Deprecated on CPU (a warning), refused by PyTorch's meta kernel.
    condition = torch.tensor([1, 0, 3], dtype=torch.uint8)
    with pytest.warns(UserWarning, match="where received a uint8 condition"):
        run_both(lambda c: torch.where(c, torch.ones(3, device=c.device), -1.0), condition)


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2,
                                   torch.float8_e4m3fnuz, torch.float8_e5m2fnuz])
def test_float8_casts_and_transfers(dtype):
    # torch cannot hand numpy a float8 tensor: they move as their bits, as bfloat16 does.
    # Past float8_e4m3fn's range CPU saturates to +-448 (XLA: NaN).
    x = torch.tensor([0.1, 1.5, -3.25, 300.0, 1e-3, 0.0, 470.0, -1e30, float("inf"),
                      -float("inf")])

    def run(device):
        a = x.to(device).to(dtype)
        b = x.to(dtype).to(device)
        return [t.view(torch.uint8).cpu() for t in (a, b, torch.zeros(2, dtype=dtype,
                                                                      device=device))]

    for actual, expected in zip(run("tpu"), run("cpu"), strict=True):
        assert torch.equal(actual, expected)


@pytest.mark.parametrize("make", [
    lambda d: torch.tensor([16384, -32768], dtype=torch.int16, device=d) / 32768,  # audio
    lambda d: torch.tensor([128, 3], dtype=torch.uint8, device=d) / 256,
    lambda d: torch.tensor([4], dtype=torch.uint8, device=d) / -1,
    lambda d: torch.true_divide(torch.tensor([1, 5], dtype=torch.int32, device=d), 2**40),
], ids=["int16_by_32768", "uint8_by_256", "uint8_by_minus_1", "int32_by_2_40"])
def test_integers_divided_by_a_number_out_of_their_range(make):
    # Divided in the float result type: through the integer's own type the number wrapped.
    assert_same(make("tpu"), make("cpu"))


def test_sign_of_nan_and_negative_zero_is_zero_as_cpu():
    # CPU's (0 < x) - (x < 0); Rprop's first step takes sign(inf * 0).
    x = torch.tensor([float("nan"), -0.0, 0.0, -2.5, 3.0, float("-inf")])
    for op in (torch.sign, torch.sgn):
        out, expected = op(x.to("tpu")).cpu(), op(x)
        assert_same(out, expected)
        assert torch.equal(out.signbit(), expected.signbit())


@pytest.mark.parametrize("source,target", [
    (torch.bfloat16, torch.uint8), (torch.bfloat16, torch.int8), (torch.float16, torch.int16),
    (torch.float32, torch.uint64), (torch.complex64, torch.uint8), (torch.float32, torch.int64),
    (torch.float64, torch.int32), (torch.float32, torch.int16), (torch.float16, torch.int64),
])
def test_out_of_range_floats_wrap_into_integers_as_cpu(source, target):
    # Undefined in C++; what CPU's x86 kernels do: int64 directly, narrower types through
    # int32, NaN, inf and values out of that range becoming its minimum (XLA saturates).
    x = torch.tensor([-1.0, -100.0, 200.0, 2.7, 70000.5, 3e9, -3e9, 1e20, 2.0**63,
                      float("inf"), float("-inf"), float("nan")]).to(source)
    if target is torch.uint64:  # CPU's own sequence there (NaN is 2**63), not matched
        x = x[:4]
    with warnings.catch_warnings():
        # (complex -> real warns once per process, on CPU: whichever test casts first)
        warnings.simplefilter("ignore")
        assert_same(x.to("tpu").to(target), x.to(target))


def _bits_equal(cpu: torch.Tensor, tpu: torch.Tensor) -> None:
    """The same values bit for bit (NaNs where CPU has them, signed zeros)."""
    got = tpu.cpu()
    assert got.dtype == cpu.dtype and got.shape == cpu.shape
    same = (got == cpu) & (torch.signbit(got) == torch.signbit(cpu)) | got.isnan() & cpu.isnan()
    assert bool(same.all()), (cpu[~same][:5], got[~same][:5])


_X = torch.randn(4096, generator=torch.Generator().manual_seed(0)) * 30
_SPECIALS = torch.tensor([0.0, -0.0, 1.0, -1.0, float("inf"), -float("inf"), float("nan"), 1e-30])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("exponent", [0, 1, 2, 3, -1, -2, 0.5, -0.5, 2.5])
def test_power_by_a_number_is_cpus_bit_for_bit(exponent, dtype):
    # CPU computes x ** 2 as x * x, x ** 0.5 as sqrt(x) (sqrt(-inf) is NaN, pow's is inf),
    # x ** -1 as 1 / x: XLA's pow is a few ulps from those.
    x = torch.cat([_X, _SPECIALS]).to(dtype)
    if exponent == 2.5 or exponent in (0.5, -0.5) and dtype == torch.float32:
        # pow on both (sqrt is MKL's on CPU; eager's x ** -0.5 is XLA's rsqrt): only the
        # special values are exact everywhere
        x = _SPECIALS.to(dtype)
    _bits_equal(x ** exponent, x.to("tpu") ** exponent)


def test_power_by_a_number_under_compile_is_cpus():
    f = torch.compile(lambda x: (x ** 2, x ** -0.5, x ** 3), backend="tpu")
    x = torch.cat([_X, _SPECIALS])
    for cpu, tpu in zip((x ** 2, x ** -0.5, x ** 3), f(x.to("tpu")), strict=True):
        _bits_equal(cpu, tpu)


def test_rsqrt_and_the_norms_reciprocal_square_root_are_cpus():
    x = _X.abs().reshape(64, 64)
    _bits_equal(x.rsqrt(), x.to("tpu").rsqrt())
    # Llama's RMSNorm, written out: its rsqrt of each row's mean square
    v = x.pow(2).mean(-1, keepdim=True)
    _bits_equal(x * torch.rsqrt(v + 1e-6), x.to("tpu") * torch.rsqrt(v.to("tpu") + 1e-6))


@pytest.mark.parametrize("weight", [0.25, 0.5, 0.9, 1.0, "tensor"])
def test_lerp_is_cpus_bit_for_bit(weight):
    # CPU interpolates from the nearer end: at weight 1 the result is exactly the end.
    start, end = _X, _X * 0.37 + 5
    if weight == "tensor":
        weight = torch.rand(_X.shape, generator=torch.Generator().manual_seed(1)) * 1.2 - 0.1
    tensor = isinstance(weight, torch.Tensor)
    w = weight.to("tpu") if tensor else weight
    _bits_equal(torch.lerp(start, end, weight), torch.lerp(start.to("tpu"), end.to("tpu"), w))
    # the optimizers' multi-tensor form (a list of weights when they are tensors)
    _bits_equal(torch._foreach_lerp([start], [end], [weight] if tensor else weight)[0],
                torch._foreach_lerp([start.to("tpu")], [end.to("tpu")], [w] if tensor else w)[0])
    big = torch.tensor([1e8, 3.0]), torch.tensor([1.0, 0.1])
    _bits_equal(torch.lerp(*big, 1.0), torch.lerp(*(t.to("tpu") for t in big), 1.0))


@pytest.mark.parametrize("decimals", [-2, -1, 0, 1, 3, 4])
def test_round_to_decimals_is_cpus_bit_for_bit(decimals):
    x = torch.cat([_X / 7, torch.tensor([15.0, 2.675, 1e30, -0.0, float("inf")])])
    _bits_equal(x.round(decimals=decimals), x.to("tpu").round(decimals=decimals))


def test_topk_with_nans_xla_made_as_cpu():
    # XLA's NaNs (sqrt(-1), 0/0) carry the sign bit; PyTorch orders every NaN as the largest.
    x = torch.tensor([1.0, -1.0, 3.0, 0.0, 2.0])
    for largest in (True, False):
        cpu = torch.where(x < 0, x.sqrt(), x).topk(2, largest=largest)
        t = x.to("tpu")
        tpu = torch.where(t < 0, t.sqrt(), t).topk(2, largest=largest)
        _bits_equal(cpu.values, tpu.values)
        assert tpu.indices.tolist() == cpu.indices.tolist()
    half = torch.tensor([1.0, float("nan"), 3.0]).bfloat16()  # CPU's bfloat16 NaN has the sign
    assert half.to("tpu").topk(1).indices.tolist() == half.topk(1).indices.tolist() == [1]


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int64])
def test_smallest_integers_by_topk(dtype):
    info = torch.iinfo(dtype)
    x = torch.tensor([info.max, 0, info.min, 1, info.min + 1], dtype=dtype)
    for largest in (True, False):
        cpu = x.topk(3, largest=largest)
        tpu = x.to("tpu").topk(3, largest=largest)
        assert tpu.values.tolist() == cpu.values.tolist()
        assert tpu.indices.tolist() == cpu.indices.tolist()


def test_float8_beside_another_dtype_is_refused_as_cpu():
    def mix(d):
        f8 = torch.tensor([1.5, 300.0]).to(torch.float8_e4m3fn).to(d)
        return f8 + torch.ones(2, device=d)

    raises_as_cpu(mix)


@pytest.mark.parametrize("other", [torch.uint8, torch.int64, torch.uint32])
def test_uint16_beside_an_integer_dtype_is_refused_as_cpu(other):
    raises_as_cpu(lambda d: torch.ones(2, dtype=torch.uint16, device=d)
                  + torch.ones(2, dtype=other, device=d))
    raises_as_cpu(lambda d: torch.eq(torch.ones(2, dtype=torch.uint16, device=d),
                                     torch.ones(2, dtype=other, device=d)))
    # (a float beside it promotes, as on CPU)
    assert (torch.ones(2, dtype=torch.uint16, device="tpu") + torch.ones(2, device="tpu")).dtype \
        == torch.float32


def test_uint64_numbers_past_int64(eager_mode):
    # jax reads a Python int as int64: OverflowError for these.
    big = 2**64 - 1
    assert torch.full((2,), big, dtype=torch.uint64, device="tpu").tolist() == [big, big]
    filled = torch.zeros(2, dtype=torch.uint64, device="tpu").fill_(2**63)
    assert filled.tolist() == [2**63, 2**63]
    a = torch.tensor([2**63 + 5, 3], dtype=torch.uint64).to("tpu")
    assert (a == 2**63 + 5).tolist() == [True, False]


def test_float8_e5m2_into_e4m3fn_saturates_as_cpu():
    every = torch.arange(256, dtype=torch.uint8).view(torch.float8_e5m2)
    expected = every.to(torch.float8_e4m3fn).float()
    actual = every.to("tpu").to(torch.float8_e4m3fn).float().cpu()
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("exponent", [2, 3, [2, 3]])
def test_multi_tensor_power_by_numbers_is_cpus(exponent):
    # _foreach_pow by a number (or a list of them) takes pow's number formulas too.
    xs = [_X, _X * 0.5]
    expected = torch._foreach_pow(xs, exponent)
    actual = torch._foreach_pow([x.to("tpu") for x in xs], exponent)
    for cpu, tpu in zip(expected, actual, strict=True):
        _bits_equal(cpu, tpu)


@pytest.mark.parametrize("cross", [
    lambda a, b: torch.linalg.cross(a, b), lambda a, b: torch.cross(a, b, dim=1),
])
def test_cross_of_two_dtypes_is_refused(cross):
    # CPU's kernel takes one dtype; the float32 operand was rounded to bfloat16 silently.
    raises_as_cpu(lambda d: cross(torch.ones(2, 3, dtype=torch.bfloat16, device=d),
                                  torch.ones(2, 3, device=d)))


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_a_changed_default_dtype_reaches_programs_already_built(mode):
    # Rules read the default dtype as they are traced (integer division, sqrt of integers):
    # a program built under float32 must not answer under float64.
    import torchtpu

    def f(x):
        return torch.sqrt(x) + x / 3

    ints = torch.tensor([1, 2, 7])
    with torchtpu.set_eager_mode(mode):
        assert f(ints.to("tpu")).dtype == torch.float32
        torch.set_default_dtype(torch.float64)
        try:
            out = f(ints.to("tpu"))
            expected = f(ints)
        finally:
            torch.set_default_dtype(torch.float32)
        assert out.dtype == torch.float64
        torch.testing.assert_close(out.cpu(), expected)
        assert f(ints.to("tpu")).dtype == torch.float32


@pytest.mark.parametrize("fn", [lambda x: x / 3, lambda x: x / x[:, :1],
                                lambda x: x.abs().pow(-0.5)],
                         ids=["x / 3", "x / a column", "pow(-0.5)"])
def test_division_by_a_broadcast_and_inverse_roots_are_cpus_bit_for_bit(fn):
    # XLA multiplies by a broadcast divisor's reciprocal and takes its own rsqrt: 1 ulp off
    # CPU's correctly rounded quotient on about a third of the values.
    x = torch.randn(64, 96, generator=torch.Generator().manual_seed(0)) + 4
    assert torch.equal(fn(x.to("tpu")).cpu(), fn(x))


@pytest.mark.parametrize("mode", ["strict", "fused", "compile"])
def test_a_bool_mask_times_nan_and_inf_keeps_them_as_cpu(mode):
    # XLA rewrote convert(mask) * y as select(mask, y, 0): `loss * mask` hid NaN and inf.
    mask = torch.tensor([True, False, False, False])
    x = torch.tensor([float("nan"), float("inf"), -3.0, float("nan")])

    def f(m, v):
        return m * v, m.float() * v, v.bfloat16() * m, (v * m).sum()

    fn = torch.compile(f, backend="tpu") if mode == "compile" else f
    with torchtpu.set_eager_mode("fused" if mode == "fused" else "strict"):
        out = fn(mask.to(TPU), x.to(TPU))
    for o, e in zip(out, f(mask, x), strict=True):
        o = o.cpu()
        assert torch.equal(o.isnan(), e.isnan())
        assert torch.equal(torch.nan_to_num(o), torch.nan_to_num(e))
        assert torch.equal(o[~o.isnan()].signbit(), e[~e.isnan()].signbit())  # -3 * 0 is -0.0


def test_integer_powers_wrap_over_every_exponent_bit():
    # jnp.power reads an integer exponent's low six bits: 2 ** 64 was 1, not CPU's 0.
    for dtype in (torch.int64, torch.int32, torch.uint8):
        base = torch.tensor([2, -2, 3, 7, 0, 1, -1, 113]).to(dtype)
        exponent = torch.tensor([64, 65, 64, 100, 0, 1000, 1001, 113]).to(dtype)
        assert_same(base.to("tpu") ** exponent.to("tpu"), base ** exponent)
        assert_same(base.to("tpu") ** 64, base ** 64)


def test_angle_of_negative_zero_is_zero():
    x = torch.tensor([-0.0, 0.0, -1.0, float("nan"), -float("inf"), 3.0])
    _bits_equal(x.angle(), x.to("tpu").angle())


@pytest.mark.parametrize("op", [
    lambda a, b: torch.maximum(a, b), lambda a, b: torch.minimum(a, b),
    lambda a, b: torch.fmax(a, b), lambda a, b: torch.fmin(a, b),
    lambda a, b: a.clamp(min=b), lambda a, b: a.clamp(max=b), lambda a, b: a.clamp(min=0.0),
    lambda a, b: a.clamp(max=-0.0), lambda a, b: torch.relu(a),
    lambda a, b: torch.nn.functional.hardtanh(a, 0.0, 1.0),
], ids=["maximum", "minimum", "fmax", "fmin", "clamp_min_t", "clamp_max_t", "clamp_min",
        "clamp_max", "relu", "hardtanh"])
def test_max_and_min_keep_cpus_sign_of_zero_and_nans(op):
    # Equal values give the first operand (XLA's max orders -0.0 below 0.0): seen by 1 / x
    a = torch.tensor([-0.0, 0.0, float("nan"), 1.0, float("nan"), -0.0, 2.0])
    b = torch.tensor([0.0, -0.0, 1.0, float("nan"), float("nan"), -0.0, -3.0])
    _bits_equal(op(a, b), op(a.to(TPU), b.to(TPU)))


def test_legacy_tensor_types_as_cudas():
    # torch.cuda.FloatTensor and its kin, for code written before torch.device
    T = torch.tpu.FloatTensor
    assert T.dtype == torch.float32 and repr(T) == "<class 'torch.tpu.FloatTensor'>"
    assert T(2, 3).shape == (2, 3) and T(2, 3).device.type == "tpu"
    assert_same(torch.tpu.LongTensor([1, 2]), torch.tensor([1, 2], device=TPU))
    x = torch.ones(2, device=TPU)
    assert isinstance(x, T) and not isinstance(x, torch.tpu.DoubleTensor)
    assert not isinstance(torch.ones(2), T) and T(x) is x
    assert_same(x.type(torch.tpu.DoubleTensor), x.double())
    assert_same(torch.ones(2).type(torch.tpu.HalfTensor), x.half())
    assert x.type() == "torch.tpu.FloatTensor" and x.type(torch.FloatTensor).device.type == "cpu"
    with pytest.raises(TypeError, match="expected <class 'torch.tpu.FloatTensor'>"):
        T(torch.ones(2))


def test_complex32_is_refused_by_name_through_operators_too():
    # (a TypeError inside an operator becomes Python's "unsupported operand type(s)")
    h = torch.ones(3, dtype=torch.float16, device=TPU)
    for make in (lambda: h * 1j, lambda: 1j / h, lambda: h + torch.tensor(2j, device=TPU),
                 lambda: torch.zeros(2, dtype=torch.complex32, device=TPU)):
        with pytest.raises(RuntimeError, match="dtype torch.complex32 is not supported on tpu"):
            make()


@pytest.mark.parametrize("fn, low, high", [(torch.sinh, -88, 88), (torch.cosh, -88, 88),
                                           (torch.exp2, -126, 127)])
def test_large_hyperbolics_and_powers_of_two_are_cpus_to_an_ulp(fn, low, high):
    # XLA's sinh and cosh were 12 ulps off past |x| = 10 and its exp2 (exp(x ln 2)) 34 ulps
    # off for large x, where CPU's are correctly rounded.
    x = torch.linspace(low, high, 100_001)
    torch.testing.assert_close(fn(x.to("tpu")).cpu(), fn(x), rtol=2.5e-7, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gelu_in_the_far_negative_tail_is_cpus(dtype):
    # CPU's x * 0.5 * (1 + erf(x / sqrt 2)) cancels to -0.0 there; jax's erfc form gave
    # -8e-38 at -13 (a fifth of a bfloat16 sweep differed in its last bit).
    x = torch.linspace(-20, -9, 1001).to(dtype)
    torch.testing.assert_close(torch.nn.functional.gelu(x.to("tpu")).cpu(),
                               torch.nn.functional.gelu(x), rtol=0, atol=0)


def test_silu_follows_cpus_formula():
    # x / (1 + exp(-x)), as CPU: jax's x * sigmoid(x) differed in the last bit for a fifth of
    # float32 values; what remains is the two libraries' exp (0.4% here).
    x = torch.linspace(-20, 20, 40_001)
    cpu, tpu = torch.nn.functional.silu(x), torch.nn.functional.silu(x.to("tpu")).cpu()
    torch.testing.assert_close(tpu, cpu)
    assert (tpu == cpu).float().mean() > 0.95


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64])
def test_gcd_and_lcm_of_the_integer_minimum_are_cpus(dtype):
    # |min| is min itself: jnp.gcd's ordered pair then swapped forever whenever another
    # element kept its loop going (a hang). lcm's a / g * b is computed in int for int8/int16
    # by C++, then wrapped.
    low = torch.iinfo(dtype).min
    a = torch.tensor([0, low, -12, low, 7, 100, -100], dtype=dtype)
    b = torch.tensor([-5, 0, 18, 1, low, 99, 120], dtype=dtype)
    results = []
    worker = threading.Thread(target=lambda: results.append(
        (torch.gcd(a.to(TPU), b.to(TPU)).cpu(), torch.lcm(a.to(TPU), b.to(TPU)).cpu())),
        daemon=True)
    worker.start()
    worker.join(timeout=120)
    assert results, "gcd/lcm did not finish"
    assert_same(results[0][0], torch.gcd(a, b))
    assert_same(results[0][1], torch.lcm(a, b))


_ALPHAS = [
    lambda d: torch.add(torch.tensor([1, 2], device=d), torch.tensor([3, 4], device=d), alpha=1.5),
    lambda d: torch.add(torch.tensor([1, 2], device=d), 2, alpha=True),
    lambda d: torch.tensor([True], device=d).add(torch.tensor([True], device=d), alpha=0.5),
    lambda d: torch.sub(torch.ones(2, device=d), torch.ones(2, device=d), alpha=1j),
    lambda d: torch.rsub(torch.tensor([1, 2], device=d), torch.tensor([3, 4], device=d), alpha=2.5),
    lambda d: torch.tensor([1, 2], device=d).add_(torch.tensor([3, 4], device=d), alpha=0.5),
    lambda d: torch._foreach_add([torch.tensor([1], device=d)], [torch.tensor([2], device=d)],
                                 alpha=0.5),
    lambda d: torch.add(torch.ones(2, device=d), torch.ones(2, device=d), alpha=1e300),
    lambda d: torch.add(torch.ones(2, dtype=torch.half, device=d),
                        torch.ones(2, dtype=torch.half, device=d), alpha=1e5),
]


@pytest.mark.parametrize("bad", _ALPHAS)
def test_an_alpha_of_another_kind_than_the_result_is_refused_as_cpu(bad, eager_mode):
    raises_as_cpu(bad)


def test_an_alpha_of_the_results_kind_scales_as_cpu():
    def run(device):
        i, b = torch.tensor([1, 2], device=device), torch.tensor([True, False], device=device)
        return (torch.add(i, i, alpha=3), torch.add(b, b, alpha=2), torch.add(b, b, alpha=True),
                torch.sub(i, 1.5, alpha=2), torch.add(i.float(), i, alpha=0.5))

    assert_same(run("tpu"), run("cpu"))


def test_the_scalar_overloads_take_alpha_positionally_as_cpu():
    aten = torch.ops.aten

    def run(device):
        x = torch.arange(4.0, device=device)
        return (aten.add.Scalar(x, 2, 3), aten.sub.Scalar(x, 2, 3), aten.rsub.Scalar(x, 2, 3),
                aten.add.Scalar(x.long(), 2, 3), aten.add_.Scalar(x.clone(), 2, 3))

    assert_same(run("tpu"), run("cpu"))
    raises_as_cpu(lambda d: aten.add.Scalar(torch.arange(4, device=d), 2, 1.5))


def test_addcmul_of_integers_takes_its_value_in_their_dtype():
    def run(device):
        i = torch.tensor([1, 2, 3], device=device)
        return torch.addcmul(i, i, i, value=0.5), i.clone().addcmul_(i, i, value=1.7)

    assert_same(run("tpu"), run("cpu"))
