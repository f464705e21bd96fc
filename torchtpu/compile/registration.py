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
    """
    import torch

    wrapper = torch._TorchCompileInductorWrapper
    inductor = wrapper.__call__

    def __call__(self, model_, inputs_, **kwargs):
        if _tpu_graph(model_, inputs_):
            return _lazy_backend(model_, inputs_)
        return inductor(self, model_, inputs_, **kwargs)

    wrapper.__call__ = __call__

    _when_loaded(_COMPILE_FX, _route_compile_fx)


_COMPILE_FX = "torch._inductor.compile_fx"


def _route_compile_fx(module) -> None:
    """Inductor's own entry point, ``compile_fx`` (``torch._inductor.compile`` calls it, and
    custom Dynamo backends call that: heavyball's optimizers compile their steps so), given a
    graph on 'tpu' picks inductor's Pallas code generator and fails with "No module named
    'torch_tpu'": such a graph is compiled by this backend too."""
    compile_fx = module.compile_fx

    @functools.wraps(compile_fx)
    def compile_tpu_graphs_here(model_, example_inputs_, *args, **kwargs):
        if _tpu_graph(model_, example_inputs_):
            return _lazy_backend(model_, example_inputs_)
        return compile_fx(model_, example_inputs_, *args, **kwargs)

    module.compile_fx = compile_tpu_graphs_here


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
        self._inner = inner
        self._then = then

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module) -> None:
        self._inner.exec_module(module)
        self._then(module)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, target: str = _TARGET, then=lambda module: _on_dynamo()):
        self._target = target
        self._then = then

    def find_spec(self, fullname, path, target=None):
        if fullname != self._target:
            return None
        sys.meta_path.remove(self)  # one shot; also keeps find_spec below from recursing
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader, self._then)
        return spec


def _when_loaded(name: str, then) -> None:
    """``then(module)`` now if module ``name`` is loaded, else right after it loads."""
    module = sys.modules.get(name)
    if module is not None:
        then(module)
    else:
        sys.meta_path.insert(0, _Finder(name, then))


def register() -> None:
    """Register the backend now if Dynamo is loaded, else as soon as it is."""
    if _TARGET in sys.modules and hasattr(sys.modules[_TARGET], "optimize"):
        _on_dynamo()
    elif not any(isinstance(f, _Finder) and f._target == _TARGET for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
