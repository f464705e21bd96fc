"""Run by test_compile_cache.py in fresh processes: compile a small model, print metrics."""

import json

import torch

import torchtpu
import torchtpu.compile
from torchtpu.runtime import compile_cache

compile_cache.setup()  # until torchtpu/__init__.py does it on import
torchtpu.compile.register()

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
model.to("tpu:0")
compiled = torch.compile(model, backend="tpu")
out = compiled(torch.ones(2, 8).to("tpu:0"))
out.sum().backward()
m = torchtpu.metrics()
print(json.dumps({"cache": m["cache"], "graph": m["graph"], "out": out.detach().cpu().tolist(),
                  "dir": str(compile_cache.active_dir())}))
