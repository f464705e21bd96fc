"""Debug eager: synchronous, and every error names the ATen op and the user's line."""

from __future__ import annotations

import os
import traceback

import torch

from .dispatch import block
from .fallback import describe

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SKIP = (_PACKAGE, os.path.dirname(torch.__file__), "/jax/", "/jaxlib/", "<frozen")

# Errors raised inside backward() can reach the user as a SystemError without a message;
# the last attributed error is kept here so it is never lost.
last_error: BaseException | None = None


def user_frame() -> str:
    """The innermost stack frame outside torchtpu, torch and jax: the user's line."""
    for frame in reversed(traceback.extract_stack()):
        if not frame.filename.startswith(_SKIP) and not any(s in frame.filename for s in _SKIP):
            return f"{frame.filename}:{frame.lineno} (in {frame.name})"
    return "<unknown>"


def attributed(func, inner):
    def run(args, kwargs):
        global last_error
        try:
            out = inner(args, kwargs)
            block(out)
            return out
        except Exception as e:
            if getattr(e, "_torchtpu_attributed", False):
                raise
            msg = (
                f"{e}\n[torchtpu debug] while running {func} on ({describe(args, kwargs)}) "
                f"at {user_frame()}"
            )
            try:
                err = type(e)(msg)
            except Exception:
                err = RuntimeError(msg)
            err._torchtpu_attributed = True
            last_error = err
            raise err from e

    return run
