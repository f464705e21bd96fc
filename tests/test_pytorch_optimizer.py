"""pytorch-optimizer on tpu: the optimizers of its registry (``load_optimizer``) train an
embedding + LayerNorm block as on CPU: each step's loss, parameters, and every state tensor
and number. The default suite runs ADOPT; ``-m slow`` sweeps the registry (Muon's
Newton-Schulz, Shampoo's roots, ...) in strict and fused eager.

Left out of the sweep: those that draw random numbers (tpu's stream is not CPU's, as cuda's
is not), those that need a model, a process group or 2-d parameters only, and those whose
eigenbases are not unique here (SOAP, SPlus: a gradient outer product of rank below its size
has a degenerate eigenspace, so CPU's float32 run is 10% from its own float64 run; Conda's
projection onto its momentum's singular vectors, 0.1% from it after one step)."""

from __future__ import annotations

import pytest
import torch
from optimizer_library_checks import assert_as_close_to_float64_as_cpu, assert_matches_cpu

import torchtpu

po = pytest.importorskip("pytorch_optimizer")

RANDOM = {"adahessian", "sophiah", "gravity", "kron", "magma", "scion", "scionlight", "alice",
          "racs"}
NEEDS_MORE = {"adalomo", "adammini", "lomo", "demo", "bsam", "alig", "ranger21",
              "spectralsphere", "lorarite", "muon", "adamuon", "normuon", "adago", "muonclip",
              "distributedmuon", "lbfgs"}
NOT_UNIQUE = {"soap", "splus", "conda"}
# Inverse matrix roots (Shampoo's through an SVD, DASH's Newton-Denman-Beavers iterations) of
# a nearly singular preconditioner: compared with a float64 run instead.
ROOTS = {"shampoo": {}, "dash": {}}
# State and parameters whose float32 rounding the optimizer amplifies on CPU too: a step of
# g / (|g| + eps) where a gradient (the LayerNorm bias's) is near eps; AdaMod's lr / sqrt(v);
# Kate's and MSVAG's ratios of small moments; L2 trust ratios of a zero-initialised bias.
LOOSE = {"adamod": 2e-4, "kate": 2e-4, "msvag": 2e-4, "apollo": 1e-4, "fira": 1e-4,
         "galore": 1e-4, "lamb": 1e-4, "spam": 1e-4, "swats": 1e-4, "dadaptadan": 1e-4,
         "adan": 1e-4, "ranger21": 1e-4, "adalite": 1e-4}
# (adalite's rank-1 factor m_avg_u: a ratio of near-cancelling sums, 2e-2 apart on step 1
# while the parameters agree at 1e-6)
LOOSE_STATE = {"adalite": 5e-2}

SWEEP = sorted(set(po.get_supported_optimizers()) - RANDOM - NEEDS_MORE - NOT_UNIQUE)


def _make(name: str, **kwargs):
    cls = po.load_optimizer(name)

    def make(params):
        if "lr" in cls.__init__.__code__.co_varnames:
            kwargs.setdefault("lr", 1e-2)
        return cls(params, **kwargs)

    return make


def _matches_cpu(name: str, steps: int = 4, **kwargs) -> None:
    if name in ROOTS:
        assert_as_close_to_float64_as_cpu(_make(name, **ROOTS[name]), steps=steps, **kwargs)
        return
    rtol = LOOSE.get(name, 1e-5)
    assert_matches_cpu(_make(name), rtol=rtol, state_rtol=LOOSE_STATE.get(name, rtol),
                       steps=steps, **kwargs)


def _muon_groups(params):
    params = list(params)
    return [dict(params=[p for p in params if p.ndim == 2], use_muon=True, lr=0.02),
            dict(params=[p for p in params if p.ndim != 2], use_muon=False, lr=1e-2)]


# ---- default suite ----

def test_adopt_matches_cpu():
    # (its first step only records the second moment; later ones clip the normalised update)
    _matches_cpu("adopt", steps=3, kind="mlp")


# ---- slow sweeps ----

@pytest.mark.slow
def test_muon_orthogonalises_hidden_matrices_as_on_cpu():
    # Newton-Schulz iterations on the matrices, AdamW on the rest (its `use_muon` groups)
    assert_matches_cpu(lambda p: po.Muon(_muon_groups(p)), steps=3)


@pytest.mark.slow
def test_scalable_shampoo_preconditions_as_on_cpu():
    # (its preconditioners' inverse roots from the second step, grafted onto Adagrad's step)
    make = lambda p: po.ScalableShampoo(p, lr=1e-2, start_preconditioning_step=2,
                                        preconditioning_compute_steps=2)
    assert_matches_cpu(make, steps=3, kind="mlp")


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["strict", "fused"])
@pytest.mark.parametrize("name", SWEEP)
def test_every_optimizer_matches_cpu(name, mode):
    with torchtpu.set_eager_mode(mode):
        _matches_cpu(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["AdaMuon", "NorMuon", "AdaGO"])
def test_muon_variants_match_cpu(name):
    assert_matches_cpu(lambda p: getattr(po, name)(_muon_groups(p)), steps=4)


@pytest.mark.slow
def test_ranger21_matches_cpu():
    assert_matches_cpu(lambda p: po.Ranger21(p, num_iterations=10, lr=1e-2), rtol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("line_search", [None, "strong_wolfe"])
def test_lbfgs_from_the_registry_is_as_close_to_float64_as_cpu(line_search):
    # (L-BFGS's inner iterations amplify rounding: after 3 steps of 20 CPU is 1e-3 from float64)
    make = lambda p: po.load_optimizer("lbfgs")(p, lr=0.1, max_iter=5,
                                                 line_search_fn=line_search)
    assert_as_close_to_float64_as_cpu(make, closure=True, steps=3, factor=8.0)


@pytest.mark.slow
def test_create_optimizer_builds_a_tpu_optimizer_as_on_cpu():
    def make(params):
        model = torch.nn.Module()
        model.params = torch.nn.ParameterList(params)
        return po.create_optimizer(model, "adamp", lr=1e-2, weight_decay=0.01,
                                   use_lookahead=True, k=2)

    assert_matches_cpu(make, steps=4)
