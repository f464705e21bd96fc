"""Registering the "tpu" torch.compile backend without importing Dynamo up front.

``import torch._dynamo`` costs about a second, and most programs never call torch.compile,
so ``import torchtpu`` must not pay for it. The backend registry lives inside Dynamo, so
we register the moment Dynamo is imported by anyone (torch.compile imports it before it
looks the backend up): an import hook waits for ``torch._dynamo`` and runs ``_on_dynamo``
right after the module finishes loading. If Dynamo is already loaded we register at once.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import sys

BACKEND_NAME = "tpu"
_TARGET = "torch._dynamo"
_done = False


def _on_dynamo() -> None:
    global _done
    if _done:
        return
    _done = True
    from torch._dynamo.backends.registry import _COMPILER_FNS, register_backend

    from .dynamo_tensor import install

    install()
    if BACKEND_NAME not in _COMPILER_FNS:
        register_backend(compiler_fn=_lazy_backend, name=BACKEND_NAME)
    _route_default_backend()


def _route_default_backend() -> None:
    """``torch.compile(model)`` without a backend means inductor, which cannot compile a
    graph on 'tpu' (it fails with "Expected all tensors to be on the same device, but found
    at least two devices, tpu:0 and tpu:0!"). A graph with inputs on 'tpu' is compiled by
    this backend instead, so training scripts that compile by default run unchanged; so is
    one that makes tensors on 'tpu' (``torch.arange(n, device="tpu")``, ``x.to("tpu")``).
    (``torch._inductor.compile`` is routed likewise once inductor is loaded: _on_inductor.)"""
    import torch

    wrapper = torch._TorchCompileInductorWrapper
    inductor = wrapper.__call__

    def __call__(self, model_, inputs_, **kwargs):
        if _tpu_graph(model_, inputs_):
            return _lazy_backend(model_, inputs_)
        return inductor(self, model_, inputs_, **kwargs)

    wrapper.__call__ = __call__


def _on_inductor() -> None:
    """``torch._inductor.compile``, inductor's entry point for a graph captured elsewhere,
    which custom Dynamo backends call (heavyball's optimizers compile their steps so): on a
    tpu graph inductor picks its Pallas code generator and fails with "No module named
    'torch_tpu'"; a tpu graph is compiled by this backend instead. Run once inductor's
    package has finished loading (importing it first imports Dynamo half-way through)."""
    inductor = sys.modules["torch._inductor"]
    inductor_compile = inductor.compile

    @functools.wraps(inductor_compile)
    def compile_tpu_graphs_here(gm, example_inputs, options=None):
        if _tpu_graph(gm, example_inputs):
            return _lazy_backend(gm, example_inputs)
        return inductor_compile(gm, example_inputs, options)

    inductor.compile = compile_tpu_graphs_here


def _tpu_graph(gm, inputs) -> bool:
    return any(_on_tpu(x) for x in inputs) or any(
        _on_tpu(node.meta.get("example_value", node.meta.get("val")))
        for node in gm.graph.nodes)


def _on_tpu(value) -> bool:
    import torch

    return isinstance(value, torch.Tensor) and value.device.type == BACKEND_NAME


def _lazy_backend(gm, example_inputs, **kwargs):
    # The backend module imports AOTAutograd; load it on the first compile, not at import.
    from .backend import tpu_backend

    return tpu_backend(gm, example_inputs, **kwargs)


_lazy_backend.__name__ = "tpu"


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader, then):
        self._inner, self._then = inner, then

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module) -> None:
        self._inner.exec_module(module)
        self._then()


# Modules waited for (name -> what runs once it has loaded), and the attribute that shows
# one has finished loading.
_pending: dict = {}
_LOADED_MARK = {_TARGET: "optimize", "torch._inductor": "compile"}


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        then = _pending.pop(fullname, None)
        if then is None:
            return None
        if not _pending:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)  # (no longer pending: no recursion here)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader, then)
        return spec


def register() -> None:
    """Register the backend now if Dynamo is loaded, else as soon as it is (and route
    inductor's graph entry point once inductor is)."""
    for name, then in ((_TARGET, _on_dynamo), ("torch._inductor", _on_inductor)):
        module = sys.modules.get(name)
        if module is not None and hasattr(module, _LOADED_MARK[name]):
            then()
        elif module is None:
            _pending[name] = then
    if _pending and not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
