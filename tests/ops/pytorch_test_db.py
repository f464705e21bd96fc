"""Import PyTorch's test databases (OpInfo, ModuleInfo) without its test-only dependencies."""

from __future__ import annotations

import sys
import types
import unittest

if "expecttest" not in sys.modules:
    try:
        import expecttest  # noqa: F401
    except ImportError:
        # torch.testing._internal imports expecttest (a test-only dependency of PyTorch) for
        # its TestCase base class, which our sweeps never use.
        _shim = types.ModuleType("expecttest")
        _shim.TestCase = unittest.TestCase
        _shim.ACCEPT = False
        sys.modules["expecttest"] = _shim

from torch.testing._internal import common_utils  # noqa: E402
from torch.testing._internal.common_methods_invocations import op_db  # noqa: E402
from torch.testing._internal.common_modules import module_db  # noqa: E402


def _extract_test_fn():
    """common_utils.extract_test_fn without inspect.stack(), which reads the source lines of
    every frame: called for each sample_inputs/error_inputs iterator, it was ~0.4 s of every
    OpInfo test under pytest (most of their time). Same walk, same answer."""
    try:
        frame = sys._getframe(1)
        while frame is not None:
            self_val = frame.f_locals.get("self")
            if isinstance(self_val, unittest.TestCase):
                *_, cls_name, test_name = self_val.id().rsplit(".", 2)
                if cls_name == type(self_val).__name__ and test_name.startswith("test"):
                    return getattr(self_val, test_name).__func__
            frame = frame.f_back
    except Exception:  # (as upstream's: no test function found)
        pass
    return None


common_utils.extract_test_fn = _extract_test_fn

__all__ = ["module_db", "op_db"]
