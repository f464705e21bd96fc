"""Random ops. One host-side stream, seeded by torch.manual_seed, keys derived per op.

Each random op folds a counter into the seed's key inside its executable, so seeds and
counters are traced values: a new step or a new seed never recompiles.
"""

from __future__ import annotations

import contextlib
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import torch

from ..runtime.execute import executable
from .dtypes import ALL_TYPES_AND_HALVES, cpp_name, default_float, scalar_type_name, to_jax_dtype
from .registry import lowering

aten = torch.ops.aten


class _Stream:
    seed = 0
    counter = 0
    # While a compiled graph is traced: [seed, base counter, draws so far] as traced values,
    # so the graph draws base+1, base+2, ... exactly as the same ops would eagerly.
    traced: list | None = None


def manual_seed(seed: int) -> None:
    _Stream.seed = int(seed) & 0xFFFFFFFFFFFFFFFF
    _Stream.counter = 0


def initial_seed() -> int:
    return _Stream.seed


def get_state() -> torch.Tensor:
    # On the host whatever the default device is: the state is Python integers, the 64-bit
    # seed stored as int64's bits (torch.seed() gives seeds of 2**63 and more).
    seed = _Stream.seed - (1 << 64) if _Stream.seed >= 1 << 63 else _Stream.seed
    return torch.tensor([seed, _Stream.counter], dtype=torch.int64, device="cpu")


def set_state(state: torch.Tensor) -> None:
    seed, _Stream.counter = (int(v) for v in state.tolist())
    _Stream.seed = seed & 0xFFFFFFFFFFFFFFFF


def _next(generator: torch.Generator | None = None):
    t = _Stream.traced
    if generator is not None and t is None:
        return _from_generator(generator)
    if t is not None:
        t[2] += 1
        return t[0], t[1] + jnp.uint32(t[2])
    # Scalars: traced, so a new draw never recompiles and costs no transfer. The seed is all
    # 64 bits of it (seeds 2**32 apart are different streams, as on CPU).
    _Stream.counter += 1
    return np.uint64(_Stream.seed), _Stream.counter & 0xFFFFFFFF


def _from_generator(generator: torch.Generator) -> tuple[int, int]:
    """A draw keyed by the caller's generator, where a rule runs with one (eager ops handed
    one draw on the host instead: eager/dispatch.py): two words from its stream, so reseeding
    it repeats the draw, and the default stream is left alone."""
    if generator.device.type not in ("tpu", "cpu"):
        raise RuntimeError("Expected a 'tpu' device type for generator but found "
                           f"'{generator.device.type}'")
    seed, counter = torch.randint(0, 2 ** 32, (2,), generator=generator, dtype=torch.int64,
                                  device="cpu").tolist()
    return np.uint64(seed), counter


def stream_inputs() -> tuple:
    """The seed and counter a compiled graph takes as inputs (traced, so never recompiling)."""
    return jnp.uint64(_Stream.seed), jnp.uint32(_Stream.counter)


@contextlib.contextmanager
def traced_stream(seed, counter):
    """Draws inside this block come from ``(seed, counter + k)``; yields the draw count."""
    previous = _Stream.traced
    draws = _Stream.traced = [seed, counter, 0]
    try:
        yield draws
    finally:
        _Stream.traced = previous


def saved_state():
    """Where the stream is, as run_and_save_rng_state hands it on (a checkpointed region's
    random ops saved for their recomputation): [seed, counter] as int64 bytes."""
    t = _Stream.traced
    if t is None:
        return get_state().view(torch.uint8)
    pair = jnp.stack([jnp.asarray(t[0]).astype(jnp.uint64),
                      (t[1] + jnp.uint32(t[2])).astype(jnp.uint64)])
    return jax.lax.bitcast_convert_type(pair, jnp.uint8).reshape(16)


@contextlib.contextmanager
def replaying(state):
    """Draws inside this block repeat those made after ``saved_state`` gave ``state``; the
    stream itself does not move (as torch.utils.checkpoint's recomputation)."""
    if isinstance(state, torch.Tensor):
        before = get_state()
        set_state(state.cpu().view(torch.int64))
        try:
            yield
        finally:
            set_state(before)
        return
    pair = jax.lax.bitcast_convert_type(state.reshape(2, 8), jnp.uint64)
    with traced_stream(pair[0], pair[1].astype(jnp.uint32)):
        yield


