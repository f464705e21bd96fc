"""torchtpu: PyTorch on XLA accelerators."""
