"""sentence-transformers on tpu, offline: a tiny randomly initialised BERT (its config built
here, a word-level vocabulary written to a temporary folder) wrapped as a SentenceTransformer,
a CrossEncoder and a SparseEncoder. ``encode(..., device="tpu")``, the training losses (one
loss, its gradients and optimizer steps through a plain torch loop) and ``util``'s search
functions give CPU's results. The default suite encodes once; ``-m slow`` sweeps poolings,
losses, modules and the strict, fused and compiled modes."""

from __future__ import annotations

import copy
import os
import random

import pytest
import torch
from conftest import TPU

import torchtpu

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytest.importorskip("sentence_transformers")
from sentence_transformers import SentenceTransformer, util  # noqa: E402
from sentence_transformers.sentence_transformer import modules as st_models  # noqa: E402
from transformers import (  # noqa: E402
    BertConfig,
    BertForMaskedLM,
    BertForSequenceClassification,
    BertModel,
    BertTokenizerFast,
)

WORDS = ("the a cat dog sat on mat runs fast slow red blue green house car tree big small is "
         "was and").split()
SENTENCES = ["the cat sat on the mat", "a dog runs fast", "the red car is big",
             "blue house and green tree", "the small dog was slow", "a cat runs",
             "the big red house", "green car"]
HIDDEN = 32


def _config(**kwargs) -> BertConfig:
    # (no dropout: its draws are tpu's own, as they are cuda's)
    return BertConfig(vocab_size=5 + len(WORDS), hidden_size=HIDDEN, num_hidden_layers=2,
                      num_attention_heads=4, intermediate_size=64, max_position_embeddings=64,
                      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **kwargs)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """Folders holding a tiny BERT (plain, for sequence classification, masked-LM) and its
    tokenizer, as a hub download would."""
    vocab = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    tokenizer = BertTokenizerFast(str(vocab))
    folders = {}
    for kind, model_class, extra in (("bert", BertModel, {}),
                                     ("cross", BertForSequenceClassification, {"num_labels": 1}),
                                     ("mlm", BertForMaskedLM, {})):
        folder = tmp_path_factory.mktemp(kind)
        torch.manual_seed(0)
        model_class(_config(**extra)).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        folders[kind] = str(folder)
    return folders


def _sentence_model(checkpoints, pooling="mean", dense=True, normalize=True, seed=0):
    torch.manual_seed(seed)
    modules = [st_models.Transformer(checkpoints["bert"], max_seq_length=32),
               st_models.Pooling(HIDDEN, pooling_mode=pooling)]
    if dense:
        modules.append(st_models.Dense(HIDDEN, 16, activation_function=torch.nn.Tanh()))
    if normalize:
        modules.append(st_models.Normalize())
    return SentenceTransformer(modules=modules, device="cpu")


def _assert_close(actual, expected, tol=1e-4):
    actual = actual.cpu() if isinstance(actual, torch.Tensor) else torch.as_tensor(actual)
    expected = torch.as_tensor(expected)
    torch.testing.assert_close(actual, expected, rtol=tol, atol=tol)


def _encodings_match_cpu(model, batch_size=3, **kwargs):
    expected = model.encode(SENTENCES, convert_to_tensor=True, batch_size=batch_size, **kwargs)
    actual = model.encode(SENTENCES, convert_to_tensor=True, batch_size=batch_size, device=TPU,
                          **kwargs)
    assert actual.device.type == "tpu"
    _assert_close(actual, expected)


# ---- default suite ----

def test_encode_on_tpu_matches_cpu(checkpoints):
    model = _sentence_model(checkpoints)
    _encodings_match_cpu(model, batch_size=len(SENTENCES))  # (one batch: one set of programs)
    _assert_close(model.encode(SENTENCES, device=TPU), model.encode(SENTENCES))  # numpy


# ---- slow sweeps ----

@pytest.mark.slow
@pytest.mark.parametrize("pooling", ["mean", "cls", "max", "lasttoken", "mean_sqrt_len_tokens",
                                     "weightedmean"])
