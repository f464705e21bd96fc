"""torch.compile(backend="tpu"): the outputs' strides, offsets and aliasing, as CPU's."""

from __future__ import annotations

import pytest
import torch
from compile_testlib import fresh_dynamo  # noqa: F401  (autouse fixture)
from conftest import TPU, assert_same


def test_outputs_take_the_graphs_strides():
    # A dense non-contiguous output (an elementwise op on a transposed input) is laid out as
    # PyTorch's meta says, as inductor's outputs are: the same strides as CPU eager.
    def f(x):
        return x.t() * 2

    x = torch.randn(3, 4)
    out = torch.compile(f, backend="tpu")(x.to(TPU))
    assert out.stride() == f(x).stride() == (1, 4)
    assert_same(out, f(x))
    assert_same(out.contiguous().view(-1), f(x).contiguous().view(-1))


def test_outputs_that_view_another_output_alias_it():
    # An inference graph returns a result and views of it (a graph break returns what the
    # code after it uses); AOTAutograd leaves their aliasing to the compiler.
    def f(x):
        y = x * 2
        return y, y.view(4), y.t()

    def g(x):
        y = x * 2
        v = y.view(4)
        y.add_(1)
        torch._dynamo.graph_break()
        v.mul_(3)
        return y, v

    for fn in (f, g):
        x = torch.arange(4.0).view(2, 2)
        outs, expected = torch.compile(fn, backend="tpu")(x.to(TPU)), fn(x)
        outs[0].mul_(10)
        expected[0].mul_(10)
        assert_same(outs, expected)


@pytest.mark.parametrize("grad", [False, True])
def test_outputs_that_view_an_intermediate_are_views_of_it_as_on_cpu(grad):
    # The graph does not return the intermediate: the outputs still have CPU's strides,
    # offsets and storage, and overlapping ones share it (a write shows through the other).
    def last(x):
        return x.cumsum(1)[:, -1]

    def overlapping(x):
        y = x * 2
        return y[1:], y[:-1]

    def geometry(t):
        return t.shape, t.stride(), t.storage_offset(), t.untyped_storage().nbytes()

    x = torch.randn(3, 4)
    for fn in (last, overlapping):
        torch._dynamo.reset()
        xt = x.to(TPU).requires_grad_(grad)
        xc = x.clone().requires_grad_(grad)
        outs, expected = torch.compile(fn, backend="tpu")(xt), fn(xc)
        outs, expected = (outs, expected) if fn is overlapping else ((outs,), (expected,))
        assert [geometry(o) for o in outs] == [geometry(e) for e in expected]
        assert_same(outs, expected)
        if grad:
            sum(o.sum() for o in outs).backward()
            sum(e.sum() for e in expected).backward()
            assert_same(xt.grad, xc.grad)
        elif fn is overlapping:
            outs[0].mul_(10)
            expected[0].mul_(10)
            assert_same(outs, expected)


def test_a_conjugate_view_of_an_output_stays_conjugated():
    # The min-cut partitioner saves conj(w) for linalg.eig's backward: handed back as a
    # plain view of w, the gradient went wrong.
    def f(x):
        y = x * 2
        return y, y.conj()

    x = torch.tensor([1 + 2j, 3 - 4j])
    _, conj = torch.compile(f, backend="tpu")(x.to(TPU))
    assert torch.equal(conj.cpu().resolve_conj(), f(x)[1].resolve_conj())


@pytest.mark.parametrize("write", [
    lambda x: x[::2].narrow(0, 1, 1).copy_(x[::2].narrow(0, 1, 1).flip(-1).clone()),
    lambda x: x.__setitem__((1, slice(1, None)), x[1, :-1].clone()),
    lambda x: x.select(1, 2).copy_(x.select(1, 2).flip(0) * 2),
], ids=["strided_rows_flipped", "shift", "column_flipped"])
def test_a_view_written_from_its_own_elements_as_on_cpu(write):
    # XLA:CPU can write a region in place while the same fusion still reads it
    # (openxla/xla#49176): the region writes are scatters there (ops/indexing.py)
    def f(x):
        write(x)
        return x * 1

    x = torch.arange(24.0).reshape(4, 6)
    out = torch.compile(f, backend="tpu")(x.to(TPU))
    assert_same(out, f(x.clone()))


@pytest.mark.parametrize("op", [lambda x: torch.cummin(x, 0)[0], lambda x: x.clone()])
def test_a_result_equal_to_an_input_is_new_memory(op):
    # cummin of a 0-d tensor lowers to its input array itself; the graph's result is still a
    # new tensor, so writing to it leaves the input alone.
    x = torch.tensor(-3.0).to(TPU)
    out = torch.compile(op, backend="tpu")(x)
    out.mul_(2)
    assert_same(x, torch.tensor(-3.0))
    assert_same(out, torch.tensor(-6.0))
