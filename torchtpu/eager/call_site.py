"""Where in the user's code an op was called: the innermost frame outside torchtpu, torch and
jax. Debug eager names it in every error; fused eager and compiled graphs name it in the value
errors they raise later, at a sync point, where the traceback no longer shows it."""

from __future__ import annotations

import os
import re
import sys

import torch

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SKIP_PREFIXES = (_PACKAGE, os.path.dirname(torch.__file__))
_SKIP_PARTS = ("/jax/", "/jaxlib/", "<frozen")
_FRAME_LINE = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def user_line() -> str:
    """``file:line (in function)`` of the user's innermost frame; walks frame objects, not
    ``traceback.extract_stack`` (which reads every frame's source)."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith(_SKIP_PREFIXES) and not any(s in name for s in _SKIP_PARTS):
            return f"{name}:{frame.f_lineno} (in {frame.f_code.co_name})"
        frame = frame.f_back
    return "<unknown>"


def traced_line(stack_trace: str | None) -> str | None:
    """The user's line in a traced graph node's ``stack_trace`` (its innermost frame)."""
    found = _FRAME_LINE.findall(stack_trace or "")
    if not found:
        return None
    file, line, function = found[-1]
    return f"{file}:{line} (in {function})"
