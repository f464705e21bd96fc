"""pytorch-ignite on tpu: create_supervised_trainer/evaluator with device="tpu" (gradient
accumulation, the CPU-runnable amp options, EMA, a warmup scheduler, Checkpoint save and
load_objects, the LR finder) train as on CPU, and ignite.metrics fed tpu tensors, accumulating
on tpu, compute CPU's values, types and dtypes. The default suite runs a trainer and a few
metrics; ``-m slow`` the rest, in strict and fused eager."""

from __future__ import annotations

import os

import pytest
import torch
from conftest import TPU

import torchtpu

pytest.importorskip("ignite")
from ignite import metrics as IM  # noqa: E402
from ignite.engine import (  # noqa: E402
    Engine,
    Events,
    create_supervised_evaluator,
    create_supervised_trainer,
)
from ignite.handlers import (  # noqa: E402
    Checkpoint,
    DiskSaver,
    EMAHandler,
    FastaiLRFinder,
    create_lr_scheduler_with_warmup,
)
from ignite.metrics import regression as IR  # noqa: E402

_g = torch.Generator().manual_seed(0)
X = torch.randn(48, 6, generator=_g)
Y = (X[:, :3].sum(1) > 0).long() + (X[:, 3] > 1).long()


def _loader(batch_size=8):
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y),
                                       batch_size=batch_size)


def _model(device, norm=False):
    torch.manual_seed(0)
    layers = [torch.nn.Linear(6, 16, bias=not norm)]
    layers += [torch.nn.BatchNorm1d(16)] if norm else []
    layers += [torch.nn.ReLU(), torch.nn.Linear(16, 3)]
    model = torch.nn.Sequential(*layers).to(device)
    return model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def _params(model):
    return [p.detach().cpu().clone() for p in model.parameters()]


def _fit_and_evaluate(device, **options):
    model, opt = _model(device)
    trainer = create_supervised_trainer(model, opt, torch.nn.CrossEntropyLoss(), device=device,
                                        **options)
    losses = []
    trainer.add_event_handler(Events.ITERATION_COMPLETED,
                              lambda e: losses.append(e.state.output))
    trainer.run(_loader(), max_epochs=2)
    metrics = {"acc": IM.Accuracy(), "loss": IM.Loss(torch.nn.CrossEntropyLoss()),
               "cm": IM.ConfusionMatrix(3), "precision": IM.Precision(average=False),
               "recall": IM.Recall(average=True), "top2": IM.TopKCategoricalAccuracy(k=2)}
    evaluator = create_supervised_evaluator(model, metrics=metrics, device=device)
    return losses, _params(model), evaluator.run(_loader(12)).metrics


def _same_results(actual, expected):
    if isinstance(expected, dict):
        assert actual.keys() == expected.keys()
        for k in expected:
            _same_results(actual[k], expected[k])
    elif isinstance(expected, (list, tuple)):
        assert type(actual) is type(expected) and len(actual) == len(expected)
        for a, e in zip(actual, expected, strict=True):
            _same_results(a, e)
    elif isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor) and actual.dtype == expected.dtype
        torch.testing.assert_close(actual.cpu(), expected, rtol=1e-5, atol=1e-6)
    else:
        assert type(actual) is type(expected)
        assert actual == pytest.approx(expected, rel=1e-5, abs=1e-6)


def _training_matches_cpu(**options):
    _same_results(_fit_and_evaluate("tpu", **options), _fit_and_evaluate("cpu", **options))


# Metrics: (make(device), predictions, targets); targets None for one-input metrics.
_p = torch.Generator().manual_seed(1)
LOGITS, LABELS = torch.randn(3, 10, 4, generator=_p), torch.randint(0, 4, (3, 10), generator=_p)
IMG_P = torch.rand(3, 2, 3, 16, 16, generator=_p)
IMG_T = (IMG_P + 0.1 * torch.randn(3, 2, 3, 16, 16, generator=_p)).clamp(0, 1)
REG_P, REG_T = torch.randn(3, 10, generator=_p), torch.randn(3, 10, generator=_p)
POS_P, POS_T = REG_P.abs() + 0.5, REG_T.abs() + 0.5
PROB, BIN = torch.rand(3, 10, generator=_p), torch.randint(0, 2, (3, 10), generator=_p)
ML_P, ML_T = (torch.randint(0, 2, (3, 10, 5), generator=_p),
              torch.randint(0, 2, (3, 10, 5), generator=_p))
FEAT_A = torch.randn(3, 12, 5, generator=_p)
FEAT_B = FEAT_A + torch.randn(3, 12, 5, generator=_p)
SEG_P, SEG_T = (torch.randn(3, 2, 4, 5, 5, generator=_p),
                torch.randint(0, 4, (3, 2, 5, 5), generator=_p))

