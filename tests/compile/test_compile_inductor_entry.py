"""Inductor's own entry points reached with a graph on 'tpu' compile it with the tpu backend
(inductor would pick its Pallas code generator for a device named 'tpu', which needs Google's
torch_tpu). torch.compile with no backend is covered in test_compile_backend.py."""

from __future__ import annotations

import torch
from compile_testlib import count as _count
from compile_testlib import fresh_dynamo  # noqa: F401  (autouse fixture)
from conftest import TPU, assert_same


def _through_inductor_compile(gm, example_inputs):
    # A custom backend as heavyball's: it tunes inductor, then hands it the Dynamo graph.
    import torch._inductor as inductor

    return inductor.compile(gm, example_inputs, options={"max_autotune": False})


def test_a_custom_backend_calling_inductor_compile_runs_a_tpu_graph():
    def step(p, g, lr):
        p.add_(g * g.sign(), alpha=-lr)
        return p.square().sum()

    p, g = torch.randn(5, 3), torch.randn(5, 3)
    expected_p = p.clone()
    expected = step(expected_p, g, 0.1)
    pt = p.to(TPU)
    traces = _count("graph", "trace")
    out = torch.compile(step, backend=_through_inductor_compile, fullgraph=True)(
        pt, g.to(TPU), 0.1)
    assert _count("graph", "trace") > traces
    assert_same(out, expected)
    assert_same(pt, expected_p)


def test_a_cpu_graph_still_goes_to_inductor(monkeypatch):
    import torch._inductor.compile_fx as compile_fx

    seen = []
    monkeypatch.setattr(compile_fx, "compile_fx",
                        lambda gm, inputs, **kw: seen.append(gm) or gm.forward)
    f = torch.compile(lambda x: x * 2, backend=_through_inductor_compile)
    assert_same(f(torch.ones(3)), torch.full((3,), 2.0))
    assert len(seen) == 1
