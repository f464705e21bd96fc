"""Lightning on tpu as a torch_xla user writes it: ``Trainer(accelerator="tpu", devices=1)``
(or "auto") and ``Fabric(accelerator="tpu")``, with torchtpu imported, train on tpu with a
single-device strategy; ``precision="bf16-mixed"`` / ``"16-mixed"`` autocast there; "cpu" stays
the CPU (torchtpu/integrations_lightning.py). An accelerator of one's own still works. Then fit,
validate, predict, test, a checkpoint saved and resumed, gradient clipping and accumulation,
manual optimization, callbacks (ModelCheckpoint, EarlyStopping, StochasticWeightAveraging), the
LR finder, mixed precision, a compiled module, Fabric, and two processes under torchrun (DDP)
give CPU's numbers. The default suite
checks the choices and runs fit with a resumed checkpoint; ``-m slow`` the rest, in strict and
fused eager."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import types
import warnings
from pathlib import Path

import pytest
import torch

import torchtpu
from torchtpu import integrations_lightning

pytest.importorskip("lightning")
import lightning.pytorch as pl  # noqa: E402
from lightning.fabric import Fabric  # noqa: E402
from lightning.fabric.accelerators import Accelerator as FabricAccelerator  # noqa: E402
from lightning.pytorch.accelerators import Accelerator  # noqa: E402
from lightning.pytorch.callbacks import (  # noqa: E402
    EarlyStopping,
    ModelCheckpoint,
    StochasticWeightAveraging,
)
from lightning.pytorch.plugins.precision import MixedPrecision  # noqa: E402
from lightning.pytorch.strategies import SingleDeviceStrategy  # noqa: E402
from lightning.pytorch.tuner import Tuner  # noqa: E402


class _TPUDevice:
    """What Lightning asks an accelerator of one's own: one tpu device, always there."""

    def setup_device(self, device: torch.device) -> None:
        pass

    def teardown(self) -> None:
        pass

    @staticmethod
    def parse_devices(devices) -> int:
        return 1

    @staticmethod
    def get_parallel_devices(devices) -> list[torch.device]:
        return [torch.device("tpu", 0)]

    @staticmethod
    def auto_device_count() -> int:
        return 1

    @staticmethod
    def is_available() -> bool:
        return torch.tpu.is_available()

    @staticmethod
    def name() -> str:
        return "mine"

    def get_device_stats(self, device) -> dict:
        return {}


class MyAccelerator(_TPUDevice, Accelerator):
    pass


class MyFabricAccelerator(_TPUDevice, FabricAccelerator):
    pass


def _on(device: str, **options) -> dict:
    """Trainer arguments for ``device``: the accelerator is the only change a user makes."""
    return {"max_epochs": 2, "logger": False, "enable_progress_bar": False,
            "enable_model_summary": False, "accelerator": device, **options}


@pytest.fixture(autouse=True)
def _quiet():
    names = ("lightning.pytorch", "lightning.fabric")
    levels = [logging.getLogger(n).level for n in names]
    for n in names:
        logging.getLogger(n).setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
    for n, level in zip(names, levels, strict=True):
        logging.getLogger(n).setLevel(level)


_g = torch.Generator().manual_seed(0)
X = torch.randn(64, 6, generator=_g)
Y = (X[:, :3].sum(1) > 0).long()


def _loader():
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=16)


class Module(pl.LightningModule):
    def __init__(self, manual: bool = False, log_train: bool = True):
        super().__init__()
        # (no bias before the batch norm: its gradient is rounding noise, scaled to lr by Adam)
        self.net = torch.nn.Sequential(torch.nn.Linear(6, 16, bias=False),
                                       torch.nn.BatchNorm1d(16), torch.nn.ReLU(),
                                       torch.nn.Linear(16, 3))
        self.automatic_optimization = not manual
        self.log_train = log_train  # (self.log inside a compiled step recompiles per stage)

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, index):
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self(x), y)
        if self.log_train:
            self.log("train_loss", loss, on_step=True, on_epoch=True)
        if not self.automatic_optimization:
            opt = self.optimizers()
            opt.zero_grad()
            self.manual_backward(loss)
            self.clip_gradients(opt, gradient_clip_val=0.5, gradient_clip_algorithm="norm")
            opt.step()
            self.lr_schedulers().step()
        return loss

    def validation_step(self, batch, index):
        x, y = batch
        out = self(x)
        self.log("val_loss", torch.nn.functional.cross_entropy(out, y))
        self.log("val_acc", (out.argmax(1) == y).float().mean())

    def test_step(self, batch, index):
        x, y = batch
        self.log("test_acc", (self(x).argmax(1) == y).float().mean())

    def predict_step(self, batch, index):
        return self(batch[0]).softmax(-1)

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.parameters(), lr=1e-2, weight_decay=0.1)
        return {"optimizer": opt,
                "lr_scheduler": torch.optim.lr_scheduler.StepLR(opt, 3, 0.5)}


