"""pytorch-metric-learning on tpu: losses (values, gradients of the embeddings and of the
losses' own parameters, an optimizer step), miners (the index tuples they mine), distances,
reducers, CrossBatchMemory and AccuracyCalculator's torch k-NN give CPU's results. The default
suite runs a few; ``-m slow`` sweeps every pure-torch loss and miner, in strict, fused and
compiled modes."""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import TPU, compare_with_gradients, raises_as_cpu

import torchtpu

pytest.importorskip("pytorch_metric_learning")
from pytorch_metric_learning import distances as D  # noqa: E402
from pytorch_metric_learning import losses as L  # noqa: E402
from pytorch_metric_learning import miners as M  # noqa: E402
from pytorch_metric_learning import reducers as R  # noqa: E402

N, E, C = 16, 8, 4
_g = torch.Generator().manual_seed(0)
EMB = torch.randn(N, E, generator=_g)
REF = torch.randn(N, E, generator=_g)
LABELS = torch.arange(N) % C


def _loss_matches_cpu(make, *, ref=False, steps=2):
    """The loss and its gradients (of the embeddings and of the loss's parameters, as inputs of
    a functional call), then ``steps`` SGD steps of its parameters, as on CPU."""
    torch.manual_seed(0)
    loss = make()
    names = [n for n, _ in loss.named_parameters()]

    def value(emb, labels, *params):
        # (a copy each: CrossBatchMemory's queue is a buffer each call writes)
        module = copy.deepcopy(loss).to(emb.device)
        state = dict(zip(names, params, strict=True))
        args = (emb, labels) if not ref else (emb, labels, None, REF.to(emb.device),
                                              labels.clone())
        return torch.func.functional_call(module, state, args)

    compare_with_gradients(value, EMB, LABELS, *(p.detach() for p in loss.parameters()))
    if not names:
        return
    on_tpu = copy.deepcopy(loss).to(TPU)
    for module, device in ((loss, "cpu"), (on_tpu, TPU)):
        opt = torch.optim.SGD(module.parameters(), lr=0.5, momentum=0.9)
        for step in range(steps):
            module((EMB + 0.1 * step).to(device), LABELS.to(device)).backward()
            opt.step()
            opt.zero_grad()
    for a, e in zip(on_tpu.parameters(), loss.parameters(), strict=True):
        torch.testing.assert_close(a.detach().cpu(), e.detach(), rtol=1e-4, atol=1e-4)


def _tuples(indices) -> list:
    """A miner's tuples, as a set (their order is the kernels'): pairs apart for a 4-tuple."""
    cols = [t.cpu().tolist() for t in indices]
    if len(cols) == 4:
        return [sorted(zip(cols[0], cols[1], strict=True)),
                sorted(zip(cols[2], cols[3], strict=True))]
    return sorted(zip(*cols, strict=True))


def _miner_matches_cpu(make, *, ref=False):
    mined = []
    for device in ("cpu", TPU):
        args = [EMB.to(device), LABELS.to(device)]
        if ref:  # (ref_labels apart from labels: the same object means "no self-pairs")
            args += [REF.to(device), LABELS.clone().to(device)]
        mined.append(_tuples(make()(*args)))
    assert mined[1] == mined[0]


# ---- default suite ----

def test_triplet_loss_over_batch_hard_triplets_matches_cpu():
    _miner_matches_cpu(M.BatchHardMiner)
    loss, miner = L.TripletMarginLoss(margin=0.1), M.BatchHardMiner()
    compare_with_gradients(lambda emb, labels: loss(emb, labels, miner(emb, labels)),
                           EMB, LABELS)


def test_bfloat16_lp_distance_is_refused_as_on_cpu():
    # CPU's (and cuda's) cdist kernel is built for float32/64 only
    raises_as_cpu(lambda device: D.LpDistance()(EMB.bfloat16().to(device)), NotImplementedError)


# ---- slow sweeps ----