def test_pooling_matches_cpu(checkpoints, pooling):
    _encodings_match_cpu(_sentence_model(checkpoints, pooling))


@pytest.mark.slow
def test_token_embeddings_truncation_and_prompts_match_cpu(checkpoints):
    model = _sentence_model(checkpoints, dense=False, normalize=False)
    _encodings_match_cpu(model, truncate_dim=8, normalize_embeddings=True, prompt="the ")
    expected = model.encode(SENTENCES[:3], output_value="token_embeddings", device="cpu")
    actual = model.encode(SENTENCES[:3], output_value="token_embeddings", device=TPU)
    for a, e in zip(actual, expected, strict=True):
        _assert_close(a, e)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_encode_in_other_dtypes_matches_cpu(checkpoints, dtype):
    model = _sentence_model(checkpoints).to(dtype)
    expected = model.encode(SENTENCES, convert_to_tensor=True)
    actual = model.encode(SENTENCES, convert_to_tensor=True, device=TPU)
    assert actual.dtype == expected.dtype == dtype
    _assert_close(actual.double(), expected.double(), 1e-6 if dtype == torch.float64 else 3e-2)


@pytest.mark.slow
def test_util_similarities_and_searches_match_cpu(checkpoints):
    g = torch.Generator().manual_seed(0)
    queries, corpus = torch.randn(6, 16, generator=g), torch.randn(50, 16, generator=g)
    for fn in (util.cos_sim, util.dot_score, util.manhattan_sim, util.euclidean_sim):
        _assert_close(fn(queries.to(TPU), corpus.to(TPU)), fn(queries, corpus))
    _assert_close(util.pairwise_cos_sim(queries.to(TPU), corpus[:6].to(TPU)),
                  util.pairwise_cos_sim(queries, corpus[:6]))
    for score in (util.cos_sim, util.dot_score):
        hits = [util.semantic_search(q, c, top_k=5, score_function=score, query_chunk_size=4,
                                     corpus_chunk_size=17)
                for q, c in ((queries, corpus), (queries.to(TPU), corpus.to(TPU)))]
        assert [[h["corpus_id"] for h in q] for q in hits[1]] == \
               [[h["corpus_id"] for h in q] for q in hits[0]]
        _assert_close([[h["score"] for h in q] for q in hits[1]],
                      [[h["score"] for h in q] for q in hits[0]])
    groups = torch.cat([torch.randn(4, 16, generator=g) + 0.1 * torch.randn(4, 16, generator=g)
                        for _ in range(5)])
    assert util.community_detection(groups.to(TPU), threshold=0.5, min_community_size=2) == \
        util.community_detection(groups, threshold=0.5, min_community_size=2)

    model = _sentence_model(checkpoints)
    expected = util.paraphrase_mining(model, SENTENCES, top_k=3)
    actual = util.paraphrase_mining(model.to(TPU), SENTENCES, top_k=3)
    assert [p[1:] for p in actual] == [p[1:] for p in expected]
    _assert_close([p[0] for p in actual], [p[0] for p in expected])


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["int8", "uint8", "binary", "ubinary"])
def test_quantized_encodings_match_cpu(checkpoints, precision):
    model = _sentence_model(checkpoints)
    expected = model.encode(SENTENCES, precision=precision)
    actual = model.encode(SENTENCES, precision=precision, device=TPU)
    assert actual.dtype == expected.dtype
    # (a value at a bucket's edge may round to its neighbour)
    assert abs(actual.astype(int) - expected.astype(int)).max() <= 1