def advance(n: int) -> None:
    """Account for ``n`` draws a compiled graph made."""
    _Stream.counter += n


def _key(seed, counter):
    return jax.random.fold_in(jax.random.key(seed.astype(jnp.uint64)), counter.astype(jnp.uint32))


def _sample_dtype(dtype):
    """Draw low-precision floats in float32 (as PyTorch's CPU generator does), then round."""
    dtype = np.dtype(dtype)
    if dtype.kind != "f" or dtype.itemsize < 4:
        return np.dtype(jnp.float32)
    return dtype


def _real_uniform(key, shape, dtype, low, high):
    u = jax.random.uniform(key, shape, _sample_dtype(dtype), low, high).astype(dtype)
    # Rounding a float32 draw to bfloat16/float16 can reach `high`; CPU's draws stay below.
    high = jnp.asarray(high, dtype)
    return jnp.where(u < high, u, jnp.nextafter(high, jnp.asarray(low, dtype)))


def _real_part_dtype(dtype):
    return np.dtype(np.float64 if np.dtype(dtype) == np.complex128 else np.float32)


@executable(static_argnums=(2, 3))
def _uniform_jit(seed, counter, shape, dtype, low, high):
    if not jnp.issubdtype(dtype, jnp.complexfloating):
        return _real_uniform(_key(seed, counter), shape, dtype, low, high)
    # CPU draws the real and imaginary parts each from [low, high).
    parts = _real_uniform(_key(seed, counter), (*shape, 2), _real_part_dtype(dtype), low, high)
    return jax.lax.complex(parts[..., 0], parts[..., 1])


def _standard_normal(key, shape, dtype):
    """N(0, 1) draws; a complex one has variance 1, half in each part (as CPU's)."""
    if not jnp.issubdtype(dtype, jnp.complexfloating):
        return jax.random.normal(key, shape, _sample_dtype(dtype))
    parts = jax.random.normal(key, (*shape, 2), _real_part_dtype(dtype)) * np.sqrt(0.5)
    return jax.lax.complex(parts[..., 0], parts[..., 1])


@executable(static_argnums=(2, 3))
def _normal_jit(seed, counter, shape, dtype, mean, std):
    z = _standard_normal(_key(seed, counter), shape, dtype)
    if jnp.issubdtype(dtype, jnp.complexfloating):
        mean = jax.lax.complex(mean, mean)  # CPU draws both parts around a real mean
    return (mean + std * z).astype(dtype)


@executable(static_argnums=(2, 3))
def _randint_jit(seed, counter, shape, dtype, low, high):
    return jax.random.randint(_key(seed, counter), shape, low, high, jnp.int64).astype(dtype)


@executable(static_argnums=(2, 3, 4, 5))
def _offset_bits_jit(seed, counter, shape, dtype, start, span):
    """start + 64 random bits mod span, wrapping as CPU's uint64 arithmetic does (span 0:
    all 2**64): int64 ranges past what randint's int64 bounds can say."""
    bits = jax.random.bits(_key(seed, counter), shape, jnp.uint64)
    if span:
        bits = bits % jnp.uint64(span)
    out = jax.lax.bitcast_convert_type(bits + jnp.uint64(start % 2 ** 64), jnp.int64)
    return out.astype(dtype)


def _bernoulli_draw(seed, counter, shape, p):
    return jax.random.uniform(_key(seed, counter), shape) < p


@executable(static_argnums=(2, 3))
def _bernoulli_jit(seed, counter, shape, dtype, p):
    return _bernoulli_draw(seed, counter, shape, p).astype(dtype)


@executable()
def _dropout_jit(seed, counter, x, p):
    # bernoulli_(1 - p)'s draw: CPU's dropout_ takes that path and its dropout the same one,
    # so a seed gives one mask in place or not.
    keep = _bernoulli_draw(seed, counter, x.shape, 1 - p)
    scale = jnp.where(p < 1, 1 / (1 - p), 0).astype(x.dtype)
    return jnp.where(keep, x * scale, 0).astype(x.dtype), keep


