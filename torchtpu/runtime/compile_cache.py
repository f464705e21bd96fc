"""The persistent compilation cache: a second process running the same model starts warm.

Built on JAX's persistent cache, so it covers every XLA program this process compiles: the
torch.compile graphs and the eager per-op executables alike. We add three things JAX's file
cache does not give:

- a directory per (jax, jaxlib, torch, torchtpu) version, so an upgrade never reads an
  entry another version wrote (JAX's own key covers the program and the XLA build);
- integrity: each entry is stored with its SHA-256; a corrupt or truncated entry is
  detected on read, deleted and recompiled (JAX alone would warn on every read, never
  replace it, and could hand a damaged executable to the runtime);
- atomic writes: an entry is written to a private temporary file and renamed into place,
  so processes writing the same entry at once each publish a whole file, never a mix.

Thresholds are zero, so small programs (every eager op) are cached too.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import tempfile
import warnings
from pathlib import Path

import jax

from .. import config
from ..debug import counters as metrics

_MAGIC = b"torchtpu-xla-cache-1\n"
_DIGEST = 32
_SUFFIX = "-cache"

_active: Path | None = None


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "dev"


def version_tag() -> str:
    """The versions an entry depends on, as a directory name."""
    import jaxlib
    import torch

    return (
        f"jax-{jax.__version__}_jaxlib-{jaxlib.__version__}_torch-{torch.__version__}"
        f"_torchtpu-{_version('torchtpu')}"
    ).replace("+", "-")


def default_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "torchtpu"


class CheckedFileCache:
    """JAX's cache interface (get/put by key) over files carrying their own checksum."""

    def __init__(self, path: Path, counter: str = "persistent"):
        self._path = path
        self._counter = counter  # metrics()["cache"] keys: "<counter>_hit", "_miss", ...
        path.mkdir(parents=True, exist_ok=True)

    def _file(self, key: str) -> Path:
        return self._path / f"{key}{_SUFFIX}"

    def get(self, key: str) -> bytes | None:
        f = self._file(key)
        try:
            data = f.read_bytes()
        except FileNotFoundError:
            metrics.count("cache", f"{self._counter}_miss")
            return None
        except OSError:
            metrics.count("cache", f"{self._counter}_miss")
            return None
        head = len(_MAGIC)
        payload = data[head + _DIGEST:]
        if (
            len(data) < head + _DIGEST
            or not data.startswith(_MAGIC)
            or hashlib.sha256(payload).digest() != data[head:head + _DIGEST]
        ):
            # Drop it, so the fresh compile that follows is written in its place.
            metrics.count("cache", f"{self._counter}_corrupt")
            f.unlink(missing_ok=True)
            return None
        metrics.count("cache", f"{self._counter}_hit")
        return payload

    def put(self, key: str, value: bytes) -> None:
        f = self._file(key)
        fd, tmp = tempfile.mkstemp(prefix=f".{key}.", suffix=".tmp", dir=self._path)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(_MAGIC + hashlib.sha256(value).digest() + value)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, f)  # atomic: readers see the old file or the whole new one
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        metrics.count("cache", f"{self._counter}_write")


def _install(cache: CheckedFileCache | None) -> bool:
    """Make JAX use ``cache``; False if this JAX's internals are not what we expect."""
    try:
        from jax._src import compilation_cache as cc
    except ImportError:
        return False
    if not hasattr(cc, "_cache_initialized_mutex") or not hasattr(cc, "reset_cache"):
        return False
    cc.reset_cache()
    with cc._cache_initialized_mutex:
        cc._cache = cache
        cc._cache_initialized = cache is not None
    return True


def setup() -> Path | None:
    """Turn the persistent cache on as configured (TORCHTPU_CACHE_DIR); returns its folder.

    ``TORCHTPU_CACHE_DIR`` unset: a per-user folder; set to a path: there; set empty: off.
    """
    global _active
    where = config.get("cache_dir")
    if not where:
        if _active is not None:
            jax.config.update("jax_compilation_cache_dir", None)
            _install(None)
        _active = None
        return None
    root = default_dir() if where == "auto" else Path(where).expanduser()
    path = root / version_tag()
    try:
        cache = CheckedFileCache(path)
    except OSError as e:
        # At import: nothing the user runs could recover from a raise here.
        metrics.count("cache", "persistent_unusable")
        warnings.warn(f"torchtpu: the compile cache folder {path} cannot be used ({e}); "
                      "running without a persistent cache. Set TORCHTPU_CACHE_DIR to a writable "
                      "folder, or to nothing to turn the cache off.", stacklevel=2)
        _active = None
        return None
    # JAX names the cache's own folder in every entry's key (for XLA:GPU's autotuning
    # cache): a cache moved, copied or reached through a symlink would never hit.
    try:
        jax.config.update("jax_persistent_cache_enable_xla_caches", "none")
    except (AttributeError, ValueError):  # a JAX without the option: nothing to turn off
        pass
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    if not _install(cache):
        # Plain JAX file cache: still warm starts, without our integrity checks.
        metrics.count("cache", "persistent_unchecked")
    _active = path
    return path


def active_dir() -> Path | None:
    """The folder in use, or None when the persistent cache is off."""
    return _active
