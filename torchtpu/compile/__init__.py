"""The torch.compile backend "tpu": FX graph -> the lowering rules -> one jax program."""

from .registration import BACKEND_NAME, register

__all__ = ["BACKEND_NAME", "register"]
