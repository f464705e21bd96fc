"""Traced programs on disk, so a warm process skips JAX's tracing and lowering too.

JAX's persistent cache (compile_cache.py) finds an executable by its HLO: a process must
trace and lower a program before it can look it up, and for fused eager's programs (hundreds
of recorded ops) that is most of a warm first step. This store is keyed by what was recorded
instead: each op's executable, its static arguments and its inputs' shapes. It keeps

- programs, as ``jax.export``'s serialized StableHLO (not executables: XLA:CPU's serialized
  executables can lose kernels shared with a program loaded from the cache, docs/compile.md);
  compiling a loaded program still goes through JAX's persistent cache, so it loads, not
  compiles;
- the output shapes of each recorded op (one ``jax.eval_shape`` trace each, otherwise).

Keys carry a digest of torchtpu's own source, the platform and the flags that change compiled
code, so an edited lowering rule never meets a program traced from the old one. Entries are
checked and written like the compile cache's (``CheckedFileCache``): a damaged one is dropped
and rebuilt. The store lives beside the compile cache and is off when it is.
"""

from __future__ import annotations

import contextvars
import functools
import hashlib
import pickle
from collections.abc import Callable
from pathlib import Path

import jax
import numpy as np
import torch

from .. import config
from ..debug import counters as metrics
from . import compile_cache
from .compile_cache import CheckedFileCache
from .platform import platform

_MAX_SHAPES = 100_000  # op signatures kept; past it the file starts over (it is rewritten whole)
_stores: dict[Path, CheckedFileCache] = {}


class Unstable(Exception):
    """A value whose text does not identify it across processes (an object's id, an array)."""


_PLAIN = (type(None), bool, int, float, complex, str, torch.dtype, torch.layout,
          torch.memory_format, torch.device, np.dtype, type(Ellipsis))


def stable(value) -> str:
    """``value`` as text that identifies it in any process; raises Unstable otherwise."""
    if isinstance(value, _PLAIN):
        return repr(value)
    if isinstance(value, (tuple, list)):
        return type(value).__name__[0] + "(" + ",".join(stable(v) for v in value) + ")"
    if isinstance(value, slice):
        return f"slice({stable(value.start)},{stable(value.stop)},{stable(value.step)})"
    if isinstance(value, type) and value in (bool, int, float, complex):
        return value.__name__
    if isinstance(value, type) and issubclass(value, np.generic):
        return value.__name__  # a numpy scalar type (jnp.float32 and the like)
    raise Unstable(type(value).__name__)


@functools.cache
def _source_digest() -> str:
    """torchtpu's Python source: a rule edited without a version bump changes every key."""
    h = hashlib.sha256()
    package = Path(__file__).resolve().parents[1]
    for f in sorted(package.rglob("*.py")):
        h.update(str(f.relative_to(package)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def key(*parts: str) -> str:
    """A store key: ``parts`` plus everything else that shapes a traced program."""
    h = hashlib.sha256()
    for part in (_source_digest(), platform(), repr(config.compile_key()),
                 str(jax.config.jax_default_matmul_precision), *parts):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def _store() -> CheckedFileCache | None:
    root = compile_cache.active_dir()
    if root is None:
        return None
    store = _stores.get(root)
    if store is None:
        store = _stores[root] = CheckedFileCache(root / "fused", counter="fused_store")
    return store


def folder() -> Path | None:
    """The compile cache's folder this store lives in; None when it is off."""
    return compile_cache.active_dir()


def enabled() -> bool:
    return folder() is not None


def load_program(k: str) -> jax.export.Exported | None:
    store = _store()
    blob = store.get(k) if store is not None else None
    if blob is None:
        return None
    return jax.export.deserialize(bytearray(blob))


def jitted(exported: jax.export.Exported, donate_argnums: tuple) -> Callable:
    """A loaded program as a jitted function.

    JAX's lowering of an exported call initialises LAPACK for any CPU module, which imports
    scipy.linalg: 0.2-0.4 s, a third of a warm process's first step. Only a module with a
    LAPACK custom call needs it (without it, that module crashes the process), so a module
    without one is lowered past it."""
    fn = jax.jit(exported.call, donate_argnums=donate_argnums)
    module = exported.mlir_module_serialized
    if not _LAPACK_INIT_SKIPPABLE or any(name in module for name in _lapack_targets()):
        return fn

    def call(*args):
        token = _lapack_unneeded.set(True)
        try:
            return fn(*args)
        finally:
            _lapack_unneeded.reset(token)

    return call


_lapack_unneeded = contextvars.ContextVar("lapack_unneeded", default=False)


@functools.cache
def _lapack_targets() -> tuple[bytes, ...]:
    """The custom-call names jax's LAPACK set-up serves (lapack_sgetrf_ffi, ...,
    tridiagonal_solve_perturbed_ffi); a bare b"lapack" where jaxlib does not list them."""
    try:
        from jax._src.lib import lapack

        names = []
        for key, value in lapack._lapack.registrations().items():
            # {name: handler}, or {platform: [(name, handler, api_version), ...]}
            names += [t[0] for t in value] if isinstance(value, (list, tuple)) else [key]
        return tuple(name.encode() for name in names)
    except Exception:
        return (b"lapack",)


def _initialise_backends_when_needed() -> bool:
    """Wrap jax's exported-call backend initialisation so ``jitted`` can skip it; False
    where this jax has no such step (then every module initialises as jax does)."""
    from jax._src.export import _export

    ensure = getattr(_export, "_ensure_backends_initialized", None)
    if ensure is None:
        return False

    def ensure_when_needed(platforms):
        if not _lapack_unneeded.get():
            ensure(platforms)

    _export._ensure_backends_initialized = ensure_when_needed
    return True


_LAPACK_INIT_SKIPPABLE = _initialise_backends_when_needed()


def save_program(k: str, serialized: bytearray) -> None:
    store = _store()
    if store is not None:
        _put(store, k, bytes(serialized))


def _shapes_key() -> str:
    # An op's key names the op, not its rule's code: the source digest in this key is what
    # keeps an edited rule (one more output, say) from reading the old rule's shapes.
    return key("shapes")


def load_shapes() -> dict:
    """Every op signature's output shapes the store holds ({} when off or unreadable)."""
    store = _store()
    blob = store.get(_shapes_key()) if store is not None else None
    if blob is None:
        return {}
    try:
        return pickle.loads(blob)
    except Exception:  # written by a torchtpu whose pickled types differ: start over
        return {}


def save_shapes(new: dict) -> None:
    """Add ``new`` to the stored shapes (merged with what other processes wrote since)."""
    store = _store()
    if store is None or not new:
        return
    shapes = load_shapes()
    if len(shapes) + len(new) > _MAX_SHAPES:
        shapes = {}
    shapes.update(new)
    _put(store, _shapes_key(), pickle.dumps(shapes))


def _put(store: CheckedFileCache, k: str, value: bytes) -> None:
    try:
        store.put(k, value)
    except OSError:  # a full or read-only disk: this process still runs, the next traces
        metrics.count("cache", "fused_store_write_error")
