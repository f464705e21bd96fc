"""skorch on tpu: NeuralNetClassifier / NeuralNetRegressor / NeuralNetBinaryClassifier with
device="tpu" fit, predict and predict_proba as with device="cpu" under one torch.manual_seed,
with callbacks (EpochScoring, LRScheduler, Checkpoint and load_params, EarlyStopping, gradient
clipping), pickling, parameters saved on tpu loaded on CPU and back, GridSearchCV, several
inputs, and compile=True. The default suite runs the classifier with its callbacks; ``-m slow``
the rest, in strict and fused eager."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
import torch

import torchtpu

pytest.importorskip("skorch")
pytest.importorskip("sklearn")
from sklearn.datasets import make_classification, make_regression  # noqa: E402
from sklearn.model_selection import GridSearchCV  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from skorch import (  # noqa: E402
    NeuralNetBinaryClassifier,
    NeuralNetClassifier,
    NeuralNetRegressor,
)
from skorch.callbacks import (  # noqa: E402
    BatchScoring,
    Checkpoint,
    EarlyStopping,
    EpochScoring,
    Freezer,
    GradientNormClipping,
    Initializer,
    LoadInitState,
    LRScheduler,
    WarmRestartLR,
)
from skorch.dataset import Dataset, ValidSplit  # noqa: E402
from skorch.helper import SliceDict, predefined_split  # noqa: E402

X, y = make_classification(120, 8, n_informative=5, n_classes=3, random_state=0)
X, y = X.astype(np.float32), y.astype(np.int64)
XB, YB = make_classification(100, 8, n_informative=5, n_classes=2, random_state=1)
XB, YB = XB.astype(np.float32), YB.astype(np.float32)


class Classifier(torch.nn.Module):
    def __init__(self, hidden=16, classes=3, softmax=True):
        super().__init__()
        self.softmax = softmax
        self.net = torch.nn.Sequential(torch.nn.Linear(8, hidden), torch.nn.ReLU(),
                                       torch.nn.Linear(hidden, classes))

    def forward(self, X):
        out = self.net(X)
        return out.softmax(-1) if self.softmax else out.squeeze(-1)


def _same(actual, expected, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)
    assert np.asarray(actual).dtype == np.asarray(expected).dtype


def _classifier_with_callbacks(device, tmp_path):
    torch.manual_seed(0)
    checkpoint = Checkpoint(dirname=tmp_path / device)
    net = NeuralNetClassifier(
        Classifier, max_epochs=5, lr=0.1, batch_size=30, device=device, verbose=0,
        optimizer=torch.optim.SGD, optimizer__momentum=0.9, iterator_train__shuffle=True,
        train_split=ValidSplit(4, stratified=True),
        callbacks=[EpochScoring("accuracy", on_train=True, name="train_acc"),
                   EpochScoring("f1_macro", lower_is_better=False),
                   LRScheduler(torch.optim.lr_scheduler.StepLR, step_size=2, gamma=0.5),
                   checkpoint, EarlyStopping(patience=3), GradientNormClipping(1.0)])
    net.fit(X, y)
    history = [[h[k] for k in ("train_loss", "valid_loss", "train_acc", "f1_macro",
                               "valid_acc")] for h in net.history]
    best = NeuralNetClassifier(Classifier, device=device).initialize()
    best.load_params(checkpoint=checkpoint)
    return (net.predict_proba(X), net.predict(X), np.array(history), net.score(X, y),
            best.predict_proba(X))


# ---- default suite ----

def test_classifier_with_callbacks_matches_cpu(tmp_path):
    # device="tpu" as written by a user (no index), the one-line change from "cpu"
    cpu = _classifier_with_callbacks("cpu", tmp_path)
    tpu = _classifier_with_callbacks("tpu", tmp_path)
    for a, e in zip(tpu, cpu, strict=True):
        _same(a, e)


# ---- slow ----

@pytest.mark.slow
@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_regressor_matches_cpu(mode):
    Xr, yr = make_regression(100, 5, random_state=0)
    Xr, yr = Xr.astype(np.float32), (yr / 100).astype(np.float32).reshape(-1, 1)

    def run(device):
        torch.manual_seed(0)
        module = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
        net = NeuralNetRegressor(module, max_epochs=5, lr=0.05, optimizer=torch.optim.Adam,
                                 device=device, batch_size=25, verbose=0)
        net.fit(Xr, yr)
        return net.predict(Xr), np.array([h["train_loss"] for h in net.history]), net.score(Xr, yr)

    with torchtpu.set_eager_mode(mode):
        for a, e in zip(run("tpu"), run("cpu"), strict=True):
            _same(a, e)


@pytest.mark.slow
def test_classifier_with_callbacks_matches_cpu_in_fused_eager(tmp_path):
    with torchtpu.set_eager_mode("fused"):
        test_classifier_with_callbacks_matches_cpu(tmp_path)


@pytest.mark.slow
def test_binary_classifier_matches_cpu():
    def run(device):
        torch.manual_seed(0)
        net = NeuralNetBinaryClassifier(
            Classifier, module__classes=1, module__softmax=False, max_epochs=4, lr=0.1,
            device=device, verbose=0, threshold=0.4, criterion__pos_weight=torch.tensor(2.0),
            callbacks=[LRScheduler(WarmRestartLR, min_lr=1e-3, max_lr=0.1, base_period=2),
                       BatchScoring("neg_log_loss", lower_is_better=False),
                       Initializer("net.0.weight", torch.nn.init.ones_)])
        net.fit(XB, YB)
        return net.predict_proba(XB), net.predict(XB), np.array([h["train_loss"]
                                                                 for h in net.history])

    for a, e in zip(run("tpu"), run("cpu"), strict=True):
        _same(a, e)


@pytest.mark.slow
def test_pickle_copy_and_parameters_across_devices(tmp_path):
    torch.manual_seed(0)
    net = NeuralNetClassifier(Classifier, max_epochs=2, lr=0.1, optimizer__momentum=0.9,
                              device="tpu", train_split=None, verbose=0).fit(X, y)
    proba = net.predict_proba(X)
    for other in (pickle.loads(pickle.dumps(net)), copy.deepcopy(net)):
        assert next(other.module_.parameters()).device.type == "tpu"
        _same(other.predict_proba(X), proba)
    files = {"f_params": tmp_path / "p.pt", "f_optimizer": tmp_path / "o.pt",
             "f_history": tmp_path / "h.json"}
    net.save_params(**files)
    for device in ("cpu", "tpu"):
        loaded = NeuralNetClassifier(Classifier, device=device, lr=0.1,
                                     optimizer__momentum=0.9).initialize()
        loaded.load_params(**files)
        states = [s["momentum_buffer"] for s in loaded.optimizer_.state.values()]
        assert states and {s.device.type for s in states} == {device}
        _same(loaded.predict_proba(X), proba)


@pytest.mark.slow
def test_grid_search_matches_cpu():
    def run(device):
        torch.manual_seed(0)
        pipe = Pipeline([("scale", StandardScaler()), ("net", NeuralNetClassifier(
            Classifier, module__softmax=False, criterion=torch.nn.CrossEntropyLoss,
            max_epochs=3, lr=0.1, device=device, verbose=0, train_split=None))])
        search = GridSearchCV(pipe, {"net__lr": [0.05, 0.2], "net__module__hidden": [4, 8]},
                              cv=3, scoring="accuracy")
        search.fit(X, y)
        return np.array(search.cv_results_["mean_test_score"]), search.predict_proba(X)

    for a, e in zip(run("tpu"), run("cpu"), strict=True):
        _same(a, e)


class TwoInputs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.out = (torch.nn.Linear(4, 6), torch.nn.Linear(4, 6),
                                    torch.nn.Linear(6, 3))

    def forward(self, xa, xb):
        return self.out(torch.tanh(self.a(xa) + self.b(xb)))


@pytest.mark.slow
def test_several_inputs_freezer_and_cyclic_lr_match_cpu():
    def run(device):
        torch.manual_seed(0)
        inputs = SliceDict(xa=X[:, :4], xb=X[:, 4:])
        valid = Dataset(SliceDict(xa=X[:20, :4], xb=X[:20, 4:]), y[:20])
        net = NeuralNetClassifier(
            TwoInputs, criterion=torch.nn.CrossEntropyLoss, max_epochs=3, lr=0.1,
            device=device, verbose=0, optimizer=torch.optim.Adam,
            train_split=predefined_split(valid),
            callbacks=[Freezer("a.*"), LRScheduler("CyclicLR", base_lr=0.01, max_lr=0.1,
                                                   step_size_up=2, step_every="batch")])
        net.fit(inputs, y)
        return (net.predict_proba(inputs), np.array([h["valid_loss"] for h in net.history]),
                net.module_.a.weight.detach().cpu().numpy())

    for a, e in zip(run("tpu"), run("cpu"), strict=True):
        _same(a, e)


@pytest.mark.slow
def test_load_init_state_resumes_as_on_cpu(tmp_path):
    def run(device):
        torch.manual_seed(0)
        checkpoint = Checkpoint(dirname=tmp_path / device, monitor=None)
        net = NeuralNetClassifier(Classifier, max_epochs=2, lr=0.1, device=device, verbose=0,
                                  optimizer__momentum=0.9, train_split=None,
                                  callbacks=[checkpoint, LoadInitState(checkpoint)])
        net.fit(X, y)
        first = net.predict_proba(X)
        net.fit(X, y)  # restores the checkpoint, then trains on
        return first, net.predict_proba(X)

    for a, e in zip(run("tpu"), run("cpu"), strict=True):
        _same(a, e)


@pytest.mark.slow
def test_compile_true_matches_cpu():
    # (compiled on CPU too: skorch compiles the criterion as well, and its NLLLoss check
    # then misses, so the log of the probabilities is not taken there either)
    def run(device):
        torch.manual_seed(0)
        net = NeuralNetClassifier(Classifier, max_epochs=3, lr=0.1, device=device, verbose=0,
                                  batch_size=40, compile=True, train_split=None)
        net.fit(X, y)
        return net.predict_proba(X), np.array([h["train_loss"] for h in net.history])

    torch._dynamo.reset()
    cpu = run("cpu")
    for a, e in zip(run("tpu"), cpu, strict=True):
        _same(a, e)
