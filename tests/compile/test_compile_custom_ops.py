"""torch.compile(backend="tpu") of code calling ops defined with torch.library.custom_op."""

from __future__ import annotations

import torch
from compile_testlib import fresh_dynamo  # noqa: F401  (autouse fixture)
from conftest import TPU, assert_same


@torch.library.custom_op("torchtpu_test::add_one_", mutates_args=("x",))
def add_one_(x: torch.Tensor) -> None:
    x.add_(1)


@add_one_.register_fake
def _(x):
    return None


@torch.library.custom_op("torchtpu_test::scale", mutates_args=())
def scale(x: torch.Tensor, factor: float) -> torch.Tensor:
    return x * factor


@scale.register_fake
def _(x, factor):
    return torch.empty_like(x)


scale.register_autograd(lambda ctx, grad: (grad * ctx.factor, None),
                        setup_context=lambda ctx, inputs, output: setattr(ctx, "factor",
                                                                          inputs[1]))


def test_a_custom_op_writing_its_arguments():
    # Its graph calls it through auto_functionalized, a higher-order op that found no rule
    # for tpu tensors.
    def f(x):
        y = x * 2
        add_one_(y)
        add_one_(x)
        return y

    x, expected_x = torch.arange(4.0).to(TPU), torch.arange(4.0)
    assert_same(torch.compile(f, backend="tpu")(x), f(expected_x))
    assert_same(x, expected_x)


def test_a_custom_op_with_its_own_gradient():
    def f(x):
        return scale(x.sin(), 3.0).cos().sum()

    x = torch.randn(5, requires_grad=True)
    xt = x.detach().to(TPU).requires_grad_()
    f(x).backward()
    loss = torch.compile(f, backend="tpu")(xt)
    loss.backward()
    assert_same(loss, f(x.detach()), rtol=1e-6, atol=1e-6)
    assert_same(xt.grad, x.grad, rtol=1e-6, atol=1e-6)
