"""The eager executors: strict (asynchronous per-op, the default) and debug (synchronous)."""

from .modes import get_eager_mode, set_eager_mode

__all__ = ["get_eager_mode", "set_eager_mode"]
