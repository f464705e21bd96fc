"""torchtpu: PyTorch on XLA accelerators. ``import torchtpu`` registers the 'tpu' device."""

from . import config as _config

if _config.get("register_device"):
    from .runtime.platform import init as _init

    _init()

from . import backend as _backend  # noqa: E402
from .debug import metrics, reset_metrics  # noqa: E402
from .eager.modes import get_eager_mode, set_eager_mode  # noqa: E402
from .tensor import TpuTensor  # noqa: E402

if _config.get("register_device"):
    from .compile import register as _register_compile
    from .runtime.compile_cache import setup as _setup_compile_cache

    _backend.register()
    from .eager.meta_without_dynamo import defer_dynamo_import

    defer_dynamo_import()
    _setup_compile_cache()
    _register_compile()  # torch.compile(backend="tpu"); Dynamo itself loads only when used
    from .integrations import install as _install_integrations

    _install_integrations()


def sync() -> None:
    """Wait for every queued op (an explicit sync point)."""
    from .device_module import synchronize

    synchronize()


__all__ = ["TpuTensor", "get_eager_mode", "metrics", "reset_metrics", "set_eager_mode", "sync"]
