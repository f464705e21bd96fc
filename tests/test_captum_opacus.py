"""Captum (attributions) and Opacus (differentially private training) on tpu. Captum's
attributions and convergence deltas on a small CNN and a small transformer, and Opacus's
per-sample gradients (hooks, functorch, expanded weights), clipping and private training
steps (noise_multiplier=0: deterministic) give CPU's values. Random draws (GradientShap's
numpy baselines, NoiseTunnel's noise) are made the same on both devices, or only their
shapes are compared. The default suite runs one of each; ``-m slow`` sweeps them, in fused
eager and under torch.compile too."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from conftest import TPU, assert_same
from torch import nn

import torchtpu

captum_attr = pytest.importorskip("captum.attr")

_g = torch.Generator().manual_seed(0)
IMAGES = torch.rand(2, 1, 14, 14, generator=_g)
TOKENS = torch.randint(0, 20, (2, 6), generator=_g)
BATCH = torch.rand(8, 1, 14, 14, generator=_g)
TARGETS = torch.randint(0, 3, (8,), generator=_g)
SEQUENCES = torch.randint(0, 20, (8, 5), generator=_g)


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.relu1, self.pool = nn.Conv2d(1, 4, 3), nn.ReLU(), nn.MaxPool2d(2)
        self.conv2, self.relu2 = nn.Conv2d(4, 6, 3), nn.ReLU()
        self.fc, self.softmax = nn.Linear(6 * 4 * 4, 3), nn.Softmax(dim=1)

    def forward(self, x):
        x = self.pool(self.relu1(self.conv1(x)))
        return self.softmax(self.fc(self.relu2(self.conv2(x)).flatten(1)))


class SmallTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 16)
        layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.enc, self.head = nn.TransformerEncoder(layer, 1), nn.Linear(16, 3)

    def forward(self, embedded):
        return self.head(self.enc(embedded).mean(1))


def _models(device):
    torch.manual_seed(0)
    return SmallCNN().eval().to(device), SmallTransformer().eval().to(device)


def attributions_match(fn, rtol=1e-4, atol=1e-5):
    """``fn(device, cnn, transformer)`` on CPU and on tpu (torch and numpy seeded alike)."""
    results = []
    for device in ("cpu", TPU):
        cnn, transformer = _models(device)
        torch.manual_seed(3)
        np.random.seed(3)
        results.append(fn(device, cnn, transformer))
    assert_same(results[1], results[0], rtol=rtol, atol=atol)


def _embedded(device, transformer):
    return transformer.emb(TOKENS.to(device)).detach()


# --- default (small models: each op compiles once, cold) -----------------------------------


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(14, 8), nn.ReLU(), nn.Linear(8, 3), nn.Softmax(dim=1))


def test_integrated_gradients_and_its_convergence_delta():
    inputs = IMAGES[:, 0, 0]
    cpu, tpu = _mlp(), _mlp().to(TPU)
    expected = captum_attr.IntegratedGradients(cpu).attribute(
        inputs, target=1, n_steps=8, return_convergence_delta=True)
    actual = captum_attr.IntegratedGradients(tpu).attribute(
        inputs.to(TPU), target=1, n_steps=8, return_convergence_delta=True)
    assert_same(actual, expected)


def test_private_training_step_clips_per_sample_gradients_as_on_cpu():
    pytest.importorskip("opacus")
    inputs = BATCH[:, 0, 0]
    make = lambda: nn.Linear(14, 3)  # noqa: E731
    assert_same(_private_steps(TPU, make, inputs, "hooks", clip=0.05),
                _private_steps("cpu", make, inputs, "hooks", clip=0.05))


# --- captum sweep ----------------------------------------------------------------------------


def _fm(d):
    return (torch.arange(196).reshape(1, 1, 14, 14) // 49).to(d)


ATTRIBUTIONS = {
    "integrated_gradients_gausslegendre": lambda d, c, t: captum_attr.IntegratedGradients(
        c).attribute(IMAGES.to(d), baselines=0.5, target=torch.tensor([0, 2]).to(d),
                     method="gausslegendre", n_steps=16, internal_batch_size=8,
                     return_convergence_delta=True),
    "saliency": lambda d, c, t: captum_attr.Saliency(c).attribute(IMAGES.to(d), target=2),
    "deeplift": lambda d, c, t: captum_attr.DeepLift(c).attribute(
        IMAGES.to(d), baselines=IMAGES.to(d) * 0.1, target=1, return_convergence_delta=True),
    "deeplift_shap": lambda d, c, t: captum_attr.DeepLiftShap(c).attribute(
        IMAGES.to(d), baselines=torch.stack([IMAGES[0] * 0, IMAGES[1] * 0.3]).to(d), target=1,
        return_convergence_delta=True),
    # (stdevs=0: its interpolation points come from numpy's seeded generator, alike)
    "gradient_shap": lambda d, c, t: captum_attr.GradientShap(c).attribute(
        IMAGES.to(d), baselines=torch.zeros(2, 1, 14, 14, device=d), n_samples=3, stdevs=0.0,
        target=0, return_convergence_delta=True),
    "layer_conductance": lambda d, c, t: captum_attr.LayerConductance(c, c.conv2).attribute(
        IMAGES.to(d), target=1, n_steps=10, return_convergence_delta=True),
    "noise_tunnel_without_noise": lambda d, c, t: captum_attr.NoiseTunnel(
        captum_attr.Saliency(c)).attribute(IMAGES.to(d), nt_type="smoothgrad_sq",
                                           nt_samples=4, stdevs=0.0, target=1),
    "occlusion": lambda d, c, t: captum_attr.Occlusion(c).attribute(
        IMAGES.to(d), sliding_window_shapes=(1, 4, 4), strides=(1, 2, 2), target=1,
        baselines=0),
    "input_x_gradient": lambda d, c, t: captum_attr.InputXGradient(c).attribute(
        IMAGES.to(d), target=1),
    "guided_backprop": lambda d, c, t: captum_attr.GuidedBackprop(c).attribute(
        IMAGES.to(d), target=1),
    "feature_ablation": lambda d, c, t: captum_attr.FeatureAblation(c).attribute(
        IMAGES.to(d), target=1, feature_mask=_fm(d)),
    "shapley_value_sampling": lambda d, c, t: captum_attr.ShapleyValueSampling(c).attribute(
        IMAGES.to(d), target=1, feature_mask=_fm(d), n_samples=3),
    "kernel_shap": lambda d, c, t: captum_attr.KernelShap(c).attribute(
        IMAGES[:1].to(d), target=1, feature_mask=_fm(d), n_samples=20),
    "layer_gradcam": lambda d, c, t: captum_attr.LayerGradCam(c, c.conv2).attribute(
        IMAGES.to(d), target=1),
    "transformer_integrated_gradients": lambda d, c, t: captum_attr.IntegratedGradients(
        t).attribute(_embedded(d, t), target=0, n_steps=10, return_convergence_delta=True),
    "transformer_layer_integrated_gradients": lambda d, c, t: (
        captum_attr.LayerIntegratedGradients(lambda ids: t(t.emb(ids)), t.emb).attribute(
            TOKENS.to(d), baselines=torch.zeros_like(TOKENS).to(d), target=2, n_steps=10,
            return_convergence_delta=True)),
    "transformer_saliency": lambda d, c, t: captum_attr.Saliency(t).attribute(
        _embedded(d, t), target=1),
    "transformer_deeplift": lambda d, c, t: captum_attr.DeepLift(t).attribute(
        _embedded(d, t), target=1, return_convergence_delta=True),
    "transformer_layer_conductance": lambda d, c, t: captum_attr.LayerConductance(
        t, t.enc.layers[0].linear1).attribute(_embedded(d, t), target=1, n_steps=8),
    "transformer_occlusion": lambda d, c, t: captum_attr.Occlusion(t).attribute(
        _embedded(d, t), sliding_window_shapes=(1, 16), target=1),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", ATTRIBUTIONS)
def test_attribution(name):
    attributions_match(ATTRIBUTIONS[name])


@pytest.mark.slow
def test_noise_tunnel_with_noise_has_cpus_shape_and_scale():
    # Each device draws its own noise (tpu's stream is not CPU's, as cuda's is not).
    def run(d, cnn, _):
        a = captum_attr.NoiseTunnel(captum_attr.IntegratedGradients(cnn)).attribute(
            IMAGES.to(d), nt_type="smoothgrad", nt_samples=4, stdevs=0.1, target=1, n_steps=8)
        return a.shape, a.dtype, a.abs().mean().item()

    results = []
    for device in ("cpu", TPU):
        torch.manual_seed(5)
        results.append(run(device, *_models(device)))
    assert results[0][:2] == results[1][:2]
    assert results[1][2] == pytest.approx(results[0][2], rel=0.2)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["fused", "compiled"])
def test_attributions_in_fused_eager_and_compiled(how):
    def run(d, cnn, _):
        f = torch.compile(cnn, backend="tpu") if how == "compiled" and d != "cpu" else cnn
        return (captum_attr.IntegratedGradients(f).attribute(
                    IMAGES.to(d), target=1, n_steps=8, return_convergence_delta=True),
                captum_attr.Saliency(f).attribute(IMAGES.to(d), target=0))

    with torchtpu.set_eager_mode("fused" if how == "fused" else "strict"):
        attributions_match(run, rtol=1e-3, atol=1e-4)


# --- opacus ----------------------------------------------------------------------------------


class _CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.gn = nn.Conv2d(1, 4, 3), nn.GroupNorm(2, 4)
        self.c2, self.fc = nn.Conv2d(4, 4, 3, stride=2), nn.Linear(4 * 5 * 5, 3)

    def forward(self, x):
        x = torch.relu(self.gn(self.c1(x)))
        return self.fc(torch.relu(self.c2(x)).flatten(1))


class _Embedding(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.fc = nn.Embedding(20, 8), nn.Linear(8, 3)

    def forward(self, t):
        return self.fc(self.emb(t).mean(1))


class _LSTM(nn.Module):
    def __init__(self):
        from opacus.layers import DPLSTM

        super().__init__()
        self.emb, self.lstm = nn.Embedding(20, 8), DPLSTM(8, 6, batch_first=True)
        self.ln, self.fc = nn.LayerNorm(6), nn.Linear(6, 3)

    def forward(self, t):
        h, _ = self.lstm(self.emb(t))
        return self.fc(self.ln(h[:, -1]))


class _Attention(nn.Module):
    def __init__(self):
        from opacus.layers import DPMultiheadAttention

        super().__init__()
        self.emb, self.att = nn.Embedding(20, 8), DPMultiheadAttention(8, 2, batch_first=True)
        self.fc = nn.Linear(8, 3)

    def forward(self, t):
        e = self.emb(t)
        return self.fc(self.att(e, e, e)[0].mean(1))


def _per_sample_grads(device, make, inputs, mode):
    from opacus import GradSampleModule
    from opacus.grad_sample import GradSampleModuleExpandedWeights

    torch.manual_seed(0)
    model = make().to(device)
    if mode == "ew":
        wrapped = GradSampleModuleExpandedWeights(model, batch_first=True, loss_reduction="mean")
    else:
        wrapped = GradSampleModule(model, batch_first=True, loss_reduction="mean",
                                   force_functorch=mode == "functorch")
    nn.functional.cross_entropy(wrapped(inputs.to(device)), TARGETS.to(device)).backward()
    return ([p.grad_sample for p in model.parameters()],
            [p.grad for p in model.parameters() if p.grad is not None])


def _private_steps(device, make, inputs, mode, clip=1.0, steps=2):
    from opacus import PrivacyEngine

    torch.manual_seed(0)
    model = make().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(inputs, TARGETS),
                                       batch_size=4)
    criterion = nn.CrossEntropyLoss()
    kwargs = {"noise_multiplier": 0.0, "max_grad_norm": clip, "poisson_sampling": False,
              "grad_sample_mode": mode}
    engine = PrivacyEngine(accountant="rdp")
    if mode == "ghost":  # (it wraps the criterion too)
        model, opt, criterion, data = engine.make_private(
            module=model, optimizer=opt, criterion=criterion, data_loader=data, **kwargs)
    else:
        model, opt, data = engine.make_private(module=model, optimizer=opt, data_loader=data,
                                               **kwargs)
    losses = []
    for x, y in list(data)[:steps]:
        opt.zero_grad()
        loss = criterion(model(x.to(device)), y.to(device))
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return losses, [p.detach() for p in model.parameters()]


MODELS = {"cnn": (_CNN, BATCH), "embedding": (_Embedding, SEQUENCES),
          "lstm": (_LSTM, SEQUENCES), "attention": (_Attention, SEQUENCES)}


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["hooks", "functorch", "ew"])
@pytest.mark.parametrize("model", MODELS)
def test_per_sample_gradients(model, mode):
    pytest.importorskip("opacus")
    if mode == "ew" and model in ("lstm", "attention"):
        pytest.skip("expanded weights cover linear, conv, norm and embedding layers only")
    make, inputs = MODELS[model]
    assert_same(_per_sample_grads(TPU, make, inputs, mode),
                _per_sample_grads("cpu", make, inputs, mode), rtol=1e-4, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["hooks", "functorch", "ghost"])
@pytest.mark.parametrize("model", ["cnn", "embedding", "lstm"])
def test_private_training_steps(model, mode):
    pytest.importorskip("opacus")
    if mode != "hooks" and model == "lstm":
        pytest.skip("DPLSTM's per-sample gradients come from hooks")
    make, inputs = MODELS[model]
    clip = 0.05 if model == "embedding" else 1.0
    assert_same(_private_steps(TPU, make, inputs, mode, clip=clip),
                _private_steps("cpu", make, inputs, mode, clip=clip), rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_private_training_in_fused_eager():
    pytest.importorskip("opacus")
    expected = _private_steps("cpu", _CNN, BATCH, "hooks")
    with torchtpu.set_eager_mode("fused"):
        actual = _private_steps(TPU, _CNN, BATCH, "hooks")
    assert_same(actual, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_private_training_with_noise_draws_on_the_device():
    pytest.importorskip("opacus")
    from opacus import PrivacyEngine

    torch.manual_seed(0)
    model = copy.deepcopy(_Embedding()).to(TPU)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(SEQUENCES, TARGETS),
                                       batch_size=4)
    model, opt, data = PrivacyEngine().make_private(
        module=model, optimizer=opt, data_loader=data, noise_multiplier=1.0, max_grad_norm=1.0)
    for x, y in data:
        opt.zero_grad()
        nn.functional.cross_entropy(model(x.to(TPU)), y.to(TPU)).backward()
        opt.step()
    assert all(p.device.type == "tpu" and torch.isfinite(p).all() for p in model.parameters())