def _loss(name, model):
    from sentence_transformers import losses

    return {
        "MultipleNegativesRanking": lambda: losses.MultipleNegativesRankingLoss(model),
        "MultipleNegativesSymmetricRanking":
            lambda: losses.MultipleNegativesSymmetricRankingLoss(model),
        "CachedMultipleNegativesRanking":
            lambda: losses.CachedMultipleNegativesRankingLoss(model, mini_batch_size=2),
        "CosineSimilarity": lambda: losses.CosineSimilarityLoss(model),
        "CoSENT": lambda: losses.CoSENTLoss(model),
        "AnglE": lambda: losses.AnglELoss(model),
        "Triplet": lambda: losses.TripletLoss(model),
        "BatchHardTriplet": lambda: losses.BatchHardTripletLoss(model),
        "Contrastive": lambda: losses.ContrastiveLoss(model),
        "OnlineContrastive": lambda: losses.OnlineContrastiveLoss(model),
        "MSE": lambda: losses.MSELoss(model),
        "Softmax": lambda: losses.SoftmaxLoss(model, 16, 3),
        "Matryoshka": lambda: losses.MatryoshkaLoss(
            model, losses.MultipleNegativesRankingLoss(model), [16, 8, 4]),
        "AdaptiveLayer": lambda: losses.AdaptiveLayerLoss(
            model, losses.MultipleNegativesRankingLoss(model)),
        "MegaBatchMargin": lambda: losses.MegaBatchMarginLoss(model, mini_batch_size=2),
    }[name]()


# (columns of the batch: anchors, positives[, negatives]), labels
_BATCHES = {
    "pairs": (2, None), "triplets": (3, None), "scored": (2, torch.linspace(0, 1, 3)),
    "binary": (2, torch.tensor([1, 0, 1])), "classes": (2, torch.tensor([0, 2, 1])),
    "grouped": (1, torch.tensor([0, 1, 0, 1, 2, 2, 0, 1])),
    "targets": (1, torch.randn(8, 16, generator=torch.Generator().manual_seed(0))),
}
_LOSS_BATCHES = {
    "MultipleNegativesRanking": "triplets", "MultipleNegativesSymmetricRanking": "triplets",
    "CachedMultipleNegativesRanking": "triplets", "CosineSimilarity": "scored",
    "CoSENT": "scored", "AnglE": "scored", "Triplet": "triplets", "BatchHardTriplet": "grouped",
    "Contrastive": "binary", "OnlineContrastive": "binary", "MSE": "targets",
    "Softmax": "classes", "Matryoshka": "triplets", "AdaptiveLayer": "triplets",
    "MegaBatchMargin": "pairs",
}


def _training_matches_cpu(checkpoints, name, compiled=False, steps=2):
    columns, labels = _BATCHES[_LOSS_BATCHES[name]]
    results = []
    for device in ("cpu", TPU):
        random.seed(0)  # (AdaptiveLayerLoss samples its layers with Python's generator)
        model = _sentence_model(checkpoints, seed=1)
        loss = _loss(name, model).to(device)  # (a head the loss adds is drawn on CPU)
        optimizer = torch.optim.AdamW(loss.parameters(), lr=1e-3)
        sentences = SENTENCES[:6] if columns > 1 else SENTENCES
        features = [{k: v.to(device) if isinstance(v, torch.Tensor) else v
                     for k, v in model.preprocess(sentences[i::columns]).items()}
                    for i in range(columns)]
        target = None if labels is None else labels.to(device)

        def step(features=features, target=target, loss=loss):
            value = loss(features, target)
            value.backward()
            return value

        if compiled and device != "cpu":
            torch._dynamo.reset()
            step = torch.compile(step, backend="tpu")
        model.train()
        values = []
        for _ in range(steps):
            values.append(step().detach().cpu())
            optimizer.step()
            optimizer.zero_grad()
        results.append((torch.stack(values),
                        {k: p.detach().cpu() for k, p in loss.named_parameters()}))
    (expected, expected_params), (actual, actual_params) = results
    _assert_close(actual, expected)
    for key, value in expected_params.items():
        # (Adam's first step is lr * sign(grad) where a gradient is ~1e-8: looser there)
        _assert_close(actual_params[key], value, 3e-4)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(_LOSS_BATCHES))
