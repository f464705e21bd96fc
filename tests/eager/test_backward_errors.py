"""An op that fails inside a C++ backward formula raises its error; the process lives on."""

from __future__ import annotations

import subprocess
import sys
import textwrap

_CHILD = textwrap.dedent("""
    import torch, torchtpu
    from torchtpu.eager import dispatch

    def fail(args, kwargs):
        raise RuntimeError("cos failed on purpose")

    for mode in ("strict", "debug", "fused"):
        torchtpu.set_eager_mode(mode)
        x = torch.linspace(-1, 1, 5, device="tpu", requires_grad=True)
        table = dispatch._TABLES[mode]
        saved = table.get(torch.ops.aten.cos.default)
        table[torch.ops.aten.cos.default] = fail   # sin's C++ backward calls aten.cos
        for run in (lambda: x.sin().sum().backward(),
                    lambda: torch.autograd.grad(x.sin().sum(), x)):
            try:
                run()
            except RuntimeError as e:
                assert "cos failed on purpose" in str(e), str(e)
            else:
                raise AssertionError("the backward error was swallowed")
        if saved is None:
            del table[torch.ops.aten.cos.default]
        else:
            table[torch.ops.aten.cos.default] = saved
        x.grad = None
        x.sin().sum().backward()
        torch.testing.assert_close(x.grad.cpu(), x.detach().cpu().cos())
        print(mode, "ok")
""")


def test_error_in_cpp_backward_formula_raises_and_autograd_keeps_working():
    child = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True,
                           timeout=300)
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout.split() == ["strict", "ok", "debug", "ok", "fused", "ok"]
