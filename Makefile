# Two commands on a fresh machine: `make train` (the main job) and `make test`.
PYTHON ?= python3
# Where torch is missing, take the CPU wheel this machine keeps on disk.
TORCH ?= torch==2.13.0

.PHONY: install train test test-slow test-gpu bench bench-offload lint

.install-stamp: pyproject.toml
	$(PYTHON) -c "import torch" 2>/dev/null || $(PYTHON) -m pip install "$(TORCH)"
	$(PYTHON) -m pip install -e ".[test]"
	touch .install-stamp

install: .install-stamp

train: .install-stamp
	$(PYTHON) examples/train_gpt.py --device tpu --compare-cpu

# One worker per core (pytest-xdist): the suite is compile-bound and each compile is one thread.
test: .install-stamp
	$(PYTHON) -m pytest -q -n logical

test-slow: .install-stamp
	$(PYTHON) -m pytest -q -n logical -m slow

# CUDA checks of the streaming trainer (a GPU machine); 'tpu' unregistered: see docs/offload.md
test-gpu: .install-stamp
	TORCHTPU_REGISTER_DEVICE=0 JAX_PLATFORMS=cpu $(PYTHON) -m pytest -q -m gpu tests/offload

bench: .install-stamp
	$(PYTHON) benchmarks/eager_overhead.py
	$(PYTHON) benchmarks/train_step.py

# For a CUDA machine: the streaming trainer against FSDP2 CPU offload.
bench-offload: .install-stamp
	$(PYTHON) benchmarks/offload_gpu.py

lint:
	$(PYTHON) -m ruff check torchtpu tests benchmarks examples
