"""Choosing the XLA platform and the device this process drives."""

from __future__ import annotations

import functools
import os

import jax
import torch

from .. import config

_PREFERENCE = ("tpu", "gpu", "cpu")
_MATMUL_PRECISION = {"highest": "highest", "high": "tensorfloat32", "medium": "bfloat16"}


@functools.cache
def init() -> jax.Device:
    """Configure JAX for PyTorch semantics and return the device to run on (cached)."""
    # int64 and float64 must stay 64-bit as in PyTorch; without x64 JAX silently narrows.
    jax.config.update("jax_enable_x64", True)
    # PyTorch computes float32 matmuls and convolutions in float32 unless asked otherwise
    # (torch.set_float32_matmul_precision); XLA on GPU/TPU would use TF32/bf16 passes.
    _follow_matmul_precision()
    # PyTorch rounds every bfloat16/float16 result; XLA would skip roundings inside a program,
    # so fused eager's and compiled programs would differ from strict eager's and CPU's.
    # (Read when the backend starts: a user who set the flag, or started JAX, keeps theirs.)
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_allow_excess_precision" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_allow_excess_precision=false".strip()
    wanted = config.get("platform")
    if wanted and wanted not in _PREFERENCE:
        raise ValueError(f"TORCHTPU_PLATFORM={wanted!r}: expected one of {_PREFERENCE}")
    if wanted == "cpu" or not wanted and jax.default_backend() == "cpu":
        # Per-op dispatch on XLA:CPU is ~2x cheaper synchronously; see docs/architecture.md.
        jax.config.update("jax_cpu_enable_async_dispatch", config.get("cpu_async"))
    try:
        device = jax.devices(wanted)[0] if wanted else jax.devices()[0]
    except RuntimeError as e:
        raise RuntimeError(f"torchtpu: no {wanted!r} platform available to JAX ({e})") from e
    jax.config.update("jax_default_device", device)
    return device


def _follow_matmul_precision() -> None:
    """JAX's default matmul precision as torch's, now and whenever the user changes it."""
    def copy() -> None:
        jax.config.update("jax_default_matmul_precision", _MATMUL_PRECISION[
            torch.get_float32_matmul_precision()])

    copy()
    setter = torch.set_float32_matmul_precision
    if getattr(setter, "_torchtpu", False):
        return

    @functools.wraps(setter)
    def set_float32_matmul_precision(precision: str) -> None:
        setter(precision)
        copy()

    set_float32_matmul_precision._torchtpu = True
    torch.set_float32_matmul_precision = set_float32_matmul_precision


def platform() -> str:
    return init().platform


def device_count() -> int:
    """Devices this process sees: one, which under torchrun answers to every local rank's
    index (``LOCAL_WORLD_SIZE`` of them), as each process sees the node's cuda devices and
    picks ``cuda:{local_rank}``."""
    local = os.environ.get("LOCAL_WORLD_SIZE", "")
    return int(local) if local.isdigit() and int(local) > 0 else 1


def tpu_is_the_accelerator() -> bool:
    """Whether ``torch.accelerator`` (and a device left unnamed) means tpu in this process."""
    accelerator = torch.accelerator.current_accelerator()
    return accelerator is not None and accelerator.type == "tpu"


def check_device_index(device) -> None:
    """Refuse a tpu index past ``device_count()``, as CUDA refuses an invalid ordinal, rather
    than placing the tensor on tpu:0 unasked."""
    if device is None:
        return
    index = device if isinstance(device, int) else torch.device(device).index
    count = device_count()
    if index is None or 0 <= index < count:
        return
    names = "tpu:0" if count == 1 else f"tpu:0 to tpu:{count - 1} (torchrun's LOCAL_WORLD_SIZE)"
    raise RuntimeError(f"torchtpu: invalid device index {index}: this process drives one "
                       f"device, named {names}. Launch one process per device instead.")