def test_training_loss_and_steps_match_cpu(checkpoints, name):
    _training_matches_cpu(checkpoints, name)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["MultipleNegativesRanking", "CoSENT", "Matryoshka"])
def test_training_in_fused_eager_matches_cpu(checkpoints, name):
    with torchtpu.set_eager_mode("fused"):
        _training_matches_cpu(checkpoints, name)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["MultipleNegativesRanking", "CoSENT"])
def test_compiled_training_step_matches_cpu(checkpoints, name):
    _training_matches_cpu(checkpoints, name, compiled=True)


@pytest.mark.slow
@pytest.mark.parametrize("pooling", ["mean", "max"])
def test_compiled_encode_matches_cpu(checkpoints, pooling):
    torch._dynamo.reset()
    model = _sentence_model(checkpoints, pooling)
    expected = model.encode(SENTENCES, convert_to_tensor=True, batch_size=4)
    on_tpu = copy.deepcopy(model).to(TPU)
    on_tpu.compile(backend="tpu")
    _assert_close(on_tpu.encode(SENTENCES, convert_to_tensor=True, batch_size=4), expected)
    _assert_close(on_tpu.encode(SENTENCES[::-1], convert_to_tensor=True, batch_size=4),
                  expected.flip(0))


@pytest.mark.slow
def test_cross_encoder_predicts_ranks_and_trains_as_cpu(checkpoints):
    from sentence_transformers.cross_encoder import CrossEncoder, losses

    pairs = [(SENTENCES[0], SENTENCES[1]), (SENTENCES[2], SENTENCES[3]),
             (SENTENCES[4], SENTENCES[5])]
    model = CrossEncoder(checkpoints["cross"], device="cpu")
    expected = model.predict(pairs, convert_to_tensor=True)
    ranks = model.rank(SENTENCES[0], SENTENCES[1:])
    on_tpu = copy.deepcopy(model).to(TPU)
    _assert_close(on_tpu.predict(pairs, convert_to_tensor=True), expected)
    assert [r["corpus_id"] for r in on_tpu.rank(SENTENCES[0], SENTENCES[1:])] == \
        [r["corpus_id"] for r in ranks]

    for make, inputs, labels in (
            (losses.BinaryCrossEntropyLoss, [[s for s, _ in pairs], [t for _, t in pairs]],
             torch.tensor([1.0, 0.0, 1.0])),
            (lambda m: losses.MultipleNegativesRankingLoss(m, num_negatives=2),
             [SENTENCES[:3], SENTENCES[3:6]], None),
            (losses.LambdaLoss, [SENTENCES[:2], [SENTENCES[2:5], SENTENCES[5:8]]],
             [torch.tensor([1.0, 0.0, 2.0]), torch.tensor([0.0, 1.0, 0.0])]),
            (losses.ListNetLoss, [SENTENCES[:2], [SENTENCES[2:5], SENTENCES[5:8]]],
             [torch.tensor([1.0, 0.0, 2.0]), torch.tensor([0.0, 1.0, 0.0])])):
        results = []
        for device in ("cpu", TPU):
            encoder = CrossEncoder(checkpoints["cross"], device="cpu")
            loss = make(encoder)
            encoder.to(device)
            target = (labels.to(device) if isinstance(labels, torch.Tensor)
                      else labels and [t.to(device) for t in labels])
            encoder.train()
            value = loss(inputs, target)
            value.backward()
            results.append((value.detach().cpu(), [p.grad.cpu() for p in
                                                   encoder.model.parameters()]))
        _assert_close(results[1][0], results[0][0])
        for actual, expected in zip(results[1][1], results[0][1], strict=True):
            _assert_close(actual, expected, 1e-3)


