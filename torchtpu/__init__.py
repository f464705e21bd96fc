"""torchtpu: PyTorch on XLA accelerators. ``import torchtpu`` registers the 'tpu' device."""

from .runtime.platform import init as _init

_init()

from . import backend as _backend  # noqa: E402
from .debug import metrics, reset_metrics  # noqa: E402
from .eager.modes import get_eager_mode, set_eager_mode  # noqa: E402
from .tensor import TpuTensor  # noqa: E402

_backend.register()

from .compile import register as _register_compile  # noqa: E402
from .runtime.compile_cache import setup as _setup_compile_cache  # noqa: E402

_setup_compile_cache()
_register_compile()  # torch.compile(backend="tpu"); Dynamo itself loads only when used


def sync() -> None:
    """Wait for every queued op (an explicit sync point)."""
    from .device_module import synchronize

    synchronize()


__all__ = ["TpuTensor", "get_eager_mode", "metrics", "reset_metrics", "set_eager_mode", "sync"]
