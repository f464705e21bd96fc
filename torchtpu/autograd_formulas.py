"""Autograd for ops whose backward PyTorch picks by tensor type: CPU's fused one on 'tpu'.

PyTorch's formulas for ``silu`` and ``mish`` call the fused ``silu_backward`` /
``mish_backward`` only for plain tensors; for a tensor subclass (ours is a wrapper subclass)
they run a composite of 7-11 ops. Those round after each op in bfloat16 (48% and 51% of
gradient elements then differed from CPU's) and cost as many dispatches. These kernels, on
the ``AutogradPrivateUse1`` key, save the input and call the fused backward, as CPU does;
under ``create_graph`` they keep PyTorch's differentiable composite.
"""

from __future__ import annotations

import torch

aten = torch.ops.aten


def _silu(x):
    return x * torch.sigmoid(x)


def _silu_composite(grad, x):
    s = torch.sigmoid(x)
    return grad * s * (1 + x * (1 - s))


def _mish(x):
    return x * torch.tanh(torch.nn.functional.softplus(x))


def _mish_composite(grad, x):
    t = torch.tanh(torch.nn.functional.softplus(x))
    return grad * (t + x * torch.sigmoid(x) * (1 - t * t))


def _kernel(name: str, forward_op, backward_op, composite, plain):
    apply = _function(name, forward_op, backward_op, composite)

    def kernel(x):
        # Inside torch.func transforms an autograd.Function becomes a higher-order op with no
        # PrivateUse1 autograd kernel: there, the op as differentiable ops (PyTorch's own path
        # for subclasses).
        if torch._C._functorch.maybe_current_level() is not None:
            return plain(x)
        return apply(x)

    return kernel


def _function(name: str, forward_op, backward_op, composite):
    def forward(x):
        with torch._C._AutoDispatchBelowAutograd():  # else this kernel again
            return forward_op(x)

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph: a backward that is itself differentiable
            return composite(grad, x)
        return backward_op(grad, x)

    # The class's name names its autograd node (SiluBackward), as grad_fn shows it.
    fn = type(name, (torch.autograd.Function,), {
        "forward": staticmethod(forward), "setup_context": staticmethod(setup_context),
        "backward": staticmethod(backward)})
    return fn.apply


KERNELS = {
    "silu": _kernel("Silu", aten.silu.default, aten.silu_backward.default, _silu_composite,
                    _silu),
    "mish": _kernel("Mish", aten.mish.default, aten.mish_backward.default, _mish_composite,
                    _mish),
}


def register(lib: torch.library.Library) -> None:
    for name, kernel in KERNELS.items():
        lib.impl(name, kernel, "AutogradPrivateUse1")
