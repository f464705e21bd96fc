"""Carrying an op's exception out of a C++ backward formula instead of aborting, and its
message out of TorchScript's interpreter.

When an op raised inside a C++ autograd formula (``SinBackward0`` calling ``aten.cos``), its
Python exception is still pending while the engine unwinds. The unwinding restores the
'tpu' stream through our Python device guard (``torch._C._acc.DeviceGuard``), whose call
into Python fails with that error pending; the failure happens inside a ``noexcept``
destructor, so the process aborted ("terminate called without an active exception").

The guard's ``type_`` therefore takes a pending exception off the indicator (keeping it
here), so the unwinding completes. PyTorch then reports "run_backward returned NULL without
setting an exception"; the wrapped ``_engine_run_backward`` replaces that SystemError with
the op's own exception.
"""

from __future__ import annotations

import functools
import operator
import re
import threading

import torch

# A C callable that CPython never specialises into an unchecked call: calling it with an
# exception pending raises SystemError whose __cause__ is that exception.
_probe = operator.attrgetter("real")
_lock = threading.Lock()
_taken: list[BaseException] = []


def take_pending_exception() -> None:
    """Move a pending Python exception off the error indicator, keeping it for the caller."""
    try:
        _probe(0)
    except SystemError as e:
        if e.__cause__ is not None:
            with _lock:
                _taken.append(e.__cause__)


def _pop_taken() -> BaseException | None:
    with _lock:
        err = _taken[0] if _taken else None
        _taken.clear()
    return err


def _reraising_op_errors(run_backward):
    @functools.wraps(run_backward)
    def run(*args, **kwargs):
        _pop_taken()
        if len(args) > 1:
            args = (args[0], _check_root_gradients(args[0], args[1]), *args[2:])
        try:
            return run_backward(*args, **kwargs)
        except SystemError:
            err = _pop_taken()
            if err is None:
                raise
            raise err.with_traceback(err.__traceback__) from None
        except RuntimeError as e:
            named = _TYPE_NAME.sub(r"[torch.tpu.\1Tensor ", str(e))
            if named == str(e):
                raise
            raise type(e)(named).with_traceback(e.__traceback__) from None

    run._torchtpu_wrapped = True
    return run


# The engine names a saved tensor's type as PyTorch's C++ names a PrivateUse1 one
# ("[tpuFloatType [3]]"); cuda's read "[torch.cuda.FloatTensor [3]]", as t.type() says.
_TYPE_NAME = re.compile(r"\[tpu(\w+)Type ")


def _check_root_gradients(outputs, grads) -> tuple:
    """The engine's device check on the gradients handed to ``backward``, which it skips for
    a Python-dispatch tensor on either side: a CPU gradient for a tpu output gave a tpu leaf a
    CPU .grad, a tpu one for a CPU output failed an internal assert on streams. A 0-d one
    moves, as the engine moves it; the gradients, so moved."""
    grads = list(grads)
    for i, (out, grad) in enumerate(zip(outputs, grads, strict=False)):
        if (not isinstance(grad, torch.Tensor) or grad.device == out.device
                or "tpu" not in (out.device.type, grad.device.type)):
            continue
        if grad.dim():
            raise RuntimeError(f"invalid gradient at index {i} - expected device {out.device} "
                               f"but got {grad.device}")
        if grad.device.type == "tpu":  # (a CPU one the engine moves itself)
            grads[i] = grad.to(out.device)
    return tuple(grads)


def _with_op_messages(module_call):
    """TorchScript's interpreter reports an op's Python exception without its message
    ("...\nRuntimeError: "): the message is put back, as CPU's kernels' errors read."""
    from .tensor import op_errors

    @functools.wraps(module_call)
    def call(self, *args, **kwargs):
        op_errors.last = None
        try:
            return module_call(self, *args, **kwargs)
        except RuntimeError as e:
            message, op_errors.last = getattr(op_errors, "last", None), None
            text = str(e).rstrip()
            if not message or not text.endswith("Error:"):
                raise
            raise RuntimeError(f"{text} {message}") from e

    call._torchtpu_wrapped = True
    return call


def install() -> None:
    """Wrap the autograd engine's entry point (``backward`` and ``grad`` both call it), and
    TorchScript modules' calls."""
    import torch.autograd.graph as graph

    script_call = torch.jit.ScriptModule.__call__
    if not getattr(script_call, "_torchtpu_wrapped", False):
        torch.jit.ScriptModule.__call__ = _with_op_messages(script_call)

    if getattr(graph._engine_run_backward, "_torchtpu_wrapped", False):
        return
    run = _reraising_op_errors(graph._engine_run_backward)
    graph._engine_run_backward = run
    torch.autograd._engine_run_backward = run
