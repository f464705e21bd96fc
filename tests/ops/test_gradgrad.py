"""Second derivatives against CPU: the gradient of a gradient of PyTorch's OpInfo samples
(float64), as PyTorch's test_ops_gradients.py gradgradcheck exercises them: WGAN-GP's gradient
penalty, MAML and Hessian-vector products take this path. The first gradient is taken with
``create_graph`` through a random cotangent that itself requires grad; its dot with a random
direction is differentiated again, with respect to the inputs and the cotangent. Known
failures: test "gradgrad" in expectations.py.

The default suite takes the first sample of the ops models differentiate twice, and of those
whose gradients torchtpu itself defines (autograd_formulas.py: silu, mish, attention, group
norm); ``-m slow`` every sample of all.
"""

import pytest
import torch
from conftest import TPU
from test_opinfo import (
    NO_GRAD_CHECK,
    OPS,
    RANDOM,
    UNDEFINED,
    _differentiable_outputs,
    _draws_dropout,
    _grad_inputs,
    _on_tpu,
    check_listed,
    listed,
)

DTYPE = torch.float64
COMMON = {
    "nn.functional.linear", "nn.functional.conv2d", "matmul", "nn.functional.layer_norm",
    "nn.functional.group_norm", "nn.functional.silu", "nn.functional.mish",
    "nn.functional.gelu", "nn.functional.leaky_relu", "nn.functional.softplus",
    "nn.functional.elu", "tanh", "sigmoid", "exp", "log", "pow", "div", "mul", "sum", "mean",
    "norm", "softmax", "log_softmax", "logsumexp", "nn.functional.cross_entropy",
    "nn.functional.mse_loss", "nn.functional.scaled_dot_product_attention",
    "nn.functional.embedding", "nn.functional.max_pool2d", "nn.functional.avg_pool2d",
}


def _gradgrad_ops() -> list[str]:
    return [op_id for op_id, op in OPS.items()
            if op.supports_gradgrad and op.supports_autograd
            and DTYPE in op.supported_dtypes("cpu")
            and op.name not in RANDOM | UNDEFINED | NO_GRAD_CHECK]


def _randn_like(x, g):
    r = torch.randn(x.shape, generator=g, dtype=x.dtype)
    return r.real if r.is_complex() else r


def _second_grads(op, s, device, seed):
    """Gradients, w.r.t. the sample's inputs and the cotangents, of <grad(<out, ct>), v>."""
    outs = _differentiable_outputs(op, s, device)
    inputs = _grad_inputs(s)
    if not outs or not inputs:
        return None
    g = torch.Generator().manual_seed(seed)
    cts = [_randn_like(o, g).to(device).requires_grad_() for o in outs]
    # Complex outputs contribute their real part: a real loss, the same on both devices.
    loss = sum(torch.real((o * c).sum()) for o, c in zip(outs, cts, strict=True))
    firsts = torch.autograd.grad(loss, inputs, create_graph=True, allow_unused=True)
    dirs = [_randn_like(x, g).to(device) for x in inputs]
    terms = [torch.real((f * d).sum()) for f, d in zip(firsts, dirs, strict=True)
             if f is not None and f.requires_grad]
    if not terms:  # the gradient does not depend on anything: no second derivative
        return None
    return torch.autograd.grad(sum(terms), inputs + cts, allow_unused=True)


def _run_gradgrad(op, full: bool) -> int:
    n = 0
    for i, s in enumerate(op.sample_inputs("cpu", DTYPE, requires_grad=True)):
        if not full and i:
            break
        if _draws_dropout(op, s):
            continue
        t = _on_tpu(op, s, grad=True)
        try:
            expected = _second_grads(op, s, "cpu", i)
        except Exception as e:  # CPU has no double backward (or refuses the sample): nor tpu
            with pytest.raises(type(e)):
                _second_grads(op, t, TPU, i)
            n += 1
            continue
        actual = _second_grads(op, t, TPU, i)
        if expected is None:
            assert actual is None, "tpu's gradient depends on the inputs, CPU's does not"
            continue
        for k, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert (a is None) == (e is None), f"gradgrad[{k}]: {a is None=} {e is None=}"
            if e is not None:
                assert a.device.type == "tpu"
                torch.testing.assert_close(a.cpu(), e, equal_nan=True,
                                           msg=lambda m, k=k: f"gradgrad[{k}]: {m}")
        n += 1
    return n


# The default suite: COMMON, and the ops the expectations table lists (so it stays true).
@pytest.mark.parametrize("op_id", [op_id for op_id in _gradgrad_ops()
                                   if OPS[op_id].name in COMMON or listed(op_id, "gradgrad")])
def test_gradgrad(request, op_id):
    check_listed(request, op_id, "gradgrad", _run_gradgrad)


@pytest.mark.slow
@pytest.mark.parametrize("op_id", _gradgrad_ops())
def test_gradgrad_full(request, op_id):
    check_listed(request, op_id, "gradgrad", _run_gradgrad)
