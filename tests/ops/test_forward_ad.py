"""Forward-mode AD against CPU: tangents (torch.autograd.forward_ad, torch.func.jvp) and
forward-over-reverse second derivatives of ops whose derivative formulas call kernels of
their own (``glu_jvp``), as PyTorch's test_ops_fwd_gradients.py exercises them."""

import pytest
import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F
from conftest import TPU, assert_same
from torch.func import jvp, vjp


def _tangent(fn, x, t):
    with fwAD.dual_level():
        return fwAD.unpack_dual(fn(fwAD.make_dual(x, t))).tangent


def _forward_over_reverse(fn, x, t, g):
    """The jvp of fn's vjp with cotangent ``g``: what gradgrad checks in forward mode."""
    def grad(z):
        return vjp(fn, z)[1](g)[0]

    return jvp(grad, (x,), (t,))[1]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("dim", [-1, 0])
def test_glu_tangent_and_forward_over_reverse(dim, dtype):
    gen = torch.Generator().manual_seed(0)
    x, t = (torch.randn(4, 6, generator=gen, dtype=dtype) for _ in range(2))
    g = torch.randn((2, 6) if dim == 0 else (4, 3), generator=gen, dtype=dtype)

    def glu(z):
        return F.glu(z, dim)

    assert_same(_tangent(glu, x.to(TPU), t.to(TPU)), _tangent(glu, x, t))
    assert_same(_forward_over_reverse(glu, x.to(TPU), t.to(TPU), g.to(TPU)),
                _forward_over_reverse(glu, x, t, g))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_glu_tangent_of_half_floats_is_refused_as_on_cpu(dtype):
    # CPU's glu_jvp kernel is built for float32 and float64 only.
    name = "BFloat16" if dtype == torch.bfloat16 else "Half"
    for device in ("cpu", TPU):
        x = torch.ones(2, 4, dtype=dtype, device=device)
        with pytest.raises(NotImplementedError,
                           match=f"\"glu_jvp_cpu\" not implemented for '{name}'"):
            _tangent(F.glu, x, x)
