"""Switching between the strict and debug executors."""

from __future__ import annotations

import contextlib

from .. import config

MODES = ("strict", "debug", "fused")
_mode = "strict"


def get_eager_mode() -> str:
    return _mode


def _apply(mode: str) -> None:
    global _mode
    if mode not in MODES:
        raise ValueError(f"torchtpu: eager mode must be one of {MODES}, got {mode!r}")
    from . import fused
    from .dispatch import use_table

    if _mode == "fused" and mode != "fused":
        fused.disable()
    _mode = mode
    use_table(mode)
    if mode == "fused":
        fused.enable()


class set_eager_mode(contextlib.ContextDecorator):  # noqa: N801 (reads as a function)
    """Set the eager mode; also usable as ``with set_eager_mode("debug"):``."""

    def __init__(self, mode: str):
        self._previous = _mode
        _apply(mode)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _apply(self._previous)
        return False


def init_from_env() -> None:
    _apply(config.get("eager_mode"))
