"""torch.compile(backend="tpu") under symbolic sizes and symbolic int inputs: views that
read the right elements, ints traced once."""

from __future__ import annotations

import pytest
import torch
from compile_testlib import count as _count
from compile_testlib import fresh_dynamo  # noqa: F401  (autouse fixture)
from conftest import TPU, assert_same


def test_views_returned_under_symbolic_sizes_keep_their_layout():
    # A second shape makes Dynamo's sizes symbolic; the output's strides then come from its
    # sizes' example values (AOTAutograd rebuilds a returned view of an input from them).
    def heads(x):
        b, t, c = x.shape
        return x.view(b, t, 2, c // 2).transpose(1, 2), (x + 1).transpose(0, 1)

    compiled = torch.compile(heads, backend="tpu")
    for t in (3, 5, 7):
        x = torch.randn(2, t, 4)
        out, expected = compiled(x.to(TPU)), heads(x)
        assert [o.stride() for o in out] == [e.stride() for e in expected]
        assert_same(out, expected)


def test_views_of_an_input_with_symbolic_bounds_read_the_right_elements():
    # AOTAutograd cannot replay a view whose arguments are symbolic: it rebuilds it from the
    # input with our output's geometry, which must be the view's (an offset, a row stride).
    views = [lambda x: x[:, : x.shape[1] // 2], lambda x: x[:, x.shape[1] - 2:],
             lambda x: x.narrow(1, 1, x.shape[1] - 2), lambda x, p=1: x[:, p:p + 4:2]]
    for view in views:
        compiled = torch.compile(view, backend="tpu")
        for n in (5, 6, 7):
            x = torch.arange(3.0 * n).view(3, n)
            out, expected = compiled(x.to(TPU)), view(x)
            assert (out.stride(), out.storage_offset()) == (expected.stride(),
                                                            expected.storage_offset())
            assert_same(out, expected)
    compiled = torch.compile(lambda x, p: x[:, p:p + 4:2], backend="tpu")
    x = torch.arange(24.0).view(3, 8)
    for p in range(1, 5):
        assert_same(compiled(x.to(TPU), p), x[:, p:p + 4:2])


def _halves(x):
    return x.split(x.shape[1] // 2, 1)


def _y_and_views(x):
    y = x * 2
    return y, y[:, : y.shape[1] // 2], y.t()[1:]


@pytest.mark.parametrize("fn", [_halves, lambda x: x.chunk(2, 1)[1].t(), _y_and_views],
                         ids=["split", "chunk_t", "views_of_an_output"])
def test_symbolic_views_alias_what_they_view(fn):
    # split's pieces reach the output through getitem; a view of another output was a
    # separate dense array. Writing through each output shows what it aliases.
    compiled = torch.compile(fn, backend="tpu", dynamic=True)
    for n in (6, 8):
        x = torch.arange(4.0 * n).view(4, n)
        on_tpu = x.to(TPU)
        outs, expected = compiled(on_tpu), fn(x)
        for out, e in zip(outs, expected, strict=True):
            assert (out.stride(), out.storage_offset()) == (e.stride(), e.storage_offset())
            assert_same(out, e)
        for out, e in zip(outs, expected, strict=True):
            out.add_(100)
            e.add_(100)
        assert_same(on_tpu, x)
        assert_same(outs, expected)


def test_an_int_input_no_shape_depends_on_is_traced_once():
    # A decode loop's position: after Dynamo's one recompile, one program serves every value.
    def f(x, pos):
        x = x.clone()
        x[:, pos:pos + 2] = 0.5  # slice_scatter at a traced start
        x[:, pos + 1:pos + 3:2] = 0.25
        window = torch.narrow(x, 1, pos, 2) + pos
        strided = x[:, pos:pos + 3:2] * 2
        mask = torch.arange(8, device=x.device) > pos
        scaled = x.to(torch.int8) * 40 + pos * 3  # int8 stays int8: pos is a Python int
        return window, strided, x.masked_fill(mask, -1.0), scaled, torch.select(x, 1, -pos)

    compiled = torch.compile(f, backend="tpu")
    x = torch.randn(4, 8)
    compiled(x.to(TPU), 1)
    traces = _count("graph", "trace")
    for pos in range(2, 6):
        assert_same(compiled(x.to(TPU), pos), f(x, pos))
    assert _count("graph", "trace") == traces + 1


def test_an_int_input_a_rule_needs_as_a_value_falls_back_to_static():
    # tril's diagonal is a static argument of its jitted rule: each value gets its program.
    def f(x, n):
        return x.tril(n) + n

    compiled = torch.compile(f, backend="tpu")
    x = torch.randn(5, 5)
    fallbacks = _count("graph", "static_ints")
    for n in range(1, 5):
        assert_same(compiled(x.to(TPU), n), f(x, n))
    assert _count("graph", "static_ints") == fallbacks + 1