def _params(model) -> list:
    return [p.detach().cpu().clone() for p in model.parameters()]


def _fit_validate_predict_resume(device, tmp_path, manual=False):
    pl.seed_everything(0, verbose=False)
    model = Module(manual)
    options = {} if manual else {"gradient_clip_val": 0.5, "accumulate_grad_batches": 2}
    trainer = pl.Trainer(**_on(device, default_root_dir=tmp_path, **options))
    trainer.fit(model, _loader(), _loader())
    fitted = _params(model)
    validated = trainer.validate(model, _loader(), verbose=False)
    predicted = torch.cat(trainer.predict(model, _loader()))
    path = tmp_path / f"{device}.ckpt"
    trainer.save_checkpoint(path)
    loaded = Module.load_from_checkpoint(path, manual=manual, map_location="cpu")
    resumed = Module(manual)
    pl.Trainer(**_on(device, default_root_dir=tmp_path, **{**options, "max_epochs": 3})).fit(
        resumed, _loader(), _loader(), ckpt_path=path)
    return fitted, validated, predicted.cpu(), _params(loaded), _params(resumed)


def _same(actual, expected):
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)


# ---- default suite ----

@pytest.mark.parametrize("accelerator", ["tpu", "auto"])
@pytest.mark.parametrize("precision", [None, "bf16-mixed", "16-mixed"])
def test_tpu_and_auto_pick_the_tpu_device_and_autocast_there(accelerator, precision):
    trainer = pl.Trainer(accelerator=accelerator, devices=1 if accelerator == "tpu" else "auto",
                         precision=precision, logger=False)
    fabric = Fabric(accelerator=accelerator, precision=precision)
    for strategy in (trainer.strategy, fabric.strategy):
        assert type(strategy).__name__ == "SingleDeviceStrategy"
        assert strategy.root_device == torch.device("tpu", 0)
        assert strategy.accelerator.name() == "tpu"
        plugin = getattr(strategy, "precision_plugin", None) or strategy.precision
        if precision is not None:
            assert (type(plugin).__name__, plugin.device, plugin.precision) == (
                "MixedPrecision", "tpu", precision)
            assert (plugin.scaler is not None) == (precision == "16-mixed")
    assert fabric.device == torch.device("tpu", 0)


def test_cpu_stays_the_cpu():
    trainer = pl.Trainer(accelerator="cpu", precision="bf16-mixed", logger=False)
    fabric = Fabric(accelerator="cpu", precision="bf16-mixed")
    assert trainer.strategy.root_device.type == fabric.device.type == "cpu"
    assert trainer.precision_plugin.device == fabric.strategy.precision.device == "cpu"


def test_the_device_log_names_the_tpu(caplog):
    with caplog.at_level(logging.INFO, logger="lightning.pytorch"):
        pl.Trainer(accelerator="tpu", devices=1, logger=False)
        with pytest.warns(UserWarning, match="TPU available but not used"):
            pl.Trainer(accelerator="cpu", logger=False)
    assert [r.getMessage() for r in caplog.records if r.getMessage().startswith("TPU")] == [
        "TPU available: True, using: 1 TPU cores", "TPU available: True, using: 0 TPU cores"]


