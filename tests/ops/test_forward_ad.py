"""Forward-mode AD against CPU: the tangents of PyTorch's OpInfo samples (float64, every
floating tensor argument a dual), and forward-over-reverse second derivatives of ops whose
derivative formulas call kernels of their own (``glu_jvp``), as PyTorch's
test_ops_fwd_gradients.py exercises them. Known failures: test "jvp" in expectations.py.

The default suite takes the first sample of every third op; ``-m slow`` every sample of all.
"""

import pytest
import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F
from conftest import TPU, assert_same
from test_opinfo import (
    NO_GRAD_CHECK,
    OPS,
    RANDOM,
    UNDEFINED,
    _call,
    _compare,
    _draws_dropout,
    _leaves,
    _on_tpu,
    check_listed,
    listed,
)
from torch.func import jvp, vjp
from torch.utils._pytree import tree_flatten, tree_unflatten

DTYPE = torch.float64


def _jvp_ops() -> list[str]:
    return [op_id for op_id, op in OPS.items()
            if op.supports_autograd and DTYPE in op.supported_dtypes("cpu")
            and op.name not in RANDOM | UNDEFINED | NO_GRAD_CHECK]


def _dual_call(op, s, tangents, device):
    """The op on the sample with each floating tensor a dual (its tangent from ``tangents``),
    through the sample's output_process_fn_grad (eigenvectors' gauge); (primal, tangent)
    of each output."""
    leaves, spec = tree_flatten((s.input, s.args, s.kwargs))
    with fwAD.dual_level():
        leaves = [x if t is None else fwAD.make_dual(x, t.to(device))
                  for x, t in zip(leaves, tangents, strict=True)]
        s.input, s.args, s.kwargs = tree_unflatten(leaves, spec)
        out = s.output_process_fn_grad(_call(op, s, device))
        return [tuple(fwAD.unpack_dual(o)) if isinstance(o, torch.Tensor) else (o, None)
                for o in _leaves(out)]


def _run_jvp(op, full: bool) -> int:
    n = 0
    for i, s in enumerate(op.sample_inputs("cpu", DTYPE)):
        if not full and i:
            break
        if _draws_dropout(op, s):
            continue
        t = _on_tpu(op, s)
        g = torch.Generator().manual_seed(i)
        tangents = [torch.randn(x.shape, generator=g, dtype=x.dtype)
                    if isinstance(x, torch.Tensor) and x.dtype == DTYPE else None
                    for x in tree_flatten((s.input, s.args, s.kwargs))[0]]
        try:
            expected = _dual_call(op, s, tangents, "cpu")
        except Exception as e:  # CPU has no formula (or refuses the sample): tpu must too
            with pytest.raises(type(e)):
                _dual_call(op, t, tangents, TPU)
            n += 1
            continue
        actual = _dual_call(op, t, tangents, TPU)
        for what, k in (("primal", 0), ("tangent", 1)):
            a, e = [x[k] for x in actual], [x[k] for x in expected]
            assert [x is None for x in a] == [x is None for x in e], f"{what}s: {a} vs {e}"
            _compare(a, e, DTYPE, what)
        n += 1
    return n


# The default suite: every third op, and those the expectations table lists (so it stays true).
@pytest.mark.parametrize("op_id", [op_id for i, op_id in enumerate(_jvp_ops())
                                   if i % 3 == 0 or listed(op_id, "jvp")])
def test_jvp(request, op_id):
    check_listed(request, op_id, "jvp", _run_jvp)


@pytest.mark.slow
@pytest.mark.parametrize("op_id", _jvp_ops())
def test_jvp_full(request, op_id):
    check_listed(request, op_id, "jvp", _run_jvp)


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
