"""Running compiled functions: now (strict eager) or recorded for later (fused eager).

Every jitted function the package calls outside a rule is an ``Executable``: calling it runs
it at once, unless a recorder is installed (fused eager), which records the call and returns
pending values instead.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable

import jax
import torch

_recorder: Callable | None = None
_flush: Callable = lambda target=None: None


class Pending:
    """A value fused eager has recorded but not computed yet; it looks like an array's
    abstract value (shape, dtype) and computes the whole recorded program when forced."""

    __slots__ = ("shape", "dtype", "src", "array", "error", "__weakref__")
    weak_type = False

    def __init__(self, shape: tuple, dtype, src):
        self.shape = shape
        self.dtype = dtype
        self.src = src  # (node index, output index) in the current trace
        self.array = None
        self.error = None  # what its op raised, when the program that held it failed

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def force(self) -> jax.Array:
        if self.array is None:
            if self.error is None:
                _flush(self)
            if self.error is not None:
                raise self.error.with_traceback(None)
        return self.array

    def __array__(self, dtype=None, copy=None):
        import numpy as np

        out = np.asarray(self.force())
        return out if dtype is None else out.astype(dtype)

    def __repr__(self) -> str:
        state = ("computed" if self.array is not None else "pending" if self.error is None
                 else f"its op failed: {type(self.error).__name__}")
        return f"Pending({self.dtype}{list(self.shape)}, {state})"


class Executable:
    """A jitted function plus which of its arguments are static (compile-time) values."""

    __slots__ = ("jitted", "static_argnums", "static_argnames", "name", "key", "is_view",
                 "_fn", "_by_default_dtype")

    def __init__(self, fn: Callable, static_argnums=(), static_argnames=(), jit: bool = True,
                 key: str | None = None, is_view: bool = False):
        self.static_argnums = tuple(static_argnums)
        # Computes a view's value (a transpose, a slice): as cheap to redo as to keep.
        self.is_view = is_view
        self.static_argnames = tuple(static_argnames)
        self._fn = fn
        self._by_default_dtype: dict | None = {} if jit else None
        self.jitted = self._jitted_for_default_dtype if jit else fn
        self.name = getattr(fn, "__name__", "fn")
        # What names this executable in any process (fused eager's program store keys on
        # it); None for a lambda or a closure, whose name does not say what it computes.
        qualname = getattr(fn, "__qualname__", "<lambda>")
        if key is None and "<" not in qualname:
            key = f"{fn.__module__}.{qualname}"
        self.key = key

    def __call__(self, *args, **kwargs):
        if _recorder is not None:
            return _recorder(self, args, kwargs)
        return self.jitted(*args, **kwargs)

    def _jitted_for_default_dtype(self, *args, **kwargs):
        jitted = self._by_default_dtype.get(torch.get_default_dtype()) or self.current()
        return jitted(*args, **kwargs)

    def current(self) -> Callable:
        """The jitted function for torch's default dtype now. Rules read it while jax traces
        them (the float result of integer inputs, a factory without a dtype), and jax's
        cache does not key on it: one jitted function per default dtype."""
        if self._by_default_dtype is None:
            return self._fn
        dtype = torch.get_default_dtype()
        jitted = self._by_default_dtype.get(dtype)
        if jitted is None:
            # (jax caches traces by function: each dtype's jit gets a function of its own)
            jitted = self._by_default_dtype[dtype] = jax.jit(
                functools.wraps(self._fn)(lambda *a, **k: self._fn(*a, **k)),
                static_argnums=self.static_argnums, static_argnames=self.static_argnames)
        return jitted

    def __repr__(self) -> str:
        return f"Executable({self.name})"


def executable(static_argnums=(), static_argnames=()) -> Callable[[Callable], Executable]:
    """Decorator form: ``@executable(static_argnums=(1,))``."""
    return lambda fn: Executable(fn, static_argnums, static_argnames)


def set_recorder(recorder: Callable | None, flush: Callable | None = None) -> None:
    """Install (or with None, remove) the fused-eager recorder and its flush, which takes the
    pending value being forced (None: everything)."""
    global _recorder, _flush
    _recorder = recorder
    _flush = flush or (lambda target=None: None)


def refuse_in_forked_child(raise_error: Callable) -> None:
    """After os.fork(), in the child: computing what fused eager recorded before the fork (a
    synchronize, a value read) calls ``raise_error`` instead of waiting on the parent's
    runtime forever."""
    global _recorder, _flush
    _flush = raise_error
    if _recorder is not None:
        _recorder = raise_error


@contextlib.contextmanager
def unrecorded():
    """Executables called inside a jax trace (a compiled graph's program) run on its traced
    values: fused eager's recorder would take a tracer for an array and record it."""
    global _recorder
    saved, _recorder = _recorder, None
    try:
        yield
    finally:
        _recorder = saved


def flush_pending() -> None:
    """Compute everything fused eager has recorded (a no-op in the other modes)."""
    _flush()


def concrete(x):
    """``x`` as a jax.Array: a pending value is computed (a sync point)."""
    return x.force() if type(x) is Pending else x


def recording() -> bool:
    return _recorder is not None