def test_an_accelerator_of_ones_own_runs_on_its_device():
    # (Lightning gave any accelerator but cuda's and mps' a CPU strategy, and a cuda autocast)
    for strategy in (pl.Trainer(accelerator=MyAccelerator(), precision="bf16-mixed").strategy,
                     Fabric(accelerator=MyFabricAccelerator(), precision="bf16-mixed").strategy):
        assert strategy.root_device == torch.device("tpu", 0)
        assert (getattr(strategy, "precision_plugin", None) or strategy.precision).device == "tpu"
    explicit = pl.Trainer(accelerator=MyAccelerator(),
                          strategy=SingleDeviceStrategy(device=torch.device("tpu", 0)),
                          plugins=[MixedPrecision("bf16-mixed", device="tpu")])
    assert isinstance(explicit.accelerator, MyAccelerator)
    assert explicit.strategy.root_device == torch.device("tpu", 0)


def test_more_devices_than_the_process_has_is_refused():
    with pytest.raises(ValueError, match=r"`devices=2` asks for tpu devices \[0, 1\], but this"
                                         r" process has 1: \[0\]"):
        pl.Trainer(accelerator="tpu", devices=2)
    with pytest.raises(ValueError, match="asks for tpu devices"):
        Fabric(accelerator="tpu", devices=[1])


def test_lightning_is_left_alone_with_torch_xla(monkeypatch):
    hooked = []
    monkeypatch.setattr(integrations_lightning.importlib.util, "find_spec",
                        lambda name: types.SimpleNamespace(name=name))
    integrations_lightning.install(lambda name, then: hooked.append(name))
    assert hooked == []


def test_fit_validate_predict_and_resume_match_cpu(tmp_path):
    # (clipping by norm, accumulation over 2 batches, a step schedule, batch norm)
    cpu = _fit_validate_predict_resume("cpu", tmp_path)
    _same(_fit_validate_predict_resume("tpu", tmp_path), cpu)


# ---- slow ----

@pytest.mark.slow
@pytest.mark.parametrize("mode", ["strict", "fused"])
@pytest.mark.parametrize("manual", [False, True], ids=["automatic", "manual"])
def test_training_matches_cpu(tmp_path, manual, mode):
    cpu = _fit_validate_predict_resume("cpu", tmp_path, manual)
    with torchtpu.set_eager_mode(mode):
        _same(_fit_validate_predict_resume("tpu", tmp_path, manual), cpu)


def _fit(device, compiled=False, **options):
    pl.seed_everything(0, verbose=False)
    model = Module(log_train=not compiled)
    model = torch.compile(model) if compiled else model
    trainer = pl.Trainer(**_on(device, enable_checkpointing=False, **options))
    trainer.fit(model, _loader(), _loader())
    return trainer, model


@pytest.mark.slow
@pytest.mark.parametrize("options", [
    lambda: {"gradient_clip_val": 0.01, "gradient_clip_algorithm": "value"},
    # (not with clipping: Lightning's SWA epochs clip an empty gradient list, on CPU too)
    lambda: {"callbacks": [StochasticWeightAveraging(swa_lrs=1e-2, swa_epoch_start=2)]}],
    ids=["clip_by_value", "swa"])
def test_clipping_by_value_and_swa_match_cpu(options):
    def run(device):
        return _params(_fit(device, max_epochs=4, **options())[1])

    _same(run("tpu"), run("cpu"))


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["bf16-mixed", "16-mixed", "64-true"])
def test_precisions_match_cpu(precision):
    # (on CPU Lightning turns "16-mixed" into bf16: the plugin asks for float16 and its scaler)
    def run(device):
        options = ({"plugins": [MixedPrecision(precision, device="cpu")]}
                   if device == "cpu" and precision == "16-mixed" else {"precision": precision})
        trainer, model = _fit(device, **options)
        return _params(model), trainer.callback_metrics["val_loss"].cpu()

    _same(run("tpu"), run("cpu"))


@pytest.mark.slow
def test_an_accelerator_of_ones_own_trains_as_cpu(tmp_path):
    def run(device):
        pl.seed_everything(0, verbose=False)
        model = Module()
        accelerator = {"accelerator": MyAccelerator(), "strategy": SingleDeviceStrategy(
            device=torch.device("tpu", 0))} if device == "tpu" else {}
        trainer = pl.Trainer(**{**_on(device, default_root_dir=tmp_path), **accelerator})
        trainer.fit(model, _loader(), _loader())
        assert trainer.strategy.root_device.type == device
        return _params(model)

    _same(run("tpu"), run("cpu"))