@executable(static_argnums=(2, 3))
def _permutation_jit(seed, counter, n, dtype):
    return jax.random.permutation(_key(seed, counter), n).astype(dtype)


@executable(static_argnums=(2,))
def _exponential_jit(seed, counter, dtype, like, lambd):
    u = jax.random.uniform(_key(seed, counter), like.shape, _sample_dtype(dtype))
    return (-jnp.log1p(-u) / lambd).astype(dtype)


@executable(static_argnums=(2,))
def _cauchy_jit(seed, counter, dtype, like, median, sigma):
    u = jax.random.uniform(_key(seed, counter), like.shape, _sample_dtype(dtype))
    return (median + sigma * jnp.tan(np.pi * (u - 0.5))).astype(dtype)


@executable(static_argnums=(2,))
def _log_normal_jit(seed, counter, dtype, like, mean, std):
    z = jax.random.normal(_key(seed, counter), like.shape, _sample_dtype(dtype))
    return jnp.exp(mean + std * z).astype(dtype)


@executable(static_argnums=(2,))
def _geometric_jit(seed, counter, dtype, like, p):
    # CPU's transformation: ceil(log(u) / log1p(-p)), u uniform in (0, 1), in float32 or wider
    # whatever the tensor's dtype (an integer tensor holds the counts).
    sample = jnp.float64 if np.dtype(dtype) == np.dtype(jnp.float64) else jnp.float32
    u = jax.random.uniform(_key(seed, counter), like.shape, sample,
                           minval=jnp.finfo(sample).tiny, maxval=1.0)
    return jnp.ceil(jnp.log(u) / jnp.log1p(-p)).astype(dtype)


@executable()
def _normal_like_jit(seed, counter, mean, std):
    shape = jnp.broadcast_shapes(jnp.shape(mean), jnp.shape(std))
    dtype = mean.dtype if hasattr(mean, "dtype") and mean.ndim else std.dtype
    z = _standard_normal(_key(seed, counter), shape, dtype)
    return (z * std + mean).astype(dtype)


@executable()
def _gamma_jit(seed, counter, alpha):
    a = alpha.astype(_sample_dtype(alpha.dtype))
    g = jax.random.gamma(_key(seed, counter), a).astype(alpha.dtype)
    # CPU's draws are clamped to the smallest normal number: a small shape underflows.
    return _at_least_tiny(g)


def _at_least_tiny(x):
    """std::max(smallest normal, x), as CPU's samplers clamp: NaN (a shape <= 0) too."""
    tiny = jnp.finfo(x.dtype).tiny
    return jnp.where(tiny < x, x, tiny)


@executable()
def _dirichlet_jit(seed, counter, alpha):
    a = alpha.astype(_sample_dtype(alpha.dtype))
    # CPU keeps a sample off 0 (its gamma draws are clamped to the smallest normal number).
    g = _at_least_tiny(jax.random.gamma(_key(seed, counter), a))
    x = _at_least_tiny((g / jnp.sum(g, axis=-1, keepdims=True)).astype(alpha.dtype))
    # ... and so is the normalised sample, inside (0, 1): tiny / sum would flush to zero,
    # and a lone large draw round to 1 (Beta's and Dirichlet's log_prob: inf there).
    below_one = jnp.nextafter(jnp.ones((), x.dtype), jnp.zeros((), x.dtype))
    return jnp.minimum(x, below_one)


@executable()
def _poisson_jit(seed, counter, rate):
    r = rate.astype(_sample_dtype(rate.dtype))
    return jax.random.poisson(_key(seed, counter), r, dtype=jnp.int64).astype(rate.dtype)


@executable()
def _binomial_jit(seed, counter, count, prob):
    n, p = jnp.broadcast_arrays(count.astype(jnp.float32), prob.astype(jnp.float32))
    draw = jax.random.binomial(_key(seed, counter), n, p)
    # CPU's sample_binomial answers these without drawing (NaN p: NaN).
    draw = jnp.where((n <= 0) | (p <= 0), 0, jnp.where(p >= 1, n, draw))
    return draw.astype(count.dtype)


