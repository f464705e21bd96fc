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


def _silu_composite(grad, x):
    s = torch.sigmoid(x)
    return grad * s * (1 + x * (1 - s))


def _mish_composite(grad, x):
    t = torch.tanh(torch.nn.functional.softplus(x))
    return grad * (t + x * torch.sigmoid(x) * (1 - t * t))


def _function(name: str, forward_op, backward_op, composite):
    def forward(ctx, x):
        ctx.save_for_backward(x)
        with torch._C._AutoDispatchBelowAutograd():
            return forward_op(x)

    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph: a backward that is itself differentiable
            return composite(grad, x)
        return backward_op(grad, x)

    # The class's name names its autograd node (SiluBackward), as grad_fn shows it.
    fn = type(name, (torch.autograd.Function,), {"forward": staticmethod(forward),
                                                 "backward": staticmethod(backward)})
    return fn.apply


KERNELS = {
    "silu": _function("Silu", aten.silu.default, aten.silu_backward.default, _silu_composite),
    "mish": _function("Mish", aten.mish.default, aten.mish_backward.default, _mish_composite),
}


def register(lib: torch.library.Library) -> None:
    for name, kernel in KERNELS.items():
        lib.impl(name, kernel, "AutogradPrivateUse1")
