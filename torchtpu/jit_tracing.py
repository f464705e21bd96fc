"""``torch.jit.trace`` over tpu tensors.

The tracer records an op before it reaches torchtpu, then runs it with the trace still
active: every ``.shape`` read inside (a meta kernel's checks, our own bookkeeping) would be
a traced value, and a meta kernel's ``torch._check(weight.shape[1] * groups == ...)`` then
fails. So an op runs with the trace suspended. A few ops the tracer leaves unrecorded, to
record what CPU's kernel calls instead (``convolution`` calls ``_convolution``); torchtpu
calls nothing further, so it records those itself.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

aten = torch.ops.aten

_TRACER = torch._C._parse_dispatch_key("Tracer")  # not in Python's DispatchKey enum
# PyTorch's DONT_RECORD_TRACE ops that reach a backend's kernel themselves.
_UNRECORDED = {aten.convolution.default, aten.conv_tbc.default}


def _set_state(state) -> None:
    # Inside an op the tracer's key is excluded, and PyTorch refuses to change the state then.
    with torch._C._SetExcludeDispatchKeyGuard(_TRACER, False):
        torch._C._set_tracing_state(state)


def run_traced(run: Callable, func, args, kwargs, state):
    """``run(func, args, kwargs)`` with ``state``, the active trace, suspended."""
    _set_state(None)
    try:
        out = run(func, args, kwargs)
    finally:
        _set_state(state)
    if func in _UNRECORDED:
        _record(state, func, args, kwargs, out)
    return out


def _record(state, func, args, kwargs, out: torch.Tensor) -> None:
    graph = state.graph()
    schema = func._schema.arguments
    args = [*args, *(kwargs.get(a.name, a.default_value) for a in schema[len(args):])]
    inputs = [torch._C._get_value_trace(a) if isinstance(a, torch.Tensor)
              else graph.insertConstant(a) for a in args]
    value = graph.insert(str(func._schema.name), inputs)
    value.setType(torch._C.TensorType.create_from_tensor(out))
    torch._C._set_value_trace(out, value)