# Random rules run in Python (they draw from the host-side stream) and do their array work
# through executables, so fused eager can record them without synchronising.


def _check(ok, message):
    """CPU's checks of scalar arguments: plain Python numbers here, so checking is free
    (a traced or tensor argument is not checked: that would be a host sync)."""
    if ok is False:
        raise RuntimeError(message)


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _floating(self, kernel: str, real: bool = False) -> None:
    """A continuous distribution's draws into integers (or complex numbers, for a ``real``
    one): CPU's kernels refuse them."""
    if not jnp.issubdtype(self.dtype, jnp.floating if real else jnp.inexact):
        raise NotImplementedError(
            f'"{kernel}" not implemented for \'{scalar_type_name(self.dtype)}\'')


@lowering(aten.uniform, eager=True, records=True)
def _uniform(self, from_=0.0, to=1.0, *, generator=None):
    _floating(self, "check_uniform_bounds")
    if _number(from_) and _number(to):
        _check(from_ <= to, "uniform_ expects to return a [from, to) range, but found "
               f"from={_fmt(from_)} > to={_fmt(to)}")
        real = jnp.finfo(self.dtype).dtype  # a complex tensor draws its real view
        _check(to - from_ <= float(jnp.finfo(real).max),
               f"uniform_ expects to-from <= std::numeric_limits<{scalar_type_name(real)}>::max(),"
               f" but found to={_fmt(to)} and from={_fmt(from_)} which result in to-from to "
               "exceed the limit")
    return _uniform_jit(*_next(generator), self.shape, self.dtype, from_, to)


def _fmt(x) -> str:
    """A number as CPU's messages print it (C++'s stream: 3, not 3.0; 3e+38, not 3 and 38
    digits)."""
    return format(x, "g") if isinstance(x, float) else str(x)


@lowering(aten.normal_functional, eager=True, records=True)
def _normal(self, mean=0.0, std=1.0, *, generator=None):
    if self.size:  # (CPU reaches its kernel only with something to draw: randn(0) of longs)
        _floating(self, "normal_kernel_cpu")
    if _number(std):
        _check(std >= 0.0, f"normal expects std >= 0.0, but found std {_fmt(std)}")
    return _normal_jit(*_next(generator), self.shape, self.dtype, mean, std)


@lowering(aten.normal.Tensor_float, aten.normal.float_Tensor, aten.normal.Tensor_Tensor,
          eager=True, records=True)
def _normal_tensors(mean, std=1.0, *, generator=None):
    _check(not jnp.iscomplexobj(std), "normal expects standard deviation to be non-complex")
    if _number(std):
        _check(std >= 0.0, f"normal expects std >= 0.0, but found std {_fmt(std)}")
    return _normal_like_jit(*_next(generator), mean, std)


def _digits(dtype) -> int:
    """The integers a float dtype holds exactly reach 2**digits."""
    return jnp.finfo(dtype).nmant + 1


def _check_range(from_: int, to_inc: int, dtype) -> None:
    """CPU's check_from_to_in_range: both ends must be values of the dtype; a float dtype
    warns past the integers it holds exactly."""
    if dtype == jnp.bool_:
        low, high = 0, 1
    elif jnp.issubdtype(dtype, jnp.floating):
        low, high = float(jnp.finfo(dtype).min), float(jnp.finfo(dtype).max)
    else:
        low, high = int(jnp.iinfo(dtype).min), int(jnp.iinfo(dtype).max)
    for value, name in ((from_, "from"), (to_inc, "to - 1")):
        _check(low <= value <= high, f"{name} is out of bounds for {cpp_name(dtype)}")
    if jnp.issubdtype(dtype, jnp.floating):
        n = _digits(dtype)
        for value, name in ((from_, "from"), (to_inc, "to - 1")):
            if not -(2 ** n) <= value <= 2 ** n:
                warnings.warn(
                    f"{name} is out of bounds [-(2^{n}), 2^{n}]. Due to precision limitations "
                    f"{cpp_name(dtype)} can support discrete uniform distribution only within "
                    "this range. This warning will become an error in version 1.7 release, "
                    "please fix the code in advance", stacklevel=2)