METRICS = {
    "Accuracy": (lambda d: IM.Accuracy(device=d), LOGITS, LABELS),
    "Accuracy_binary": (lambda d: IM.Accuracy(device=d), (PROB > 0.5).long(), BIN),
    "Accuracy_multilabel": (lambda d: IM.Accuracy(is_multilabel=True, device=d), ML_P, ML_T),
    "Loss": (lambda d: IM.Loss(torch.nn.CrossEntropyLoss(), device=d), LOGITS, LABELS),
    "MeanSquaredError": (lambda d: IM.MeanSquaredError(device=d), REG_P, REG_T),
    "MeanAbsoluteError": (lambda d: IM.MeanAbsoluteError(device=d), REG_P, REG_T),
    "RootMeanSquaredError": (lambda d: IM.RootMeanSquaredError(device=d), REG_P, REG_T),
    "ConfusionMatrix": (lambda d: IM.ConfusionMatrix(4, device=d), LOGITS, LABELS),
    "ConfusionMatrix_recall": (lambda d: IM.ConfusionMatrix(4, average="recall", device=d),
                               LOGITS, LABELS),
    "MultiLabelConfusionMatrix": (lambda d: IM.MultiLabelConfusionMatrix(5, device=d),
                                  ML_P, ML_T),
    "mIoU": (lambda d: IM.mIoU(IM.ConfusionMatrix(4, device=d)), SEG_P, SEG_T),
    "DiceCoefficient": (lambda d: IM.DiceCoefficient(IM.ConfusionMatrix(4, device=d)),
                        SEG_P, SEG_T),
    "Precision": (lambda d: IM.Precision(device=d), LOGITS, LABELS),
    "Precision_macro": (lambda d: IM.Precision(average="macro", device=d), LOGITS, LABELS),
    "Precision_weighted": (lambda d: IM.Precision(average="weighted", device=d),
                           LOGITS, LABELS),
    "Precision_micro": (lambda d: IM.Precision(average="micro", device=d), LOGITS, LABELS),
    "Recall": (lambda d: IM.Recall(average=True, device=d), LOGITS, LABELS),
    "Recall_multilabel_samples": (lambda d: IM.Recall(average="samples", is_multilabel=True,
                                                      device=d), ML_P, ML_T),
    "Fbeta": (lambda d: IM.Fbeta(0.5, device=d), LOGITS, LABELS),
    "ClassificationReport": (lambda d: IM.ClassificationReport(device=d, output_dict=True),
                             LOGITS, LABELS),
    "TopKCategoricalAccuracy": (lambda d: IM.TopKCategoricalAccuracy(k=2, device=d),
                                LOGITS, LABELS),
    "SSIM": (lambda d: IM.SSIM(data_range=1.0, device=d), IMG_P, IMG_T),
    "SSIM_uniform": (lambda d: IM.SSIM(data_range=1.0, gaussian=False, kernel_size=5,
                                       device=d), IMG_P, IMG_T),
    "PSNR": (lambda d: IM.PSNR(data_range=1.0, device=d), IMG_P, IMG_T),
    "CosineSimilarity": (lambda d: IM.CosineSimilarity(device=d), FEAT_A, FEAT_B),
    "MeanPairwiseDistance": (lambda d: IM.MeanPairwiseDistance(p=1, device=d), FEAT_A, FEAT_B),
    "JSDivergence": (lambda d: IM.JSDivergence(device=d), LOGITS, LOGITS.flip(-1)),
    "KLDivergence": (lambda d: IM.KLDivergence(device=d), LOGITS, LOGITS.flip(-1)),
    "Entropy": (lambda d: IM.Entropy(device=d), LOGITS, LABELS),
    "MutualInformation": (lambda d: IM.MutualInformation(device=d), LOGITS, LABELS),
    "HSIC": (lambda d: IM.HSIC(device=d), FEAT_A, FEAT_B),
    "MaximumMeanDiscrepancy": (lambda d: IM.MaximumMeanDiscrepancy(device=d), FEAT_A, FEAT_B),
    "ROC_AUC": (lambda d: IM.ROC_AUC(device=d), PROB, BIN),
    "AveragePrecision": (lambda d: IM.AveragePrecision(device=d), PROB, BIN),
    "PrecisionRecallCurve": (lambda d: IM.PrecisionRecallCurve(device=d), PROB, BIN),
    "CohenKappa": (lambda d: IM.CohenKappa(device=d), (PROB > 0.5).long(), BIN),
    "Average": (lambda d: IM.Average(device=d), REG_P, None),
    "GeometricAverage": (lambda d: IM.GeometricAverage(device=d), POS_P, None),
    **{name: (lambda d, name=name: getattr(IR, name)(device=d), REG_P, REG_T)
       for name in ["CanberraMetric", "FractionalAbsoluteError", "GeometricMeanAbsoluteError",
                    "KendallRankCorrelation", "ManhattanDistance", "MaximumAbsoluteError",
                    "MeanError", "MedianAbsoluteError", "PearsonCorrelation", "R2Score",
                    "SpearmanRankCorrelation", "WaveHedgesDistance"]},
    **{name: (lambda d, name=name: getattr(IR, name)(device=d), POS_P, POS_T)
       for name in ["FractionalBias", "GeometricMeanRelativeAbsoluteError",
                    "MeanAbsoluteRelativeError", "MeanNormalizedBias",
                    "MedianAbsolutePercentageError", "MedianRelativeAbsoluteError"]},
}


