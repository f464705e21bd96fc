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
    lambda d: torch._foreach_addcmul([_L(d)], [_L(d)], [_L(d)], 0.5j),
    lambda d: torch._foreach_addcdiv_([_F(d).half()], [_F(d).half()], [_F(d).half()], [1e300]),
    # kernels not built for bool: addcmul's, clamp_min/max's by numbers; addcdiv's integer
    # division counts bool as integer
    lambda d: torch._foreach_addcmul([_B(d)], [_B(d)], [_B(d)]),
    lambda d: torch._foreach_addcmul_([_B(d)], [_B(d)], [_B(d)], [2]),
    lambda d: torch._foreach_addcdiv([_B(d)], [_B(d)], [_B(d)]),
    lambda d: torch._foreach_addcdiv_([_L(d)], [_L(d)], [_L(d)], [2]),
    lambda d: torch._foreach_addcdiv([_L(d)], [_L(d)], [_L(d)], torch.tensor([2])),
    lambda d: torch._foreach_addcmul([_B(d)], [_B(d)], [_B(d)], torch.tensor(2)),
    lambda d: torch._foreach_clamp_min([_B(d)], True),
    lambda d: torch._foreach_maximum_([_B(d)], [True]),
    lambda d: torch._foreach_minimum([_B(d)], False),
    # lists of other lengths: the foreach op's own error
    lambda d: torch._foreach_pow([_C(d), _C(d)], [True, 1, 2.0]),
    lambda d: torch._foreach_pow_([_F(d), _F(d)], [True]),
    lambda d: torch._foreach_sub([_L(d)], [_L(d), _L(d)]),
    lambda d: torch._foreach_sub_([_L(d), _L(d)], [_L(d)]),
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
    lambda d: torch.addcmul(_L(d), _L(d), _L(d), value=0.5j),
    lambda d: torch.addcdiv(_F(d), _F(d), _F(d), value=1 + 1j),
    lambda d: torch.addcmul(_F(d).bfloat16(), _F(d).bfloat16(), _F(d).bfloat16(), value=1e300),
])
def test_single_ops_refuse_complex_bounds_and_weights_as_cpu(bad, eager_mode):
    raises_as_cpu(bad, Exception)


def test_a_bool_value_does_not_skip_the_broadcast_check(eager_mode):
    # the meta kernel read a traced bool Scalar as a tensor and checked nothing
    raises_as_cpu(lambda d: torch._foreach_addcdiv([_t(3, 3)(d)], [_t(2, 1)(d)], [_t(1, 2)(d)],
                                                   value=True))


def _pointwise_lists(d):
    g = torch.Generator().manual_seed(0)
    return [[torch.randn(2, 3, generator=g).to(d) for _ in range(2)] for _ in range(3)]


@pytest.mark.parametrize("op", [torch._foreach_addcmul, torch._foreach_addcdiv,
                                torch._foreach_addcmul_, torch._foreach_addcdiv_])
def test_pointwise_ops_take_their_numbers_packed_in_a_cpu_tensor(op, eager_mode):
    scalars = torch.tensor([0.5, -2.0])
    expected, actual = _pointwise_lists("cpu"), _pointwise_lists("tpu")
    out_cpu, out_tpu = op(*expected, scalars), op(*actual, scalars)
    if out_cpu is None:  # in place
        out_cpu, out_tpu = expected[0], actual[0]
    for a, e in zip(out_tpu, out_cpu, strict=True):
        torch.testing.assert_close(a.cpu(), e)


@pytest.mark.parametrize("scalars", [torch.tensor(2.0), torch.tensor([1.0, 2.0, 3.0]),
                                     torch.tensor([[0.0, 1.0], [2.0, 3.0]])[:, 1]])
def test_packed_numbers_are_checked_as_on_cpu(scalars, eager_mode):
    raises_as_cpu(lambda d: torch._foreach_addcmul(*_pointwise_lists(d), scalars))


def test_packed_numbers_must_be_on_the_host(eager_mode):
    with pytest.raises(RuntimeError, match="^Expected scalars to be on CPU, got tpu:0 instead."):
        torch._foreach_addcdiv_(*_pointwise_lists("tpu"), torch.ones(2, device="tpu"))


@pytest.mark.parametrize("exponent", [True, [True, False]], ids=["bool", "bools"])
def test_foreach_pow_of_bools_by_bools_stays_bool(exponent, eager_mode):
    # (as pow: the meta kernel made it int64)
    bools = [torch.tensor([True, False]), torch.tensor([False, True])]
    expected = torch._foreach_pow(bools, exponent)
    actual = torch._foreach_pow([t.to("tpu") for t in bools], exponent)
    for a, e in zip(actual, expected, strict=True):
        assert a.dtype == e.dtype
        torch.testing.assert_close(a.cpu(), e)
