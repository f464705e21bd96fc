"""Lightning told about tpu as it knows torch_xla's: ``accelerator="tpu"`` (and "auto", whose
CPU answer becomes tpu, as accelerate's default device does) runs on torchtpu's device, with
a strategy on that device and mixed precision that autocasts there; several processes under
torchrun get DDP, as on CPU. Without this Lightning's "tpu" is torch_xla's (XLAAccelerator,
which cannot start without it), and an accelerator of one's own trained on the CPU (the
single-device strategy Lightning picks for anything not cuda or mps) under a cuda autocast.
Both the ``lightning`` package and the standalone ``pytorch_lightning`` / ``lightning_fabric``
are taught, once they are imported."""

from __future__ import annotations

import functools
import importlib.util
import sys
import warnings
from collections.abc import Callable

import torch

# (Fabric's connector module, the Trainer's) in each distribution of the same code
_PACKAGES = (("lightning.fabric", "lightning.pytorch"), ("lightning_fabric", "pytorch_lightning"))


def _device_indices(devices) -> list[int]:
    """The tpu indices ``devices`` asks for, as Lightning reads it for cuda (an int, -1 for
    all, "0,1" or a list); a process sees one tpu (``LOCAL_WORLD_SIZE`` under torchrun)."""
    count = torch.tpu.device_count()
    asked = devices
    if isinstance(devices, str):
        devices = devices.strip()
        devices = ([int(i) for i in devices.split(",") if i.strip()] if "," in devices
                   else int(devices))
    if isinstance(devices, int):
        devices = list(range(count if devices == -1 else devices))
    indices = [int(i) for i in devices]
    if not indices or any(not 0 <= i < count for i in indices):
        raise ValueError(f"`devices={asked!r}` asks for tpu devices {indices}, but this process"
                         f" has {count}: {list(range(count))}.")
    return indices


def _accelerator(base: type, registry) -> type:
    class TPUAccelerator(base):
        """torchtpu's tpu device, one per process (several under torchrun, as cuda's)."""

        def setup_device(self, device: torch.device) -> None:
            if device.type != "tpu":
                raise ValueError(f"Device should be tpu, got {device} instead.")
            torch.tpu.set_device(device)

        def teardown(self) -> None:
            pass

        @staticmethod
        def parse_devices(devices) -> list[int]:
            return _device_indices(devices)

        @staticmethod
        def get_parallel_devices(devices) -> list[torch.device]:
            return [torch.device("tpu", i) for i in devices]

        @staticmethod
        def auto_device_count() -> int:
            return torch.tpu.device_count()

        @staticmethod
        def is_available() -> bool:
            return torch.tpu.is_available()

        @staticmethod
        def name() -> str:
            return "tpu"

        def get_device_stats(self, device) -> dict:
            return torch.tpu.memory_stats(device)

    registry.register("tpu", TPUAccelerator, description="torchtpu's tpu device",
                      override=True)
    return TPUAccelerator


def _on_tpu(connector) -> bool:
    devices = connector._parallel_devices
    return bool(devices) and isinstance(devices[0], torch.device) and devices[0].type == "tpu"