def _metric_matches_cpu(name):
    make, preds, targets = METRICS[name]
    results = []
    for device in ("cpu", TPU):
        metric = make(device)
        for i in range(preds.shape[0]):
            batch = preds[i].to(device)
            metric.update(batch if targets is None else (batch, targets[i].to(device)))
        results.append(metric.compute())
    _same_results(results[1], results[0])


# ---- default suite ----

def test_trainer_with_gradient_accumulation_matches_cpu():
    _training_matches_cpu(gradient_accumulation_steps=3)


@pytest.mark.parametrize("name", ["ConfusionMatrix", "SSIM", "PSNR", "Precision"])
def test_metric_matches_cpu(name):
    _metric_matches_cpu(name)


# ---- slow sweeps ----

@pytest.mark.slow
@pytest.mark.parametrize("options", [{}, {"amp_mode": "amp"},
                                     {"amp_mode": "amp", "scaler": True}],
                         ids=["plain", "amp", "amp_scaler"])
@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_trainer_options_match_cpu(options, mode):
    # (amp_mode="amp" autocasts "cuda": without cuda it runs float32, on CPU as on tpu)
    with torchtpu.set_eager_mode(mode):
        _training_matches_cpu(**options)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["strict", "fused"])
@pytest.mark.parametrize("name", METRICS)
def test_every_metric_matches_cpu(name, mode):
    with torchtpu.set_eager_mode(mode):
        _metric_matches_cpu(name)


def _ema_warmup_checkpoint(device, tmp):
    model, opt = _model(device, norm=True)
    trainer = create_supervised_trainer(model, opt, torch.nn.CrossEntropyLoss(), device=device,
                                        deterministic=True)
    ema = EMAHandler(model, momentum=0.1, momentum_warmup=0.5, warmup_iters=4)
    ema.attach(trainer, name="ema_momentum")
    trainer.add_event_handler(Events.ITERATION_STARTED, create_lr_scheduler_with_warmup(
        torch.optim.lr_scheduler.ExponentialLR(opt, 0.9), warmup_start_value=0.01,
        warmup_duration=3))
    evaluator = create_supervised_evaluator(
        ema.ema_model, metrics={"loss": IM.Loss(torch.nn.CrossEntropyLoss())}, device=device)
    scores = []
    trainer.add_event_handler(Events.EPOCH_COMPLETED,
                              lambda e: scores.append(evaluator.run(_loader()).metrics["loss"]))
    saver = Checkpoint({"model": model, "opt": opt, "trainer": trainer, "ema": ema.ema_model},
                       DiskSaver(tmp, require_empty=False), n_saved=2)
    trainer.add_event_handler(Events.EPOCH_COMPLETED, saver)
    trainer.run(_loader(), max_epochs=3)
    model2, opt2 = _model(device, norm=True)
    ema2, _ = _model(device, norm=True)
    restored = Engine(lambda e, b: None)
    Checkpoint.load_objects({"model": model2, "opt": opt2, "trainer": restored, "ema": ema2},
                            torch.load(os.path.join(tmp, saver.last_checkpoint),
                                       weights_only=False))
    assert restored.state.epoch == 3
    assert {v.device.type for s in opt2.state.values() for v in s.values()} == {device}
    return (_params(model), _params(ema.ema_model), list(ema.ema_model.buffers()), scores,
            _params(model2), _params(ema2), list(ema2.buffers()))


@pytest.mark.slow
def test_ema_warmup_and_checkpoint_match_cpu(tmp_path):
    cpu = _ema_warmup_checkpoint("cpu", tmp_path / "cpu")
    _same_results(_ema_warmup_checkpoint("tpu", tmp_path / "tpu"), cpu)


@pytest.mark.slow
def test_lr_finder_matches_cpu():
    def run(device):
        model, opt = _model(device)
        trainer = create_supervised_trainer(model, opt, torch.nn.CrossEntropyLoss(),
                                            device=device)
        finder = FastaiLRFinder()
        with finder.attach(trainer, {"model": model, "optimizer": opt}, num_iter=12,
                           end_lr=10.0, start_lr=1e-3, diverge_th=1e9) as run_finder:
            run_finder.run(_loader(), max_epochs=3)
        return finder.get_results()["loss"], finder.get_results()["lr"], _params(model)

    _same_results(run("tpu"), run("cpu"))
