"""The _foreach_ ops make CPU's checks: those of the single-tensor op its slow path runs on
each tensor, with that op's error types and messages."""

from __future__ import annotations

import pytest
import torch
from conftest import raises_as_cpu


def _t(*shape, dtype=torch.float32):
    return lambda d: torch.ones(shape, dtype=dtype, device=d)


_F, _C, _B, _L = (_t(3, dtype=dt) for dt in (torch.float32, torch.complex64, torch.bool,
                                             torch.long))


@pytest.mark.parametrize("bad", [
    # a bool subtracted, by a number or by a number of a list
    lambda d: torch._foreach_sub([_B(d)], 1),
    lambda d: torch._foreach_sub([_F(d)], True),
    lambda d: torch._foreach_sub_([_F(d), _F(d)], [1, True]),
    # maximum/minimum are clamp_min/clamp_max there: no complex tensor, bound or result
    lambda d: torch._foreach_maximum([_C(d)], [_C(d)]),
    lambda d: torch._foreach_maximum([_F(d)], [_C(d)]),
    lambda d: torch._foreach_minimum([_C(d)], 1.0),
    lambda d: torch._foreach_maximum([_F(d)], 1j),
    lambda d: torch._foreach_minimum_([_F(d), _F(d)], [1.0, 2j]),
    lambda d: torch._foreach_clamp_min([_F(d)], [_C(d)]),
    # dtypes the single op's kernel is not built for
    *(lambda d, f=f, x=x: f([x(d)]) for f in (torch._foreach_ceil, torch._foreach_floor,
                                              torch._foreach_round, torch._foreach_trunc,
                                              torch._foreach_frac, torch._foreach_sign,
                                              torch._foreach_abs) for x in (_B, _C)
      if (f, x) not in {(torch._foreach_sign, _B), (torch._foreach_abs, _C)}),
    lambda d: torch._foreach_frac_([_L(d)]),
    lambda d: torch._foreach_abs_([_C(d)]),
    lambda d: torch._foreach_lerp([_L(d)], [_L(d)], 0.5),
    lambda d: torch._foreach_lerp([_L(d)], [_L(d)], [_L(d)]),
    lambda d: torch._foreach_norm([_L(d)]),
    lambda d: torch._foreach_norm([_F(d), _B(d)]),
    # numbers that do not convert
    lambda d: torch._foreach_lerp([_F(d)], [_F(d)], 0.5j),
    lambda d: torch._foreach_lerp_([_F(d)], [_F(d)], [1e300]),
    lambda d: torch._foreach_pow([_L(d)], -1),
])
def test_foreach_ops_make_the_single_ops_checks_on_each_tensor(bad, eager_mode):
    raises_as_cpu(bad, Exception)


@pytest.mark.parametrize("bad", [
    lambda d: torch.clamp_min(_F(d), 1j),
    lambda d: _F(d).clamp_max_(1 + 1j),
    lambda d: torch.clamp_min(_F(d), _C(d)),
    lambda d: torch.clamp_max(_F(d), _C(d)),
    lambda d: torch.lerp(_F(d), _F(d), 0.5j),
    lambda d: torch.lerp(_F(d).half(), _F(d).half(), 1e300),
])
def test_single_ops_refuse_complex_bounds_and_weights_as_cpu(bad, eager_mode):
    raises_as_cpu(bad, Exception)


def test_a_bool_value_does_not_skip_the_broadcast_check(eager_mode):
    # the meta kernel read a traced bool Scalar as a tensor and checked nothing
    raises_as_cpu(lambda d: torch._foreach_addcdiv([_t(3, 3)(d)], [_t(2, 1)(d)], [_t(1, 2)(d)],
                                                   value=True))