LOSSES = {
    "Angular": L.AngularLoss,
    "ArcFace": lambda: L.ArcFaceLoss(C, E),
    "Circle": L.CircleLoss,
    "ContrastiveCosine": lambda: L.ContrastiveLoss(distance=D.CosineSimilarity(),
                                                   pos_margin=1, neg_margin=0),
    "CosFace": lambda: L.CosFaceLoss(C, E),
    "DynamicSoftMargin": L.DynamicSoftMarginLoss,
    "FastAP": L.FastAPLoss,
    "GeneralizedLifted": L.GeneralizedLiftedStructureLoss,
    "Histogram": L.HistogramLoss,
    "Instance": L.InstanceLoss,
    "IntraPairVariance": L.IntraPairVarianceLoss,
    "LargeMarginSoftmax": lambda: L.LargeMarginSoftmaxLoss(C, E),
    "LiftedStructure": L.LiftedStructureLoss,
    "Margin": lambda: L.MarginLoss(learn_beta=True, num_classes=C),
    "MultiSimilarity": L.MultiSimilarityLoss,
    "NCA": L.NCALoss,
    "NPairs": L.NPairsLoss,
    "NTXent": L.NTXentLoss,
    "NormalizedSoftmax": lambda: L.NormalizedSoftmaxLoss(C, E),
    "P2SGrad": lambda: L.P2SGradLoss(E, C),
    "PNP": L.PNPLoss,
    "ProxyAnchor": lambda: L.ProxyAnchorLoss(C, E),
    "ProxyNCA": lambda: L.ProxyNCALoss(C, E),
    "RankedList": lambda: L.RankedListLoss(margin=0.4, Tn=10),
    "SignalToNoiseRatio": L.SignalToNoiseRatioContrastiveLoss,
    "SmoothAP": L.SmoothAPLoss,
    "SoftTriple": lambda: L.SoftTripleLoss(C, E),
    "SphereFace": lambda: L.SphereFaceLoss(C, E),
    "SubCenterArcFace": lambda: L.SubCenterArcFaceLoss(num_classes=C, embedding_size=E),
    "SupCon": L.SupConLoss,
    "ThresholdConsistentMargin": L.ThresholdConsistentMarginLoss,
    "TripletSmoothCosine": lambda: L.TripletMarginLoss(smooth_loss=True,
                                                       distance=D.CosineSimilarity()),
    "TripletSNR": lambda: L.TripletMarginLoss(distance=D.SNRDistance()),
    "TripletDotSum": lambda: L.TripletMarginLoss(distance=D.DotProductSimilarity(),
                                                 reducer=R.SumReducer()),
    "TripletL1Threshold": lambda: L.TripletMarginLoss(
        distance=D.LpDistance(p=1, normalize_embeddings=False, power=2),
        reducer=R.ThresholdReducer(low=0.1)),
    "TupletMargin": L.TupletMarginLoss,
    "ContrastivePerAnchor": lambda: L.ContrastiveLoss(
        reducer=R.PerAnchorReducer(R.AvgNonZeroReducer())),
    "ContrastiveClassWeighted": lambda: L.ContrastiveLoss(reducer=R.ClassWeightedReducer(
        torch.rand(C, generator=torch.Generator().manual_seed(3)))),
    "MultipleLosses": lambda: L.MultipleLosses([L.ContrastiveLoss(), L.MultiSimilarityLoss()],
                                               weights=[1, 0.5]),
    "CrossBatchMemory": lambda: L.CrossBatchMemory(L.ContrastiveLoss(), E, memory_size=32,
                                                   miner=M.MultiSimilarityMiner()),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(LOSSES))
def test_loss_matches_cpu_with_its_parameters_steps(name):
    # (DynamicSoftMargin's histogram keeps the last graph: one step)
    _loss_matches_cpu(LOSSES[name], steps=0 if name == "DynamicSoftMargin" else 2)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ContrastiveLoss", "NTXentLoss", "SupConLoss",
                                  "MultiSimilarityLoss", "TripletMarginLoss"])
def test_loss_against_reference_embeddings_matches_cpu(name):
    _loss_matches_cpu(getattr(L, name), ref=True, steps=0)


@pytest.mark.slow
def test_unlabelled_losses_match_cpu():
    compare_with_gradients(lambda e, r: L.VICRegLoss()(e, ref_emb=r), EMB, REF)
    compare_with_gradients(lambda e, r: L.SelfSupervisedLoss(L.TripletMarginLoss())(e, r),
                           EMB, REF)
    torch.manual_seed(0)
    manifold = L.ManifoldLoss(l=E, K=5)

    def manifold_loss(emb, proxies):
        torch.manual_seed(1)  # (its meta-classes are drawn on CPU, for either device)
        module = copy.deepcopy(manifold).to(emb.device)
        return torch.func.functional_call(module, {"proxies": proxies}, (emb,))

    compare_with_gradients(manifold_loss, EMB, manifold.proxies.detach())