def _connector_finds_tpu(connector_cls, ours: type, single_device: type,
                         mixed_precision: type) -> None:
    auto = connector_cls._choose_auto_accelerator
    init = connector_cls._set_parallel_devices_and_init_accelerator
    choose, precision = connector_cls._choose_strategy, connector_cls._check_and_init_precision

    def _choose_auto_accelerator() -> str:
        found = auto()
        return "tpu" if found == "cpu" and ours.is_available() else found

    def _set_parallel_devices_and_init_accelerator(self) -> None:
        init(self)
        if isinstance(self.accelerator, ours):
            # the name "tpu" is torch_xla's to the rest of the connector (its strategies,
            # xla_fsdp); the accelerator itself says what it is
            self._accelerator_flag = self.accelerator

    def _choose_strategy(self):
        # an accelerator on tpu (ours, or a user's own) gets the single-device strategy on its
        # device that cuda's gets, not the CPU one
        chosen = choose(self)
        if isinstance(chosen, single_device) and chosen.root_device.type == "cpu" and _on_tpu(self):
            return single_device(device=self._parallel_devices[0])
        return chosen

    def _check_and_init_precision(self):
        # "16-mixed" / "bf16-mixed" on a device other than cpu or mps autocast on cuda;
        # (a cuda GradScaler warns, without cuda, that it disables itself: replaced below)
        with warnings.catch_warnings():
            if _on_tpu(self):
                warnings.filterwarnings("ignore", "torch.cuda.amp.GradScaler is enabled")
            chosen = precision(self)
        if type(chosen) is mixed_precision and chosen.device == "cuda" and _on_tpu(self):
            return mixed_precision(chosen.precision, "tpu")
        return chosen

    connector_cls._choose_auto_accelerator = staticmethod(_choose_auto_accelerator)
    connector_cls._set_parallel_devices_and_init_accelerator = (
        _set_parallel_devices_and_init_accelerator)
    connector_cls._choose_strategy = _choose_strategy
    connector_cls._check_and_init_precision = _check_and_init_precision


def _ddp_without_device_ids(ddp: type, name: str) -> None:
    # (several tpu processes, under torchrun) DDP's device ids, and the cuda stream Lightning
    # builds DDP on when there are some, are cuda's: a tpu process runs DDP as a CPU one does,
    # over the "tpu" process group, as accelerate's multi-CPU setup does on tpu
    found = getattr(ddp, name)

    def device_ids(self) -> list[int] | None:
        return None if self.root_device.type == "tpu" else found(self)

    setattr(ddp, name, device_ids)


def _fabric_finds_tpu(package: str, connector) -> None:
    accelerators = sys.modules[f"{package}.accelerators"]
    ours = _accelerator(accelerators.Accelerator, accelerators.ACCELERATOR_REGISTRY)
    _connector_finds_tpu(connector._Connector, ours, connector.SingleDeviceStrategy,
                         connector.MixedPrecision)
    _ddp_without_device_ids(sys.modules[f"{package}.strategies.ddp"].DDPStrategy,
                            "_determine_ddp_device_ids")


def _trainers_accelerator(package: str) -> type:
    # one class per package, whichever hook runs first: the connector picks it, and the device
    # log names it
    accelerators = sys.modules[f"{package}.accelerators"]
    registered = dict.get(accelerators.AcceleratorRegistry, "tpu", {}).get("accelerator")
    if getattr(registered, "__module__", None) == __name__:
        return registered
    return _accelerator(accelerators.Accelerator, accelerators.AcceleratorRegistry)


def _trainer_logs_tpu(package: str, setup) -> None:
    # "TPU available: ..., using: N TPU cores", and the warning when a tpu goes unused, ask
    # torch_xla's accelerator
    setup.XLAAccelerator = _trainers_accelerator(package)


def _trainer_finds_tpu(package: str, connector) -> None:
    ours = _trainers_accelerator(package)
    _connector_finds_tpu(connector._AcceleratorConnector, ours, connector.SingleDeviceStrategy,
                         connector.MixedPrecision)
    _ddp_without_device_ids(connector.DDPStrategy, "determine_ddp_device_ids")


def install(after_import: Callable[[str, Callable], None]) -> None:
    if importlib.util.find_spec("torch_xla") is not None:
        return  # Lightning's "tpu" is torch_xla's then
    for fabric, trainer in _PACKAGES:
        after_import(f"{fabric}.connector", functools.partial(_fabric_finds_tpu, fabric))
        after_import(f"{trainer}.trainer.connectors.accelerator_connector",
                     functools.partial(_trainer_finds_tpu, trainer))
        after_import(f"{trainer}.trainer.setup", functools.partial(_trainer_logs_tpu, trainer))
