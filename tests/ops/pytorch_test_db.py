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

from torch.testing._internal.common_methods_invocations import op_db  # noqa: E402
from torch.testing._internal.common_modules import module_db  # noqa: E402

__all__ = ["module_db", "op_db"]