def _largest(dtype) -> int:
    """The largest integer random_ draws in ``dtype``: its max, or 2**digits for a float."""
    if dtype == jnp.bool_:
        return 1
    if jnp.issubdtype(dtype, jnp.floating):
        return 2 ** _digits(dtype)
    return int(jnp.iinfo(dtype).max)


@lowering(aten.random.default, eager=True, records=True)
def _random(self, *, generator=None):
    return _random_from(self, 0, _largest(self.dtype) + 1, generator=generator)


@lowering(aten.random.to, eager=True, records=True)
def _random_to(self, to, *, generator=None):
    return _random_from(self, 0, to, generator=generator)


@lowering(getattr(aten.random, "from"), eager=True, records=True)
def _random_from(self, from_, to, *, generator=None):
    if to is None and from_ == -2 ** 63:  # every int64: CPU's 64-bit kernel
        if self.dtype in (jnp.bool_, jnp.float16):
            raise RuntimeError('"random_full_64_bits_range_kernel_cpu" not implemented for '
                               f"'{scalar_type_name(self.dtype)}'")
        _check(self.dtype in (jnp.int64, jnp.float64, jnp.float32, jnp.bfloat16),
               "random_full_64_bits_range_kernel_cpu handles only int64, double, float and "
               "bfloat16")
        return _offset_bits_jit(*_next(generator), self.shape, self.dtype, from_, 0)
    if jnp.issubdtype(self.dtype, jnp.complexfloating):  # randint(..., dtype=complex64)
        raise RuntimeError("check_random_bounds handles only integral, floating-point and "
                           "boolean types")
    if to is None:  # [from, the largest]
        to = _largest(self.dtype) + 1
        _check_range(from_, to - 1, self.dtype)
        if jnp.issubdtype(self.dtype, jnp.floating):
            _check(from_ < to - 1, "random_ expects 'from' casted to dtype to be less than or "
                   f"equal to 'to_inc' casted to dtype, but got from={from_} > to_inc={to - 1}")
    else:
        _check(from_ < to, f"random_ expects 'from' to be less than 'to', but got "
               f"from={from_} >= to={to}")
        _check_range(from_, to - 1, self.dtype)
    if to <= 2 ** 63 - 1:
        return _randint_jit(*_next(generator), self.shape, self.dtype, from_, to)
    return _offset_bits_jit(*_next(generator), self.shape, self.dtype, from_,
                            (to - from_) % 2 ** 64)


@lowering(aten.bernoulli.default, eager=True, records=True)
def _bernoulli(self, *, generator=None):
    return _bernoulli_jit(*_next(generator), self.shape, self.dtype, self)


# p's default (0.5) matters: PyTorch leaves a default-valued argument out of the call.
@lowering(aten.bernoulli.p, aten.bernoulli.Tensor, eager=True, records=True)
def _bernoulli_p(self, p=0.5, *, generator=None):
    if _number(p):
        _check(0 <= p <= 1, f"bernoulli_ expects p to be in [0, 1], but got p={_fmt(p)}")
    return _bernoulli_jit(*_next(generator), self.shape, self.dtype, p)


@lowering(aten.native_dropout, eager=True, records=True)
def _native_dropout(input, p, train):  # noqa: A002
    if train is False or p == 0:
        return _identity_keep(input)
    # CPU scales by a float: no integer result holds it
    _check(bool(jnp.issubdtype(input.dtype, jnp.inexact)),
           f"result type Float can't be cast to the desired output type "
           f"{scalar_type_name(input.dtype)}")
    return _dropout_jit(*_next(), input, p)


@executable()
def _identity_keep(x):
    return x, jnp.ones(x.shape, bool)


@lowering(aten.native_dropout_backward)
def _native_dropout_backward(grad_output, mask, scale):
    return grad_output * mask.astype(grad_output.dtype) * scale


