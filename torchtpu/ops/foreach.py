"""``_foreach_*`` ops (the optimizers' multi-tensor path): the single-tensor rule mapped
over the list inside one executable, so a whole optimizer update is one XLA program."""

from __future__ import annotations

import jax.numpy as jnp
import torch

from .registry import LOWERINGS, is_functional, lowering

aten = torch.ops.aten

# _foreach_<name> -> the single-tensor op whose rule it maps.
_MAPPED = {
    "add": aten.add.Tensor, "sub": aten.sub.Tensor, "mul": aten.mul.Tensor,
    "div": aten.div.Tensor, "maximum": aten.maximum.default, "minimum": aten.minimum.default,
    "clamp_min": aten.clamp_min.default, "clamp_max": aten.clamp_max.default,
    "pow": aten.pow.Tensor_Tensor, "lerp": aten.lerp.Tensor, "addcmul": aten.addcmul.default,
    "addcdiv": aten.addcdiv.default, "abs": aten.abs.default, "sqrt": aten.sqrt.default,
    "rsqrt": aten.rsqrt.default, "exp": aten.exp.default, "log": aten.log.default,
    "neg": aten.neg.default, "reciprocal": aten.reciprocal.default,
    "sign": aten.sign.default, "sigmoid": aten.sigmoid.default, "tanh": aten.tanh.default,
    "zero": aten.zero.default, "sin": aten.sin.default, "cos": aten.cos.default,
    "log1p": aten.log1p.default, "expm1": aten.expm1.default, "floor": aten.floor.default,
    "ceil": aten.ceil.default, "round": aten.round.default, "trunc": aten.trunc.default,
    "frac": aten.frac.default, "erf": aten.erf.default,
}


def _pick(value, i):
    return value[i] if isinstance(value, (list, tuple)) else value


def _mapped(fn):
    def rule(self, *args, **kwargs):
        return [fn(t, *(_pick(a, i) for a in args), **kwargs) for i, t in enumerate(self)]

    return rule


# Overloads whose number argument takes another single-tensor form (CPU's pow by a number:
# x * x for 2, sqrt for 0.5, ...).
_BY_NUMBER = {("pow", "Scalar"): aten.pow.Tensor_Scalar,
              ("pow", "ScalarList"): aten.pow.Tensor_Scalar}

for _name, _single in _MAPPED.items():
    _packet = getattr(aten, f"_foreach_{_name}", None)
    if _packet is None:
        continue
    for _overload in _packet.overloads():
        _op = getattr(_packet, _overload)
        # (addcmul/addcdiv.Tensor packs its numbers in a CPU tensor: decomps.py reads them)
        if is_functional(_op) and "ScalarAndTensor" not in _overload and (
                _overload != "Tensor" or _name not in ("addcmul", "addcdiv")):
            _fn = LOWERINGS[_BY_NUMBER.get((_name, _overload), _single)].fn
            lowering(_op)(_mapped(_fn))


@lowering(aten._foreach_copy)
def _foreach_copy(self, src, non_blocking=False):
    return [s.astype(t.dtype) for t, s in zip(self, src, strict=False)]


@lowering(aten._foreach_norm.Scalar, static=("ord",))
def _foreach_norm(self, ord=2, dtype=None):  # noqa: A002
    fn = LOWERINGS[aten.linalg_vector_norm.default].fn
    return [fn(t, ord, None, False, dtype=dtype) for t in self]


@lowering(aten._foreach_max)
def _foreach_max(self):
    return [jnp.max(t) for t in self]


@lowering(aten._foreach_pow.ScalarAndTensor)
def _foreach_pow_scalar(self, exponent):
    # AdamW's bias corrections under torch.compile: beta ** step for every parameter's step.
    fn = LOWERINGS[aten.pow.Scalar].fn
    return [fn(self, e) for e in exponent]
