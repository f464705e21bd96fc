"""RNG: torch.manual_seed makes tpu random ops reproducible; dropout works."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import TPU, assert_same, raises_as_cpu

import torchtpu


def _draw():
    return [torch.rand(5, device="tpu"), torch.randn(5, device="tpu"),
            torch.randint(0, 100, (5,), device="tpu"), torch.randperm(7, device="tpu"),
            F.dropout(torch.ones(50, device="tpu"), 0.5)]


def test_manual_seed_reproduces_every_random_op():
    torch.manual_seed(123)
    a = _draw()
    torch.manual_seed(123)
    b = _draw()
    torch.manual_seed(124)
    c = _draw()
    for x, y in zip(a, b, strict=False):
        assert torch.equal(x.cpu(), y.cpu())
    assert not torch.equal(a[0].cpu(), c[0].cpu())
    # successive draws differ
    assert not torch.equal(a[0].cpu(), torch.rand(5, device="tpu").cpu())


def _draw_with(g):
    x = torch.ones(6, device="tpu")
    return [torch.rand(5, generator=g, device="tpu"), torch.randn(5, generator=g, device="tpu"),
            torch.randint(0, 100, (5,), generator=g, device="tpu"),
            torch.randperm(7, generator=g, device="tpu"), torch.bernoulli(x / 2, generator=g),
            torch.empty(5, device="tpu").exponential_(generator=g),
            torch.multinomial(x, 3, generator=g)]


@pytest.mark.parametrize("device", ["tpu", "cpu"])
def test_a_generator_reproduces_its_draws_and_leaves_the_default_stream_alone(device):
    # A tpu generator, or a CPU one (which a tpu op takes too).
    g = torch.Generator(device=device).manual_seed(7)
    torch.manual_seed(0)
    a = _draw_with(g)
    after_a = torch.rand(3, device="tpu")
    g.manual_seed(7)
    torch.manual_seed(0)
    b = _draw_with(g)
    for x, y in zip(a, b, strict=True):
        assert torch.equal(x.cpu(), y.cpu())
    # The default stream's first draw after seed 0, both times: g's draws took none of it.
    torch.manual_seed(0)
    assert torch.equal(after_a.cpu(), torch.rand(3, device="tpu").cpu())
    g.manual_seed(8)
    assert not torch.equal(a[0].cpu(), torch.rand(5, generator=g, device="tpu").cpu())


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_draws_from_a_generator_are_cpus(mode):
    # The op draws on the host from it (transformers' watermarking seeds a generator on the
    # model's device and compares the permutation across machines).
    def draws(device):
        g = torch.Generator(device=device).manual_seed(7)
        x = torch.ones(6, device=device)
        return [torch.rand(5, generator=g, device=device),
                torch.randn(3, dtype=torch.bfloat16, generator=g, device=device),
                torch.randint(0, 100, (5,), generator=g, device=device),
                torch.randperm(7, generator=g, device=device),
                torch.bernoulli(x / 2, generator=g), torch.multinomial(x, 3, generator=g),
                torch.normal(x, 2.0, generator=g), torch.poisson(x * 3, generator=g),
                torch.nn.init.normal_(torch.empty(4, device=device), generator=g),
                torch.rand(2, generator=g)]  # the generator's state moved on as CPU's

    expected = draws("cpu")
    previous = torchtpu.get_eager_mode()
    torchtpu.set_eager_mode(mode)
    try:
        actual = draws("tpu")
        for a, e in zip(actual, expected, strict=True):
            assert torch.equal(a.cpu(), e)
    finally:
        torchtpu.set_eager_mode(previous)


def test_a_tpu_generator_is_a_torch_generator_on_tpu():
    import copy
    import pickle

    g = torch.Generator(device="tpu").manual_seed(3)
    assert isinstance(g, torch.Generator) and g.device == torch.device("tpu", 0)
    assert isinstance(torch.default_generator, torch.Generator)
    assert type(torch.Generator()) is torch._C.Generator and torch.Generator().device.type == "cpu"
    assert g.initial_seed() == 3 and "tpu:0" in repr(g)

    class Seeded(torch.Generator):  # a user's subclass is still made as it says
        pass

    assert type(Seeded()) is Seeded and Seeded().device.type == "cpu"
    first = torch.rand(4, generator=g, device="tpu")
    g.set_state(torch.Generator(device="tpu").manual_seed(3).get_state())
    assert torch.equal(torch.rand(4, generator=g, device="tpu").cpu(), first.cpu())
    for twin in (copy.deepcopy(g), pickle.loads(pickle.dumps(g))):
        assert twin.device == g.device
        assert torch.equal(torch.rand(4, generator=twin, device="tpu").cpu(),
                           torch.rand(4, generator=copy.deepcopy(g), device="tpu").cpu())


def test_rng_state_round_trip():
    torch.manual_seed(5)
    state = torch.tpu.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"  # a ByteTensor, as cuda's
    x = torch.rand(4, device="tpu")
    torch.tpu.set_rng_state(state)
    assert torch.equal(x.cpu(), torch.rand(4, device="tpu").cpu())
    with pytest.raises(RuntimeError, match="expected the 16-byte ByteTensor"):
        torch.tpu.set_rng_state(torch.get_rng_state())  # CPU's state


def test_dropout_scales_and_zeroes():
    torch.manual_seed(0)
    x = torch.ones(20000, device="tpu")
    y = F.dropout(x, p=0.25, training=True).cpu()
    kept = y != 0
    assert torch.allclose(y[kept], torch.full_like(y[kept], 1 / 0.75))
    assert abs(kept.float().mean().item() - 0.75) < 0.02
    assert torch.equal(F.dropout(x, p=0.25, training=False).cpu(), x.cpu())


def test_dropout_gradient_uses_same_mask():
    torch.manual_seed(0)
    x = torch.ones(1000, device="tpu", requires_grad=True)
    y = F.dropout(x, p=0.5)
    y.sum().backward()
    assert torch.equal(x.grad.cpu(), (y.detach().cpu() != 0).float() * 2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dropout_in_place_draws_the_same_mask(dtype):
    # CPU's dropout and dropout_ both draw bernoulli_(1 - p): one seed, one mask.
    x = torch.randn(7, 9, dtype=dtype).to("tpu")
    torch.manual_seed(42)
    y = F.dropout(x, 0.3, training=True)
    torch.manual_seed(42)
    z = F.dropout(x.clone(), 0.3, training=True, inplace=True)
    torch.testing.assert_close(z.cpu(), y.cpu())


def test_distributions():
    torch.manual_seed(1)
    u = torch.empty(20000, device="tpu").uniform_(-2, 4).cpu()
    assert -2 <= u.min() and u.max() < 4 and abs(u.mean() - 1) < 0.05
    n = torch.empty(20000, device="tpu").normal_(3, 2).cpu()
    assert abs(n.mean() - 3) < 0.05 and abs(n.std() - 2) < 0.05
    b = torch.bernoulli(torch.full((20000,), 0.3, device="tpu")).cpu()
    assert abs(b.mean() - 0.3) < 0.02
    m = torch.multinomial(torch.tensor([0.1, 0.0, 0.9], device="tpu"), 1000, True).cpu()
    assert (m != 1).all() and abs((m == 2).float().mean() - 0.9) < 0.04


def test_bernoulli_in_place_with_the_default_p():
    # PyTorch leaves p=0.5 (its schema default) out of the call; the draw must still use it,
    # not the tensor's own values (which dropout2d's empty mask would make all zeros).
    draws = torch.zeros(20000, device="tpu").bernoulli_(0.5)
    assert abs(draws.mean().item() - 0.5) < 0.02
    assert abs(torch.ones(20000, device="tpu").bernoulli_().mean().item() - 0.5) < 0.02
    mask = torch.nn.functional.dropout2d(torch.ones(8, 64, 3, 3, device="tpu"), 0.5)
    kept = (mask[:, :, 0, 0] != 0).float().mean().item()
    assert 0.35 < kept < 0.65 and bool((mask.amax((2, 3)) == mask.amin((2, 3))).all())


@pytest.mark.parametrize("fn,shape", [(torch.nn.functional.dropout3d, (8, 64, 2, 2, 2)),
                                      (torch.nn.functional.feature_alpha_dropout, (8, 64, 3, 3))])
def test_channel_dropout_drops_whole_channels_at_rate_p(fn, shape):
    x = torch.randn(shape, device="tpu")
    y = fn(x, 0.5, training=True)
    dims = tuple(range(2, len(shape)))
    # A dropped channel is one constant (0, or alpha dropout's fill); a kept one is x rescaled.
    dropped = (y.amax(dims) - y.amin(dims)).abs() < 1e-6
    assert 0.35 < dropped.float().mean().item() < 0.65


@pytest.mark.parametrize("make", [
    lambda a: torch.distributions.Gamma(a, 2 * a),
    lambda a: torch.distributions.Beta(a, 3 - a),
    lambda a: torch.distributions.Dirichlet(torch.stack([a, 3 - a], -1)),
    lambda a: torch.distributions.Poisson(4 * a),
    lambda a: torch.distributions.Binomial(12, probs=a / 3),
], ids=["gamma", "beta", "dirichlet", "poisson", "binomial"])
def test_torch_distributions_sample_as_cpu_does(make):
    from scipy.stats import ks_2samp

    alpha = torch.tensor([0.4, 1.0, 2.5])
    torch.manual_seed(3)
    on_tpu = make(alpha.to("tpu")).sample((4000,)).cpu()
    on_cpu = make(alpha).sample((4000,))
    assert on_tpu.shape == on_cpu.shape and on_tpu.dtype == on_cpu.dtype
    for i in range(3):  # each parameter's draws: the same distribution as CPU's
        a, b = on_tpu[:, i].reshape(-1).numpy(), on_cpu[:, i].reshape(-1).numpy()
        assert ks_2samp(a, b).pvalue > 1e-3, i
    # log_prob validates its value (torch._is_all_true) and matches CPU's
    x = on_cpu[:5]
    assert_same(make(alpha.to("tpu")).log_prob(x.to("tpu")), make(alpha).log_prob(x))


def test_gamma_rsample_gradient_is_cpus():
    # ATen's approximation of d sample / d alpha in each of its regimes (small samples, large
    # alpha near and away from the mean, the rational fit); JAX's own was off by up to 3%.
    torch.manual_seed(0)
    alpha = torch.cat([torch.rand(400) * hi for hi in (0.5, 3.0, 10.0, 50.0, 500.0)]) + 0.05
    x = torch._standard_gamma(alpha.double()).float().clamp_min(1e-30)  # no subnormals
    alpha, x = torch.cat([alpha, torch.tensor([37.7962532, 9.0])]), torch.cat(
        [x, torch.tensor([1.1065850, 9.0])])
    torch.testing.assert_close(torch._standard_gamma_grad(alpha.to("tpu"), x.to("tpu")).cpu(),
                               torch._standard_gamma_grad(alpha, x), rtol=1e-6, atol=0)
    a = torch.full((5,), 2.0, device="tpu", requires_grad=True)
    torch.distributions.Gamma(a, 1.0).rsample().sum().backward()
    assert a.grad.device.type == "tpu" and torch.isfinite(a.grad.cpu()).all()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_uniform_stays_below_its_upper_bound(dtype):
    # float32 draws rounded to the narrow dtype reached 1.0 (~2k in 1e6 for bfloat16).
    torch.manual_seed(0)
    r = torch.rand(1_000_000, dtype=dtype, device=TPU)
    u = torch.empty(1_000_000, dtype=dtype, device=TPU).uniform_(-2, 3)
    assert r.max().item() < 1 and r.min().item() >= 0
    assert u.max().item() < 3 and u.min().item() >= -2


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64,
                                   torch.int64, torch.int32, torch.uint8])
def test_random_without_bounds_spans_cpus_range(dtype):
    # CPU: 0 to 2**digits for floats (every integer held exactly), 0 to max for integers.
    digits = {torch.float32: 24, torch.bfloat16: 8, torch.float16: 11, torch.float64: 53}
    top = 2 ** digits[dtype] if dtype.is_floating_point else torch.iinfo(dtype).max
    torch.manual_seed(0)
    x = torch.empty(200_000, dtype=dtype, device=TPU).random_()
    assert 0 <= x.min().item() and x.max().item() <= top
    assert x.max().item() > top * 0.99


def test_random_bounds_are_checked_as_on_cpu():
    for device in ("cpu", TPU):
        with pytest.raises(RuntimeError, match="expects 'from' to be less than 'to'"):
            torch.randint(5, 3, (2,), device=device)
        with pytest.raises(RuntimeError, match="expects 'from' to be less than 'to'"):
            torch.empty(2, device=device).random_(5, 3)


@pytest.mark.parametrize("draw", [
    lambda d: torch.randint(0, 300, (2,), dtype=torch.int8, device=d),
    lambda d: torch.randint(-1, 1, (2,), dtype=torch.uint8, device=d),
    lambda d: torch.empty(2, dtype=torch.float16, device=d).random_(0, 2 ** 17),
    lambda d: torch.empty(2, dtype=torch.bool, device=d).random_(2, None),
    lambda d: torch.empty(2, dtype=torch.float32, device=d).random_(2 ** 30, None),
    lambda d: torch.empty(2, dtype=torch.int32, device=d).random_(-2 ** 63, None),
], ids=["int8_to", "uint8_from", "half_to", "bool_from_only", "float_past_to_inc",
        "full_64_bits_int32"])
def test_random_bounds_past_the_dtype_raise_as_cpu(draw):
    raises_as_cpu(draw)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int16, torch.float32])
def test_random_from_without_to_draws_up_to_the_dtypes_largest(dtype):
    # random_(from, None) is [from, max], not random_(to=from): one int64 span past randint's.
    top = 2 ** 24 if dtype.is_floating_point else torch.iinfo(dtype).max
    torch.manual_seed(0)
    for start in (-5, 1000):
        x = torch.empty(100_000, dtype=dtype, device=TPU).random_(start, None)
        assert x.min().item() >= start and x.max().item() <= top
        assert x.max().item() > top * 0.99
    whole = torch.empty(100_000, dtype=torch.int64, device=TPU).random_(-2 ** 63, None)
    assert whole.min().item() < -2 ** 62 and whole.max().item() > 2 ** 62


@pytest.mark.parametrize("training", [False, True])
def test_rrelu_in_place(training):
    # rrelu_ writes its input and its noise (the slopes): both from one functional op.
    x = torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(0))
    y = F.rrelu_(x.to(TPU), 0.1, 0.3, training=training).cpu()
    if not training:  # the mean slope
        assert_same(y, F.rrelu_(x.clone(), 0.1, 0.3, training=False))
    slopes = y[x < 0] / x[x < 0]
    assert torch.equal(y[x >= 0], x[x >= 0])
    assert ((slopes >= 0.1 - 1e-6) & (slopes <= 0.3 + 1e-6)).all()


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_draws_have_cpus_distribution_in_both_parts(dtype):
    # randn/normal_ gave a real draw (imaginary part 0); rand/uniform_ raised.
    n = 100_000
    torch.manual_seed(0)
    z = torch.randn(n, dtype=dtype, device=TPU).cpu()
    w = torch.empty(n, dtype=dtype, device=TPU).normal_(2.0, 3.0).cpu()
    u = torch.empty(n, dtype=dtype, device=TPU).uniform_(2, 3).cpu()
    assert z.dtype == w.dtype == u.dtype == dtype
    for part in (z.real, z.imag):  # variance 1 in all, half in each part
        assert abs(part.std().item() - 0.5 ** 0.5) < 0.01 and abs(part.mean().item()) < 0.01
    for part in (w.real, w.imag):
        assert abs(part.mean().item() - 2) < 0.03 and abs(part.std().item() - 3 * 0.5 ** 0.5) < 0.03
    for part in (u.real, u.imag):
        assert 2 <= part.min().item() and part.max().item() < 3
        assert abs(part.mean().item() - 2.5) < 0.01
    with pytest.raises(RuntimeError, match="standard deviation to be non-complex"):
        torch.normal(2.0, torch.ones(3, dtype=dtype, device=TPU))


def test_small_shape_draws_stay_inside_their_support():
    # CPU clamps gamma draws to the smallest normal number and Dirichlet's (Beta's) normalised
    # draws into (0, 1): a draw of exactly 0 or 1 has an infinite log_prob.
    torch.manual_seed(0)
    dirichlet = torch.distributions.Dirichlet(torch.full((10,), 0.05, device="tpu"))
    y = dirichlet.sample((4000,))
    assert torch.isfinite(dirichlet.log_prob(y)).all()
    beta = torch.distributions.Beta(torch.tensor([0.02], device="tpu"),
                                    torch.tensor([0.02], device="tpu")).sample((2000,)).cpu()
    tiny = torch.finfo(torch.float32).tiny
    assert beta.min() >= tiny and beta.max() <= 1 - 2 ** -24
    assert torch._standard_gamma(torch.full((4000,), 0.01, device="tpu")).cpu().min() >= tiny


def test_dirichlet_sample_gradient_is_cpus():
    # ATen's approximation: series near 0 and 1 (in the sample's dtype, as CPU's), a
    # saddle-point expansion and a rational correction (in float64).
    g = torch.Generator().manual_seed(0)
    x = torch.rand(2000, generator=g).clamp(1e-4, 1 - 1e-4)
    alpha = torch.rand(2000, generator=g) * 20 + 0.05
    total = alpha + torch.rand(2000, generator=g) * 20 + 0.05
    for dtype, rtol in ((torch.float32, 1e-4), (torch.float64, 1e-10)):
        args = [t.to(dtype) for t in (x, alpha, total)]
        torch.testing.assert_close(
            torch._dirichlet_grad(*[t.to("tpu") for t in args]).cpu(),
            torch._dirichlet_grad(*args), rtol=rtol, atol=1e-7)
    a = torch.tensor([1.0, 2.0], device="tpu", requires_grad=True)
    torch.distributions.Beta(a[0], a[1]).rsample((100,)).sum().backward()
    assert torch.isfinite(a.grad.cpu()).all()


def test_compiled_gamma_and_dirichlet_samples_differentiate():
    import torchtpu.compile  # noqa: F401 (registers the backend)

    @torch.compile(backend="tpu")
    def loss(c):
        return (torch.distributions.Gamma(c, 1.0).rsample((50,)).pow(2).mean()
                + torch.distributions.Dirichlet(c).rsample((50,))[:, 0].mean())

    c = torch.tensor([0.5, 2.0], device="tpu", requires_grad=True)
    loss(c).backward()
    assert torch.isfinite(c.grad.cpu()).all()


def test_compiled_draws_from_a_tpu_generator_are_eagers():
    def noisy(x, g):
        return x + torch.rand(x.shape, generator=g, device=x.device)

    x = torch.zeros(3, device="tpu")
    eager = noisy(x, torch.Generator(device="tpu").manual_seed(0))
    compiled = torch.compile(noisy, backend="tpu")(x, torch.Generator(device="tpu").manual_seed(0))
    assert torch.equal(compiled.cpu(), eager.cpu())


def test_distribution_argument_errors_name_the_tensor_as_on_cpu():
    messages = []
    for device in ("cpu", "tpu"):
        with pytest.raises(ValueError) as error:
            # (validate_args given: Dynamo's first compile turns the default off)
            torch.distributions.Normal(torch.zeros(2, device=device),
                                       torch.tensor([1.0, -1.0], device=device),
                                       validate_args=True)
        messages.append(str(error.value).splitlines()[0])
    assert messages[1] == messages[0]


@pytest.mark.parametrize("draw", [
    lambda d: torch.zeros(3, device=d).cauchy_(0, 0),
    lambda d: torch.zeros(3, dtype=torch.int64, device=d).cauchy_(),
    lambda d: torch.zeros(3, dtype=torch.complex64, device=d).cauchy_(),
    lambda d: torch.zeros(3, device=d).log_normal_(0, 0),
    lambda d: torch.zeros(3, dtype=torch.bool, device=d).log_normal_(),
], ids=["cauchy_sigma", "cauchy_long", "cauchy_complex", "log_normal_std", "log_normal_bool"])
def test_cauchy_and_log_normal_arguments_raise_as_cpu(draw):
    # PyTorch's decompositions printed sigma=0.0 and torch.int64 where CPU prints 0 and long int.
    raises_as_cpu(draw, Exception)


def test_samplers_answer_degenerate_parameters_as_cpu():
    # CPU clamps a gamma draw to the smallest normal number (NaN included: std::max), and
    # its binomial answers n <= 0 or p <= 0 with 0 and p >= 1 with n, without drawing.
    nan = float("nan")
    for draw in (lambda d: torch._standard_gamma(torch.tensor([-1.0, nan, 0.0], device=d)),
                 lambda d: torch._sample_dirichlet(torch.tensor([[-1.0, 1.0], [nan, 1.0]],
                                                                device=d)),
                 lambda d: torch.binomial(torch.tensor([-1.0, 0.0, 3.0, 5.0, 7.0, 5.0], device=d),
                                          torch.tensor([0.5, 0.3, 0.0, 1.5, -0.5, nan],
                                                       device=d))):
        assert_same(draw(TPU), draw("cpu"))


@pytest.mark.parametrize("bad, exc", [
    (lambda d: torch.randperm(257, out=torch.empty(0, dtype=torch.uint8, device=d)),
     RuntimeError),
    (lambda d: torch.randperm(129, dtype=torch.int8, device=d), RuntimeError),
    (lambda d: torch.randperm(2 ** 11 + 2, dtype=torch.half, device=d), RuntimeError),
    (lambda d: torch.randperm(3, dtype=torch.bool, device=d), NotImplementedError),
    (lambda d: torch.randperm(3, dtype=torch.complex64, device=d), NotImplementedError),
    (lambda d: torch.randint(6, (2,), dtype=torch.complex64, device=d), RuntimeError),
    (lambda d: torch.empty(3, device=d).uniform_(-3e38, 3e38), RuntimeError),
])
def test_factories_refuse_what_cpu_refuses(bad, exc):
    # randperm made values its dtype cannot hold (or hold exactly), and bool and complex
    # permutations; randint into complex failed inside numpy; uniform_ over a range wider
    # than the dtype's largest value drew infinities.
    raises_as_cpu(bad, exc)


@pytest.mark.parametrize("draw", [lambda t: t.normal_(), lambda t: t.log_normal_(),
                                  lambda t: t.exponential_(), lambda t: t.uniform_(),
                                  lambda t: torch.randn(t.shape, dtype=t.dtype, device=t.device)])
@pytest.mark.parametrize("n", [0, 3])
def test_continuous_draws_refuse_integers_only_when_there_is_something_to_draw(draw, n):
    # CPU reaches the kernels that refuse integers only for a non-empty tensor
    # (torch.randn(0, dtype=torch.long) works there); uniform_ checks before, empty or not
    cpu = torch.zeros(n, dtype=torch.long)
    try:
        draw(cpu)
    except (RuntimeError, NotImplementedError):
        raises_as_cpu(lambda d: draw(torch.zeros(n, dtype=torch.long, device=d)), Exception)
    else:
        assert_same(draw(cpu.to(TPU)), cpu)
