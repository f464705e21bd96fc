"""PyTorch's Python meta kernels without importing torch._dynamo before it is in use.

Strict eager runs PyTorch's meta kernel of each op it compiles (for its errors and output
dtypes). Many are Python references wrapped by ``torch._compile._disable_dynamo``, whose first
call imports torch._dynamo (and torch.distributed.tensor with it) to build the disabling
wrapper: ~2 s on the first op of every process, cold compile cache or warm, for a wrapper that
does nothing until Dynamo runs. Here each such wrapper calls its function directly until
torch._dynamo has been imported (nothing can be compiling before), then lets PyTorch's own
wrapper build and cache the disabling one as it would have.
"""

from __future__ import annotations

import sys

import torch

_ATTRIBUTE = "__dynamo_disable"  # where _disable_dynamo's wrapper caches the disabled function


def defer_dynamo_import() -> int:
    """Install the deferral on every meta and decomposition function's ``_disable_dynamo``
    wrapper; how many were found (none where this torch's wrapper works otherwise)."""
    probe = torch._compile._disable_dynamo(lambda: None)
    code = probe.__code__
    if _ATTRIBUTE not in code.co_names or not {"fn", "recursive"} <= set(code.co_freevars):
        return 0
    from torch._decomp import global_decomposition_table

    found = 0
    for table in global_decomposition_table.values():
        for kernel in list(table.values()):
            found += _defer_in(kernel, code)
    return found


def _defer_in(kernel, code) -> int:
    # The wrapper sits under the kernel's own decorators (out_wrapper, the dtype promotion
    # wrappers), each holding the function it wraps in a closure cell named fn.
    found, todo = 0, [kernel]
    while todo:
        f = todo.pop()
        c = getattr(f, "__code__", None)
        if c is None or not f.__closure__:
            continue
        cells = dict(zip(c.co_freevars, f.__closure__, strict=True))
        fn = _contents(cells.get("fn"))
        if c is code:
            if getattr(fn, _ATTRIBUTE, None) is None:
                setattr(fn, _ATTRIBUTE, _until_dynamo(f, fn))
                found += 1
        elif callable(fn):
            todo.append(fn)
    return found


def _contents(cell):
    try:
        return None if cell is None else cell.cell_contents
    except ValueError:  # (an empty cell)
        return None


def _until_dynamo(wrapper, fn):
    def call(*args, **kwargs):
        if hasattr(sys.modules.get("torch._dynamo"), "disable"):
            fn.__dict__.pop(_ATTRIBUTE, None)  # PyTorch's wrapper builds the disabled one now
            return wrapper(*args, **kwargs)
        return fn(*args, **kwargs)

    return call