MINERS = {
    "Angular": lambda: M.AngularMiner(angle=20),
    "BatchHard": M.BatchHardMiner,
    "BatchEasyHard": M.BatchEasyHardMiner,
    "BatchEasyHardAll": lambda: M.BatchEasyHardMiner(pos_strategy="all", neg_strategy="hard"),
    "BatchEasyHardSemihard": lambda: M.BatchEasyHardMiner(pos_strategy="semihard",
                                                          neg_strategy="easy"),
    "BatchHardCosine": lambda: M.BatchHardMiner(distance=D.CosineSimilarity()),
    "HDC": lambda: M.HDCMiner(filter_percentage=0.5),
    "MultiSimilarity": lambda: M.MultiSimilarityMiner(epsilon=0.1),
    "PairMargin": lambda: M.PairMarginMiner(pos_margin=0.2, neg_margin=0.8),
    "PairMarginSNR": lambda: M.PairMarginMiner(distance=D.SNRDistance()),
    **{f"Triplet{kind}": lambda kind=kind: M.TripletMarginMiner(margin=0.2,
                                                                 type_of_triplets=kind)
       for kind in ("all", "hard", "semihard", "easy")},
}


@pytest.mark.slow
@pytest.mark.parametrize("ref", [False, True], ids=["self", "ref"])
@pytest.mark.parametrize("name", list(MINERS))
def test_miner_mines_cpus_tuples(name, ref):
    if ref and name == "HDC":
        pytest.skip("HDCMiner takes no reference embeddings")
    _miner_matches_cpu(MINERS[name], ref=ref)


@pytest.mark.slow
@pytest.mark.parametrize("distance", [
    D.LpDistance(), D.LpDistance(p=1, normalize_embeddings=False),
    D.LpDistance(p=float("inf"), power=2), D.CosineSimilarity(), D.DotProductSimilarity(),
    D.SNRDistance()], ids=["L2", "L1", "Linf", "cosine", "dot", "SNR"])
def test_distance_matrices_match_cpu(distance):
    compare_with_gradients(lambda q, r: (distance(q), distance(q, r),
                                         distance.pairwise_distance(q, r)), EMB, REF)


@pytest.mark.slow
def test_accuracy_calculator_with_torch_knn_matches_cpu():
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator
    from pytorch_metric_learning.utils.inference import CustomKNN

    g = torch.Generator().manual_seed(1)
    query, query_labels = torch.randn(40, E, generator=g), torch.randint(0, 5, (40,), generator=g)
    ref, ref_labels = torch.randn(60, E, generator=g), torch.randint(0, 5, (60,), generator=g)
    for distance, k in ((D.CosineSimilarity(), 10), (D.LpDistance(), "max_bin_count")):
        results = []
        for device in ("cpu", TPU):
            calc = AccuracyCalculator(knn_func=CustomKNN(distance), device=torch.device(device),
                                      k=k, exclude=("NMI", "AMI"))  # (k-means needs faiss)
            on = [t.to(device) for t in (query, query_labels, ref, ref_labels)]
            results.append(calc.get_accuracy(*on))
        assert results[1] == pytest.approx(results[0], abs=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["MultiSimilarity", "ProxyAnchor", "Margin", "FastAP"])
def test_loss_in_fused_eager_matches_cpu(name):
    with torchtpu.set_eager_mode("fused"):
        _loss_matches_cpu(LOSSES[name])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ArcFace", "Circle", "SoftTriple", "SupCon", "Histogram"])
def test_compiled_loss_matches_cpu(name):
    torch._dynamo.reset()
    torch.manual_seed(0)
    loss = LOSSES[name]()
    on_tpu = copy.deepcopy(loss).to(TPU)
    compiled = torch.compile(lambda e, y: on_tpu(e, y), backend="tpu")
    for module, fn, device in ((loss, loss, "cpu"), (on_tpu, compiled, TPU)):
        opt = torch.optim.SGD(module.parameters(), lr=0.5) if list(module.parameters()) else None
        for step in range(2):
            emb = (EMB + 0.1 * step).to(device).requires_grad_()
            value = fn(emb, LABELS.to(device))
            value.backward()
            module.last = (value.detach().cpu(), emb.grad.cpu())
            if opt:
                opt.step()
                opt.zero_grad()
    for a, e in zip(on_tpu.last, loss.last, strict=True):
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-4)
    for a, e in zip(on_tpu.parameters(), loss.parameters(), strict=True):
        torch.testing.assert_close(a.detach().cpu(), e.detach(), rtol=1e-4, atol=1e-4)
