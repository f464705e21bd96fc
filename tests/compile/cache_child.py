"""Run by test_compile_cache.py in fresh processes: compile a small model, print metrics.

``python cache_child.py`` runs it under torch.compile; ``python cache_child.py fused [batch]
[inverse]`` trains it two steps in fused eager (each step one program; a warm process loads
them from disk), with ``inverse`` through a matrix inverse (a LAPACK call on the CPU).
"""

import json
import sys

import torch

import torchtpu
import torchtpu.compile
from torchtpu.runtime import compile_cache

compile_cache.setup()  # until torchtpu/__init__.py does it on import
torchtpu.compile.register()

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
model.to("tpu:0")
if sys.argv[1:2] == ["fused"]:
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    torchtpu.set_eager_mode("fused")
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    for _ in range(2):
        out = model(torch.ones(batch, 8).to("tpu:0"))
        if "inverse" in sys.argv:
            out = torch.linalg.inv(out.T @ out + torch.eye(4, device="tpu:0"))
        out.sum().backward()
        opt.step()
        opt.zero_grad()
        out = out.detach().cpu()
else:
    compiled = torch.compile(model, backend="tpu")
    out = compiled(torch.ones(2, 8).to("tpu:0"))
    out.sum().backward()
m = torchtpu.metrics()
print(json.dumps({"cache": m["cache"], "graph": m["graph"], "compile": m["compile"],
                  "out": out.detach().cpu().tolist(), "dir": str(compile_cache.active_dir()),
                  "scipy_linalg": "scipy.linalg" in sys.modules}))
