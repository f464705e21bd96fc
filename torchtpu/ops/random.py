"""Random ops. One host-side stream, seeded by torch.manual_seed, keys derived per op.

Each random op folds a counter into the seed's key inside its executable, so seeds and
counters are traced values: a new step or a new seed never recompiles.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import torch

from .dtypes import default_float, to_jax_dtype
from .registry import lowering

aten = torch.ops.aten


class _Stream:
    seed = 0
    counter = 0


def manual_seed(seed: int) -> None:
    _Stream.seed = int(seed) & 0xFFFFFFFFFFFFFFFF
    _Stream.counter = 0


def initial_seed() -> int:
    return _Stream.seed


def get_state() -> torch.Tensor:
    # On the host whatever the default device is: the state is Python integers.
    return torch.tensor([_Stream.seed, _Stream.counter], dtype=torch.int64, device="cpu")


def set_state(state: torch.Tensor) -> None:
    _Stream.seed, _Stream.counter = (int(v) for v in state.tolist())


def _next():
    _Stream.counter += 1
    return jnp.uint32(_Stream.seed & 0xFFFFFFFF), jnp.uint32(_Stream.counter)


def _key(seed, counter):
    return jax.random.fold_in(jax.random.key(seed), counter)


@functools.partial(jax.jit, static_argnums=(2, 3))
def _uniform_jit(seed, counter, shape, dtype, low, high):
    return jax.random.uniform(_key(seed, counter), shape, dtype, low, high)


@functools.partial(jax.jit, static_argnums=(2, 3))
def _normal_jit(seed, counter, shape, dtype, mean, std):
    return mean + std * jax.random.normal(_key(seed, counter), shape, dtype)


@functools.partial(jax.jit, static_argnums=(2, 3))
def _randint_jit(seed, counter, shape, dtype, low, high):
    return jax.random.randint(_key(seed, counter), shape, low, high, jnp.int64).astype(dtype)


@functools.partial(jax.jit, static_argnums=(2,))
def _bernoulli_jit(seed, counter, shape, p):
    return jax.random.uniform(_key(seed, counter), shape) < p


@jax.jit
def _dropout_jit(seed, counter, x, p):
    keep = jax.random.uniform(_key(seed, counter), x.shape) >= p
    scale = jnp.where(p < 1, 1 / (1 - p), 0).astype(x.dtype)
    return jnp.where(keep, x * scale, 0).astype(x.dtype), keep


@functools.partial(jax.jit, static_argnums=(2,))
def _permutation_jit(seed, counter, n):
    return jax.random.permutation(_key(seed, counter), n).astype(jnp.int64)


def _float_dtype(x):
    return x.dtype if jnp.issubdtype(x.dtype, jnp.floating) else default_float()


@lowering(aten.uniform, eager=True)
def _uniform(self, from_=0.0, to=1.0, *, generator=None):
    dtype = _float_dtype(self)
    out = _uniform_jit(*_next(), self.shape, jnp.float32 if dtype == jnp.bfloat16 else dtype,
                       from_, to)
    return out.astype(self.dtype)


@lowering(aten.normal_functional, eager=True)
def _normal(self, mean=0.0, std=1.0, *, generator=None):
    return _normal_jit(*_next(), self.shape, jnp.float32, mean, std).astype(self.dtype)


@lowering(aten.normal.Tensor_float, aten.normal.float_Tensor, aten.normal.Tensor_Tensor,
          eager=True)
def _normal_tensors(mean, std=1.0, *, generator=None):
    shape = jnp.broadcast_shapes(jnp.shape(mean), jnp.shape(std))
    dtype = mean.dtype if hasattr(mean, "dtype") else std.dtype
    return _normal_jit(*_next(), shape, jnp.float32, 0.0, 1.0).astype(dtype) * std + mean


@lowering(aten.random, eager=True)
def _random(self, from_=None, to=None, *, generator=None):
    if to is None and from_ is not None:  # random.to(self, to)
        from_, to = 0, from_
    if from_ is None:
        from_ = 0
        if self.dtype == jnp.bool_:
            to = 2
        elif jnp.issubdtype(self.dtype, jnp.floating):
            to = 2 ** jnp.finfo(self.dtype).nmant + 1
        else:
            to = int(jnp.iinfo(self.dtype).max) + 1
    return _randint_jit(*_next(), self.shape, self.dtype, from_, to)


@lowering(aten.bernoulli, eager=True)
def _bernoulli(self, p=None, *, generator=None):
    prob = self if p is None else p
    return _bernoulli_jit(*_next(), self.shape, prob).astype(self.dtype)


@lowering(aten.native_dropout, eager=True)
def _native_dropout(input, p, train):  # noqa: A002
    if train is False or p == 0:
        return input, jnp.ones(input.shape, bool)
    return _dropout_jit(*_next(), input, p)


@lowering(aten.native_dropout_backward)
def _native_dropout_backward(grad_output, mask, scale):
    return grad_output * mask.astype(grad_output.dtype) * scale


@lowering(aten.randperm.default, aten.randperm.generator, eager=True)
def _randperm(n, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None):
    out = _permutation_jit(*_next(), n)
    return out if dtype is None else out.astype(to_jax_dtype(dtype))


@lowering(aten.multinomial, eager=True)
def _multinomial(self, num_samples, replacement=False, *, generator=None):
    seed, counter = _next()
    logits = jnp.log(self.astype(jnp.float32))
    key = _key(seed, counter)
    if replacement:
        shape = (num_samples,) + self.shape[:-1]
        out = jax.random.categorical(key, logits, axis=-1, shape=shape)
        return jnp.moveaxis(out, 0, -1).astype(jnp.int64)
    gumbel = jax.random.gumbel(key, logits.shape)
    return jax.lax.top_k(logits + gumbel, num_samples)[1].astype(jnp.int64)


@lowering(aten.exponential, eager=True)
def _exponential(self, lambd=1.0, *, generator=None):
    u = _uniform_jit(*_next(), self.shape, jnp.float32, 0.0, 1.0)
    return (-jnp.log1p(-u) / lambd).astype(self.dtype)


def _like(self, dtype):
    return jnp.zeros(self.shape, self.dtype if dtype is None else to_jax_dtype(dtype))


@lowering(aten.rand_like, eager=True)
def _rand_like(self, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None,
               memory_format=None):
    return _uniform(_like(self, dtype))


@lowering(aten.randn_like, eager=True)
def _randn_like(self, *, generator=None, dtype=None, layout=None, device=None,
                pin_memory=None, memory_format=None):
    return _normal(_like(self, dtype))


@lowering(aten.randint_like.default, aten.randint_like.Tensor, aten.randint_like.low_dtype,
          eager=True)
def _randint_like(self, low, high=None, *, generator=None, dtype=None, layout=None,
                  device=None, pin_memory=None, memory_format=None):
    if high is None:
        low, high = 0, low
    return _random(_like(self, dtype), int(low), int(high))