@pytest.mark.slow
def test_sparse_encoder_dense_encodings_and_splade_loss_match_cpu(checkpoints):
    from sentence_transformers import SparseEncoder
    from sentence_transformers.sparse_encoder import losses
    from sentence_transformers.sparse_encoder.models import MLMTransformer, SpladePooling

    def model():
        return SparseEncoder(modules=[MLMTransformer(checkpoints["mlm"]), SpladePooling("max")],
                             device="cpu")

    cpu = model()
    expected = cpu.encode(SENTENCES, convert_to_tensor=True, convert_to_sparse_tensor=False)
    actual = cpu.encode(SENTENCES, convert_to_tensor=True, convert_to_sparse_tensor=False,
                        device=TPU)
    _assert_close(actual, expected)
    # the sparse encodings: sparse COO tensors on tpu (torchtpu/sparse.py), CPU's entries
    sparse = cpu.encode(SENTENCES, convert_to_tensor=True, device=TPU)
    assert sparse.is_sparse and sparse.device.type == "tpu"
    _assert_close(sparse.to_dense(), cpu.encode(SENTENCES, convert_to_tensor=True,
                                                 device="cpu").to_dense())
    _assert_close(cpu.to(TPU).similarity(actual, actual), cpu.cpu().similarity(expected, expected))

    results = []
    for device in ("cpu", TPU):
        encoder = model()
        loss = losses.SpladeLoss(encoder, losses.SparseMultipleNegativesRankingLoss(encoder),
                                 document_regularizer_weight=3e-5,
                                 query_regularizer_weight=5e-5)
        encoder.to(device)
        features = [{k: v.to(device) if isinstance(v, torch.Tensor) else v
                     for k, v in encoder.preprocess(SENTENCES[i::2]).items()} for i in range(2)]
        encoder.train()
        value = loss(features, None)
        value = sum(value.values()) if isinstance(value, dict) else value
        value.backward()
        results.append((value.detach().cpu(), [p.grad.cpu() for p in encoder.parameters()
                                               if p.grad is not None]))
    _assert_close(results[1][0], results[0][0])
    for actual, expected in zip(results[1][1], results[0][1], strict=True):
        _assert_close(actual, expected, 1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["static", "lstm", "cnn"])
def test_word_level_modules_encode_and_train_as_cpu(checkpoints, kind):
    from sentence_transformers import losses
    from sentence_transformers.sentence_transformer.modules import (
        CNN,
        LSTM,
        StaticEmbedding,
        WordEmbeddings,
    )

    tokenizer = BertTokenizerFast.from_pretrained(checkpoints["bert"])

    def model():
        torch.manual_seed(0)
        if kind == "static":  # an EmbeddingBag over the token ids
            return SentenceTransformer(modules=[StaticEmbedding(tokenizer, embedding_dim=16)],
                                       device="cpu")
        words = WordEmbeddings(tokenizer, torch.randn(len(tokenizer.vocab), 16).numpy(),
                               update_embeddings=True)
        encoder, width = ((LSTM(16, 8, num_layers=2, bidirectional=True), 16) if kind == "lstm"
                          else (CNN(16, out_channels=8, kernel_sizes=[1, 3, 5]), 24))
        return SentenceTransformer(modules=[words, encoder, st_models.Pooling(width, "mean")],
                                   device="cpu")

    _encodings_match_cpu(model())
    results = []
    for device in ("cpu", TPU):
        m = model()
        loss = losses.MultipleNegativesRankingLoss(m).to(device)
        optimizer = torch.optim.Adam(loss.parameters(), lr=1e-2)
        features = [{k: v.to(device) if isinstance(v, torch.Tensor) else v
                     for k, v in m.preprocess(SENTENCES[i::2]).items()} for i in range(2)]
        values = []
        for _ in range(2):
            value = loss(features, None)
            value.backward()
            optimizer.step()
            optimizer.zero_grad()
            values.append(value.detach().cpu())
        results.append((torch.stack(values), [p.detach().cpu() for p in loss.parameters()]))
    _assert_close(results[1][0], results[0][0])
    for actual, expected in zip(results[1][1], results[0][1], strict=True):
        _assert_close(actual, expected, 1e-3)
