"""Debug eager: synchronous, and every error names the ATen op and the user's line."""

from __future__ import annotations

from .call_site import user_line
from .dispatch import block
from .fallback import describe

# Errors raised inside backward() can reach the user as a SystemError without a message;
# the last attributed error is kept here so it is never lost.
last_error: BaseException | None = None


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
                f"at {user_line()}"
            )
            try:
                err = type(e)(msg)
            except Exception:
                err = RuntimeError(msg)
            err._torchtpu_attributed = True
            last_error = err
            raise err from e

    return run