# The largest n whose values a float dtype holds exactly, as CPU's randperm words it.
_PERMUTATION_LIMIT = {np.dtype(jnp.float16): (2 ** 11 + 1, "2049", "Half"),
                      np.dtype(jnp.float32): (2 ** 24 + 1, "2^24+1", "Float"),
                      np.dtype(jnp.float64): (2 ** 53 + 1, "2^53+1", "Double")}


def _check_randperm(n: int, dtype: np.dtype) -> None:
    """CPU's randperm checks, in its order: n itself, its largest value in the dtype (c10's
    checked conversion), the float dtype's exact integers, then the kernel's dtypes."""
    _check(n >= 0, f"n must be non-negative, got{n}")
    if dtype.kind in "iu" and not np.iinfo(dtype).min <= max(n - 1, 0) <= np.iinfo(dtype).max:
        raise RuntimeError(f"value cannot be converted to type {dtype.name}_t without overflow")
    limit, words, name = _PERMUTATION_LIMIT.get(dtype, (None, None, None))
    _check(limit is None or n <= limit, f"n cannot be greater than {words} for {name} type.")
    if dtype not in ALL_TYPES_AND_HALVES:
        raise NotImplementedError(f'"randperm" not implemented for \'{scalar_type_name(dtype)}\'')


@lowering(aten.randperm.default, aten.randperm.generator, eager=True, records=True)
def _randperm(n, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None):
    dtype = np.dtype(jnp.int64) if dtype is None else np.dtype(to_jax_dtype(dtype))
    _check_randperm(n, dtype)
    return _permutation_jit(*_next(generator), n, dtype)


