"""Libraries that pick their device for themselves: told about 'tpu' as they would find cuda."""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys
from collections.abc import Callable

import torch

from . import integrations_lightning


def _accelerate_finds_tpu(state) -> None:
    # accelerate finds cuda by itself but no PrivateUse1 device: without this the Hugging
    # Face Trainer (whose own device is already tpu, through torch.accelerator) has its
    # model and batches prepared on the CPU. cpu=True (use_cpu) still means the CPU.
    cls = state.PartialState
    found = cls.default_device.fget

    def default_device(self) -> torch.device:
        device = found(self)
        return torch.device("tpu", 0) if device.type == "cpu" else device

    cls.default_device = property(default_device, doc=cls.default_device.__doc__)
    _accelerate_runs_tpu_processes(state)


def _accelerate_runs_tpu_processes(state) -> None:
    # Under torchrun accelerate knows a distributed setup only for the devices it names; for
    # tpu it ran each process alone (the Trainer's NOT_PARALLEL: ranks trained apart). Several
    # tpu processes are run as it runs CPU processes (MULTI_CPU: DDP without device ids),
    # over the "tpu" process group, on the tpu device.
    cls = state.PartialState
    prepare, place = cls._prepare_backend, cls.set_device

    def _prepare_backend(self, cpu=False, sagemaker_dp=False, backend=None):
        chosen, kind = prepare(self, cpu, sagemaker_dp, backend)
        if kind is state.DistributedType.NO and not cpu and _several_processes():
            return backend or "tpu", state.DistributedType.MULTI_CPU
        return chosen, kind

    def set_device(self):
        place(self)
        if self.distributed_type is state.DistributedType.MULTI_CPU and not self._cpu:
            self.device = torch.device("tpu", 0)

    cls._prepare_backend, cls.set_device = _prepare_backend, set_device


def _several_processes() -> bool:
    return int(os.environ.get("LOCAL_RANK", -1)) != -1 or int(os.environ.get("WORLD_SIZE", 1)) > 1


def _transformers_asks_again(import_utils) -> None:
    # transformers caches whether flex attention works (lru_cache) as its models import;
    # asked before torchtpu was, it said yes for a CPU-only process, and would then compile
    # flex_attention with inductor on tpu tensors.
    check = getattr(import_utils, "is_torch_flex_attn_available", None)
    if check is not None and hasattr(check, "cache_clear"):
        check.cache_clear()


def _device_generic_tests_find_tpu() -> None:
    # PyTorch's device-generic tests (instantiate_device_type_tests) note the device types
    # there are, and the native ones, as their modules import: imported before torchtpu (as
    # isort orders a test file's imports), they knew no tpu and instantiated no tpu tests.
    name = torch._C._get_privateuse1_backend_name()
    utils = sys.modules.get("torch.testing._internal.common_utils")
    if utils is not None and hasattr(utils, "NATIVE_DEVICES"):
        if name not in utils.NATIVE_DEVICES:
            utils.NATIVE_DEVICES += (name,)
        utils.TEST_PRIVATEUSE1, utils.TEST_PRIVATEUSE1_DEVICE_TYPE = True, name
        utils.custom_device_mod = getattr(torch, name)
    device_type = sys.modules.get("torch.testing._internal.common_device_type")
    if device_type is not None and hasattr(device_type, "device_type_test_bases"):
        device_type.NATIVE_DEVICES = utils.NATIVE_DEVICES
        if device_type.PrivateUse1TestBase not in device_type.device_type_test_bases:
            device_type.device_type_test_bases.append(device_type.PrivateUse1TestBase)


class _AfterImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Runs ``then(module)`` once a module is imported (at once if it is already)."""

    def __init__(self, name: str, then: Callable) -> None:
        self.name, self.then, self.loader = name, then, None

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name or self.loader is not None:
            return None
        sys.meta_path.remove(self)  # the real finders, once
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        self.loader, spec.loader = spec.loader, self
        return spec

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        # the module keeps its own loader (source lookups, reloads)
        module.__loader__ = module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        sys.meta_path.remove(self)
        self.then(module)


def _after_import(name: str, then: Callable) -> None:
    if name in sys.modules:
        then(sys.modules[name])
    else:
        sys.meta_path.insert(0, _AfterImport(name, then))


def install() -> None:
    _after_import("accelerate.state", _accelerate_finds_tpu)
    integrations_lightning.install(_after_import)
    if "transformers.utils.import_utils" in sys.modules:
        _transformers_asks_again(sys.modules["transformers.utils.import_utils"])
    _device_generic_tests_find_tpu()