@pytest.mark.slow
def test_compiled_module_matches_cpu():
    def run(device):
        trainer, compiled = _fit(device, compiled=True)
        return (_params(compiled), trainer.test(compiled, _loader(), verbose=False)[0]["test_acc"])

    torch._dynamo.reset()
    _same(run("tpu"), run("cpu"))


@pytest.mark.slow
def test_model_checkpoint_and_early_stopping_match_cpu(tmp_path):
    def run(device):
        pl.seed_everything(0, verbose=False)
        best = ModelCheckpoint(dirpath=tmp_path / device, monitor="val_loss", save_top_k=2,
                               save_last=True)
        trainer = pl.Trainer(**_on(device, max_epochs=6, default_root_dir=tmp_path, callbacks=[
            best, EarlyStopping("val_loss", patience=1)]))
        trainer.fit(Module(), _loader(), _loader())
        saved = torch.load(best.last_model_path, weights_only=False)
        assert {v.device.type for v in saved["state_dict"].values()} == {device}
        on_tpu = Module.load_from_checkpoint(best.best_model_path, map_location="tpu:0")
        assert next(on_tpu.parameters()).device.type == "tpu"
        return (_params(Module.load_from_checkpoint(best.best_model_path)),
                best.best_model_score.cpu(), trainer.current_epoch)

    _same(run("tpu"), run("cpu"))


@pytest.mark.slow
def test_lr_finder_matches_cpu(tmp_path):
    def run(device):
        pl.seed_everything(0, verbose=False)
        model = Module()
        trainer = pl.Trainer(**_on(device, enable_checkpointing=False,
                                   default_root_dir=tmp_path))
        found = Tuner(trainer).lr_find(model, _loader(), num_training=10, update_attr=False)
        return torch.tensor(found.results["loss"]), _params(model)

    _same(run("tpu"), run("cpu"))


@pytest.mark.slow
@pytest.mark.parametrize("accelerator", ["tpu", "auto", "mine"])
def test_fabric_matches_cpu(tmp_path, accelerator):
    def run(device):
        chosen = {"tpu": accelerator, "cpu": "cpu"}[device]
        fabric = Fabric(accelerator=MyFabricAccelerator() if chosen == "mine" else chosen)
        fabric.seed_everything(0, verbose=False)
        model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(),
                                    torch.nn.Linear(16, 3))
        model, opt = fabric.setup(model, torch.optim.SGD(model.parameters(), lr=0.1,
                                                         momentum=0.9))
        for x, y in fabric.setup_dataloaders(_loader()):
            assert x.device.type == device
            loss = torch.nn.functional.cross_entropy(model(x), y)
            fabric.backward(loss)
            fabric.clip_gradients(model, opt, max_norm=0.5)
            opt.step()
            opt.zero_grad()
        fabric.save(tmp_path / f"{device}.ckpt", {"model": model, "opt": opt})
        restored = fabric.setup(torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(),
                                                    torch.nn.Linear(16, 3)))
        fabric.load(tmp_path / f"{device}.ckpt", {"model": restored})
        return _params(model), _params(restored), loss.detach().cpu()

    _same(run("tpu"), run("cpu"))


@pytest.mark.slow
def test_two_processes_under_torchrun_train_with_ddp_as_cpu(tmp_path):
    # (Lightning built DDP with cuda's device ids, on a cuda stream)
    worker = Path(__file__).parent / "distributed" / "lightning_worker.py"
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    runs = {}
    for device in ("cpu", "tpu"):
        done = subprocess.run(
            [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
             "2", str(worker), device, str(tmp_path / device)],
            capture_output=True, text=True, timeout=600, env=env)
        assert done.returncode == 0, done.stderr[-4000:]
        runs[device] = json.loads((tmp_path / device).read_text())
    assert runs["tpu"].pop("kinds") == ["DDPStrategy", "tpu:0", pytest.approx(
        runs["cpu"]["kinds"][2], rel=1e-5), "DDPStrategy", "tpu:0"]
    runs["cpu"].pop("kinds")
    _same(runs["tpu"], runs["cpu"])
