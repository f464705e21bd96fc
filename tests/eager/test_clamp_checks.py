"""clamp, clamp_min and clamp_max (and their foreach forms) refuse what CPU refuses, in its
order and words; a floating tensor clamped by a complex number keeps its dtype, as on CPU."""

from __future__ import annotations

import pytest
import torch
from conftest import assert_same, raises_as_cpu


def _t(dtype=torch.float32):
    return lambda d: torch.ones(3, dtype=dtype, device=d)


_F, _C, _L, _U8 = (_t(dt) for dt in (torch.float32, torch.complex64, torch.long, torch.uint8))


def _c0(d):
    return torch.tensor(1 + 1j, device=d)


@pytest.mark.parametrize("bad", [
    # a complex result: the kernel clamp by tensors runs (clamp, maximum or minimum) refuses it
    lambda d: torch.clamp(_F(d), min=_C(d)),
    lambda d: torch.clamp(_F(d), max=_c0(d)),
    lambda d: torch.clamp(_F(d), _C(d), _C(d)),
    lambda d: torch.clamp(_F(d), min=_F(d), max=_C(d)),
    # in place, TensorIterator's cast check first
    lambda d: _F(d).clamp_min_(_C(d)),
    lambda d: _L(d).clamp_max_(_C(d)),
    lambda d: torch._foreach_clamp_min_([_F(d)], [_C(d)]),
    lambda d: torch._foreach_maximum_([_L(d)], [_F(d)]),
    # shapes that do not broadcast: TensorIterator's error, before the kernel's
    lambda d: torch.clamp_max(_C(d), torch.ones(2, 2, device=d)),
    lambda d: torch._foreach_maximum([_C(d)], [torch.ones(2, 2, device=d)]),
], ids=["min", "max_0d", "both", "max_only_complex", "clamp_min_", "clamp_max_",
        "foreach_clamp_min_", "foreach_maximum_", "shapes", "foreach_shapes"])
def test_clamp_by_complex_tensors_is_refused_as_cpu(bad, eager_mode):
    raises_as_cpu(bad, Exception)


@pytest.mark.parametrize("bad", [
    # a floating tensor reads both bounds as doubles first
    lambda d: torch.clamp(_F(d), min=2j),
    lambda d: torch.clamp(_F(d).half(), max=2j),
    lambda d: torch.clamp(_F(d).bfloat16(), min=1e40, max=2j),
    lambda d: _F(d).clamp_(min=2j),
    # other tensors promote with the numbers: a complex result, a changed in-place dtype
    lambda d: torch.clamp(_L(d), min=2j),
    lambda d: torch.clamp(_U8(d), min=1e40, max=2 + 0j),
    lambda d: _L(d).clamp_(min=2j),
    lambda d: _L(d).clamp_(min=1.5),
    lambda d: _U8(d).clamp_min_(1.5),
    lambda d: torch._foreach_clamp_min_([_L(d)], [1.5]),
    lambda d: torch._foreach_maximum_([_L(d)], 1.5),
    lambda d: _L(d).clamp_min_(2j),
], ids=["float_min", "half_max", "bfloat16_both", "float_in_place", "long", "uint8_both",
        "long_in_place", "long_in_place_float", "clamp_min_", "foreach_clamp_min_",
        "foreach_maximum_", "clamp_min_complex"])
def test_clamp_by_numbers_is_refused_as_cpu(bad, eager_mode):
    raises_as_cpu(bad, Exception)


_B = _t(torch.bool)


@pytest.mark.parametrize("bad", [
    lambda d: torch.clamp(_B(d), _B(d), _B(d)), lambda d: torch.clamp(_B(d), True, False),
    lambda d: torch.clamp(_B(d), True), lambda d: torch.clamp(_B(d), max=True),
    lambda d: torch.clamp_max(_B(d), False), lambda d: _B(d).clamp_(_B(d), _B(d)),
], ids=["by_tensors", "by_numbers", "min", "max", "clamp_max", "in_place"])
def test_clamping_bools_to_bools_is_refused_as_cpu(bad, eager_mode):
    # (by one tensor CPU runs maximum or minimum, which take bools; by ints the result is int)
    raises_as_cpu(bad, NotImplementedError)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_a_floating_tensor_clamped_by_a_real_complex_number_keeps_its_dtype(dtype, eager_mode):
    x = torch.tensor([-1.0, 0.5, 3.0], dtype=dtype)
    for clamp in (lambda t: t.clamp(min=0j), lambda t: t.clamp(0, 2 + 0j),
                  lambda t: t.clone().clamp_(max=1 + 0j)):
        assert_same(clamp(x.to("tpu")), clamp(x))