@lowering(aten.multinomial, eager=True)
def _multinomial(self, num_samples, replacement=False, *, generator=None):
    # CPU's argument checks. Its checks of the values (negative, inf or NaN probabilities, a
    # zero sum) need them on the host: a sync per draw that strict mode does not pay (CUDA
    # checks them with device-side asserts).
    _check(self.ndim in (1, 2), "prob_dist must be 1 or 2 dim")
    _check(jnp.issubdtype(self.dtype, jnp.floating),
           "multinomial only supports floating-point dtypes for input, got: "
           + scalar_type_name(self.dtype))
    _check(num_samples > 0, "cannot sample n_sample <= 0 samples")
    _check(replacement or num_samples <= self.shape[-1],
           "cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    _check(self.shape[-1] <= 2 ** 24, "number of categories cannot exceed 2^24")
    seed, counter = _next(generator)
    logits = jnp.log(self.astype(jnp.float32))
    key = _key(jnp.asarray(seed), jnp.asarray(counter))
    if replacement:
        shape = (num_samples,) + self.shape[:-1]
        out = jax.random.categorical(key, logits, axis=-1, shape=shape)
        return jnp.moveaxis(out, 0, -1).astype(jnp.int64)
    gumbel = jax.random.gumbel(key, logits.shape)
    return jax.lax.top_k(logits + gumbel, num_samples)[1].astype(jnp.int64)


@lowering(aten.exponential, eager=True, records=True)
def _exponential(self, lambd=1.0, *, generator=None):
    _check(not self.size or bool(jnp.issubdtype(self.dtype, jnp.inexact)),
           "Exponential distribution is a continuous probability distribution. dtype must be a "
           f"floating point but you specified {scalar_type_name(self.dtype)}")
    if _number(lambd):
        _check(lambd > 0.0, f"exponential_ expects lambda > 0.0, but found lambda={_fmt(lambd)}")
    return _exponential_jit(*_next(generator), self.dtype, self, lambd)


@lowering(aten.cauchy, eager=True, records=True)
def _cauchy(self, median=0.0, sigma=1.0, *, generator=None):
    if _number(sigma):
        _check(sigma > 0.0, f"cauchy_ expects sigma > 0.0, but found sigma={_fmt(sigma)}")
    _check(bool(jnp.issubdtype(self.dtype, jnp.floating)),
           "Cauchy distribution is a continuous probability distribution. dtype must be a "
           f"floating point but you specified {cpp_name(self.dtype)}")
    return _cauchy_jit(*_next(generator), self.dtype, self, median, sigma)


@lowering(aten.log_normal, eager=True, records=True)
def _log_normal(self, mean=1.0, std=2.0, *, generator=None):
    if _number(std):
        _check(std > 0.0, f"log_normal_ expects std > 0.0, but found std={_fmt(std)}")
    if self.size:
        _floating(self, "log_normal_cpu", real=True)
    return _log_normal_jit(*_next(generator), self.dtype, self, mean, std)


@lowering(aten.geometric, eager=True, records=True)
def _geometric(self, p, *, generator=None):
    if _number(p):
        _check(0 < p < 1, f"geometric_ expects p to be in (0, 1), but got p={_fmt(p)}")
    return _geometric_jit(*_next(generator), self.dtype, self, p)


@lowering(aten._standard_gamma, eager=True, records=True)
def _standard_gamma(self, generator=None):
    return _gamma_jit(*_next(generator), self)


@lowering(aten._sample_dirichlet, eager=True, records=True)
def _sample_dirichlet(self, generator=None):
    return _dirichlet_jit(*_next(generator), self)


@lowering(aten.poisson, eager=True, records=True)
def _poisson(self, generator=None):
    return _poisson_jit(*_next(generator), self)


@lowering(aten.binomial, eager=True, records=True)
def _binomial(count, prob, generator=None):
    return _binomial_jit(*_next(generator), count, prob)


def _like(self, dtype):
    # The random rules read only shape and dtype: no array is made for the template.
    return _new(self.shape, dtype, self.dtype)


def _new(size, dtype, default=None):
    """A template of this size: ``dtype``'s, else ``default``, else the default float."""
    if dtype is not None:
        return jax.ShapeDtypeStruct(tuple(size), to_jax_dtype(dtype))
    return jax.ShapeDtypeStruct(tuple(size), default_float() if default is None else default)


@lowering(aten.rand_like, eager=True, records=True)
def _rand_like(self, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None,
               memory_format=None):
    return _uniform(_like(self, dtype), generator=generator)


@lowering(aten.randn_like, eager=True, records=True)
def _randn_like(self, *, generator=None, dtype=None, layout=None, device=None,
                pin_memory=None, memory_format=None):
    return _normal(_like(self, dtype), generator=generator)


@lowering(aten.randint_like.default, aten.randint_like.Tensor, aten.randint_like.low_dtype,
          eager=True, records=True)
def _randint_like(self, low, high=None, *, generator=None, dtype=None, layout=None,
                  device=None, pin_memory=None, memory_format=None):
    if high is None:
        low, high = 0, low
    return _random_from(_like(self, dtype), int(low), int(high), generator=generator)


# Factories: eagerly PyTorch runs them as an empty tensor and an in-place draw (the rules
# above); a compiled graph holds them whole (AOTAutograd makes randn prims.normal).
@lowering(aten.rand.default, aten.rand.generator, eager=True, records=True)
def _rand(size, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None):
    return _uniform(_new(size, dtype), generator=generator)


@lowering(aten.randn.default, aten.randn.generator, eager=True, records=True)
def _randn(size, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None):
    return _normal(_new(size, dtype), generator=generator)


@lowering(aten.normal.float_float, eager=True, records=True)
def _normal_sized(mean, std, size, *, generator=None, dtype=None, layout=None, device=None,
                  pin_memory=None):
    return _normal(_new(size, dtype), mean, std, generator=generator)


@lowering(torch.ops.prims.normal.default, eager=True, records=True)
def _prims_normal(shape, *, mean, std, dtype, device, requires_grad, generator=None):
    return _normal(_new(shape, dtype), mean, std, generator=generator)


@lowering(aten.randint.default, aten.randint.generator, aten.randint.low,
          aten.randint.low_generator, eager=True, records=True)
def _randint(*args, generator=None, dtype=None, layout=None, device=None, pin_memory=None):
    *bounds, size = args
    low, high = (0, *bounds) if len(bounds) == 1 else bounds
    return _random_from(_new(size, dtype, np.dtype(jnp.int64)), int(low), int(high),
                        generator=generator)
