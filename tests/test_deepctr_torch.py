"""deepctr-torch's click-through-rate models used unchanged on "tpu" through their own Keras-like
API (``Model(..., device="tpu:0")``, ``compile``, ``fit`` on NumPy feature dictionaries,
``predict``): DeepFM, DCN, DCN-Mix, xDeepFM, AutoInt, NFM, AFM, PNN, WDL, FiBiNET, ONN, IFM,
DIFM, MLR, the sequence models DIN and DIEN (GRU, AIGRU, AGRU and AUGRU interest
evolution over packed padded histories, with negative sampling), and the multi-task ESMM,
MMOE, PLE and SharedBottom give CPU's training losses, predictions and weights on toy data.

A model builds its weights on the device it is given, drawing from that device's generator,
so the tpu model loads the CPU model's initial state. Two models are left out as
ill-conditioned: AFN's logarithmic layer of 1e-4-sized embeddings gives gradients ~1e5 times
its weights, and the steps' rounding differences (the same size on tpu as on CPU against a
float64 reference) grow past any tolerance; CCPM's k-max pooling meets values equal to
within 1e-6, so a rounding difference picks another element and the gradient goes elsewhere.
All tests are ``slow`` (importing the package takes ~3 s, and the models' cold compiles more)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from conftest import assert_same

TPU = "tpu:0"
HIDDEN = (16, 8)
N = 64


def _data():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 5, N)
    present = np.arange(4)[None] < lengths[:, None]
    data = {"user": rng.integers(1, 10, N), "item": rng.integers(1, 10, N),
            "cate": rng.integers(1, 5, N), "d0": rng.standard_normal(N).astype("float32"),
            "seq_length": lengths}
    for prefix in ("", "neg_"):
        data[f"{prefix}hist_item"] = np.where(present, rng.integers(1, 10, (N, 4)), 0)
        data[f"{prefix}hist_cate"] = np.where(present, rng.integers(1, 5, (N, 4)), 0)
    y = rng.integers(0, 2, N).astype("float32")
    return data, y, np.stack([y, rng.integers(0, 2, N).astype("float32")], 1)


def _features(kind):
    from deepctr_torch.inputs import DenseFeat, SparseFeat, VarLenSparseFeat

    sparse = [SparseFeat("user", 10, embedding_dim=4), SparseFeat("item", 10, embedding_dim=4),
              SparseFeat("cate", 5, embedding_dim=4)]
    if kind == "sparse":
        return sparse
    base = sparse + [DenseFeat("d0", 1)]

    def history(prefix):
        return [VarLenSparseFeat(SparseFeat(f"{prefix}hist_{name}", size, embedding_dim=4,
                                            embedding_name=name),
                                 maxlen=4, length_name="seq_length")
                for name, size in (("item", 10), ("cate", 5))]

    return {"base": base, "history": base + history(""),
            "negatives": base + history("") + history("neg_")}[kind]


def _models():
    import deepctr_torch.models as m
    from deepctr_torch.models import multitask as mt

    hist = ["item", "cate"]
    att = dict(att_hidden_units=(8, 4))
    return {
        "deepfm": ("history", lambda f, d: m.DeepFM(f, f, dnn_hidden_units=HIDDEN, device=d)),
        "dcn": ("base", lambda f, d: m.DCN(f, f, cross_num=2, dnn_hidden_units=HIDDEN,
                                           device=d)),
        "dcn_mix": ("base", lambda f, d: m.DCNMix(f, f, cross_num=2, dnn_hidden_units=HIDDEN,
                                                  device=d)),
        "xdeepfm": ("base", lambda f, d: m.xDeepFM(f, f, dnn_hidden_units=HIDDEN,
                                                   cin_layer_size=(4, 4), device=d)),
        "autoint": ("base", lambda f, d: m.AutoInt(f, f, att_layer_num=2, att_head_num=2,
                                                   dnn_hidden_units=HIDDEN, device=d)),
        "nfm": ("base", lambda f, d: m.NFM(f, f, dnn_hidden_units=HIDDEN, device=d)),
        "afm": ("sparse", lambda f, d: m.AFM(f, f, attention_factor=4, device=d)),
        "pnn": ("base", lambda f, d: m.PNN(f, dnn_hidden_units=HIDDEN, use_outter=True,
                                           device=d)),
        "wdl": ("base", lambda f, d: m.WDL(f, f, dnn_hidden_units=HIDDEN, device=d)),
        "fibinet": ("base", lambda f, d: m.FiBiNET(f, f, dnn_hidden_units=HIDDEN, device=d)),
        "onn": ("base", lambda f, d: m.ONN(f, f, dnn_hidden_units=HIDDEN, device=d)),
        "ifm": ("base", lambda f, d: m.IFM(f, f, dnn_hidden_units=HIDDEN, device=d)),
        "difm": ("base", lambda f, d: m.DIFM(f, f, dnn_hidden_units=HIDDEN, device=d)),
        "mlr": ("base", lambda f, d: m.MLR(f, region_num=2, device=d)),
        "din": ("history", lambda f, d: m.DIN(f, hist, dnn_hidden_units=HIDDEN,
                                              att_hidden_size=(8, 4), device=d)),
        **{f"dien_{gru.lower()}": ("history", lambda f, d, gru=gru: m.DIEN(
            f, hist, gru_type=gru, dnn_hidden_units=HIDDEN, device=d, **att))
           for gru in ("GRU", "AIGRU", "AGRU")},
        "dien_augru_negatives": ("negatives", lambda f, d: m.DIEN(
            f, hist, gru_type="AUGRU", use_negsampling=True, dnn_hidden_units=HIDDEN,
            device=d, **att)),
        "esmm": ("base", lambda f, d: mt.ESMM(f, tower_dnn_hidden_units=HIDDEN, device=d)),
        "mmoe": ("base", lambda f, d: mt.MMOE(f, num_experts=2, expert_dnn_hidden_units=HIDDEN,
                                              gate_dnn_hidden_units=(4,),
                                              tower_dnn_hidden_units=(4,), device=d)),
        "ple": ("base", lambda f, d: mt.PLE(f, shared_expert_num=1, specific_expert_num=1,
                                            num_levels=2, expert_dnn_hidden_units=HIDDEN,
                                            gate_dnn_hidden_units=(4,),
                                            tower_dnn_hidden_units=(4,), device=d)),
        "shared_bottom": ("base", lambda f, d: mt.SharedBottom(
            f, bottom_dnn_hidden_units=HIDDEN, tower_dnn_hidden_units=(4,), device=d)),
    }


NAMES = ["deepfm", "dcn", "dcn_mix", "xdeepfm", "autoint", "nfm", "afm", "pnn", "wdl",
         "fibinet", "onn", "ifm", "difm", "mlr", "din", "dien_gru", "dien_aigru", "dien_agru",
         "dien_augru_negatives", "esmm", "mmoe", "ple", "shared_bottom"]
MULTITASK = {"esmm", "mmoe", "ple", "shared_bottom"}


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_fit_and_predict_match_cpu(name):
    pytest.importorskip("deepctr_torch")
    from deepctr_torch.inputs import get_feature_names

    kind, make = _models()[name]
    features = _features(kind)
    data, y, y_tasks = _data()
    x = {k: data[k] for k in get_feature_names(features)}
    target, loss = ((y_tasks, ["binary_crossentropy"] * 2) if name in MULTITASK
                    else (y, "binary_crossentropy"))
    results = []
    for device in ("cpu", TPU):
        torch.manual_seed(0)
        model = make(features, device)
        if device == "cpu":
            initial = copy.deepcopy(model.state_dict())
        else:
            model.load_state_dict(initial)
        model.compile("adam", loss)
        history = model.fit(x, target, batch_size=16, epochs=2, verbose=0, shuffle=False)
        results.append((torch.as_tensor(model.predict(x, batch_size=32)),
                        torch.tensor(history.history["loss"]), list(model.parameters())))
    (pred, losses, params), (pred_tpu, losses_tpu, params_tpu) = results
    assert_same(losses_tpu, losses, rtol=1e-4, atol=1e-5)
    assert_same(pred_tpu, pred, rtol=1e-4, atol=1e-5)
    assert_same(params_tpu, params, rtol=1e-3, atol=1e-4)
