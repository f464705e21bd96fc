"""pytorch-tabnet on "tpu": the TabNet network (sparsemax and entmax attentive masks, ghost
batch norm, categorical embeddings) trains as on CPU, and TabNetClassifier(device_name="tpu")
fits, predicts, explains and reloads as with device_name="cpu"."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from model_zoo_checks import check_outputs, check_training

pytest.importorskip("pytorch_tabnet")
pytest.importorskip("pandas")  # pytorch_tabnet.utils imports it without declaring it
from pytorch_tabnet import sparsemax  # noqa: E402
from pytorch_tabnet.tab_network import TabNet  # noqa: E402

_g = torch.Generator().manual_seed(0)
X = torch.cat([torch.randint(0, 3, (16, 1), generator=_g).float(),
               torch.randn(16, 5, generator=_g)], 1)
Y = torch.randint(0, 2, (16,), generator=_g)


class _TabNet(torch.nn.Module):
    """TabNet keeps its group attention matrix as a plain attribute (its trainer moves it);
    this wrapper moves it with the module."""

    def __init__(self, mask_type):
        super().__init__()
        self.net = TabNet(input_dim=6, output_dim=2, n_d=8, n_a=8, n_steps=2, cat_idxs=[0],
                          cat_dims=[3], cat_emb_dim=[2], mask_type=mask_type,
                          virtual_batch_size=8, group_attention_matrix=torch.eye(6))

    def _apply(self, fn, recurse=True):
        super()._apply(fn, recurse)
        for module in self.modules():
            if isinstance(getattr(module, "group_attention_matrix", None), torch.Tensor):
                module.group_attention_matrix = fn(module.group_attention_matrix)
        return self

    def forward(self, x):
        return self.net(x)


def _loss(model, device):
    logits, sparsity_loss = model(X.to(device))
    return torch.nn.functional.cross_entropy(logits, Y.to(device)) - 1e-3 * sparsity_loss


def test_sparsemax_and_entmax():
    def run(device):
        z = torch.randn(4, 7, generator=torch.Generator().manual_seed(1)).to(device)
        z.requires_grad_()
        weights = torch.arange(7.0, device=device)
        outs = [sparsemax.Sparsemax(dim=-1)(z), sparsemax.Entmax15(dim=-1)(z)]
        return outs + [torch.autograd.grad((o * weights).sum(), z)[0] for o in outs]

    check_outputs(run)


@pytest.mark.slow
@pytest.mark.parametrize("mask_type", ["sparsemax", "entmax"])
def test_tabnet_trains_as_on_cpu(mask_type):
    check_training(lambda: _TabNet(mask_type), _loss, steps=3,
                   optimizer=lambda p: torch.optim.Adam(p, lr=2e-2))


@pytest.mark.slow
def test_classifier_fit_predict_explain_reload(tmp_path):
    from pytorch_tabnet.tab_model import TabNetClassifier

    rng = np.random.default_rng(0)
    features = rng.normal(size=(64, 5)).astype(np.float32)
    features[:, 0] = rng.integers(0, 3, 64)
    labels = (features[:, 1] + features[:, 2] > 0).astype(np.int64)

    def run(device):
        torch.manual_seed(0)
        clf = TabNetClassifier(n_d=8, n_a=8, n_steps=2, cat_idxs=[0], cat_dims=[3],
                               cat_emb_dim=2, device_name=device.split(":")[0], seed=0,
                               verbose=0, optimizer_params=dict(lr=2e-2))
        clf.fit(features, labels, eval_set=[(features, labels)], max_epochs=2, batch_size=32,
                virtual_batch_size=16, num_workers=0)
        saved = clf.save_model(str(tmp_path / device.replace(":", "_")))
        reloaded = TabNetClassifier(device_name=device.split(":")[0])
        reloaded.load_model(saved)
        explanation, _ = clf.explain(features)
        return [torch.from_numpy(clf.predict_proba(features)), torch.from_numpy(explanation),
                torch.tensor(clf.history["loss"]),
                torch.from_numpy(reloaded.predict_proba(features))]

    check_outputs(run, rtol=1e-4, atol=1e-4)
