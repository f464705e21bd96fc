"""Calls whose values CPU's kernels check (an index out of range, a probability above 1, an
integer division by zero), for the tests of the checks fused eager and torch.compile make
without waiting for the values."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F


def cpu_error(fn, *args):
    with pytest.raises(Exception) as caught:
        fn(*args)
    return type(caught.value), str(caught.value)


CASES = {
    "embedding id past the vocabulary": (
        lambda w, i: F.embedding(i, w).sum(), torch.randn(10, 4), torch.tensor([[1, 2, 12]])),
    "cross_entropy target past the classes": (
        lambda x, t: F.cross_entropy(x, t), torch.randn(3, 5), torch.tensor([1, 7, 2])),
    "gather": (lambda x, i: x.gather(1, i).sum(), torch.randn(3, 5),
               torch.tensor([[0], [9], [1]])),
    "advanced index below -size": (lambda x, i: x[i].sum(), torch.arange(10.0),
                                   torch.tensor([3, -11])),
    "index_select": (lambda x, i: x.index_select(0, i).sum(), torch.randn(4, 3),
                     torch.tensor([0, 4])),
    # whole tensors' values: logits passed to BCELoss, random ops' parameter tensors
    "binary_cross_entropy of logits": (
        lambda x, t: F.binary_cross_entropy(x, t), torch.tensor([0.5, 2.0]),
        torch.tensor([1.0, 0.0])),
    "bernoulli probability above 1": (
        lambda p, x: torch.bernoulli(p).sum() + x.sum(), torch.tensor([0.5, 1.5]),
        torch.zeros(1)),
    "normal with a negative std": (
        lambda m, s: torch.normal(m, s).sum(), torch.zeros(2), torch.tensor([1.0, -1.0])),
    "multinomial of NaN": (lambda p, n: torch.multinomial(p, 1).sum() + n.sum(),
                           torch.tensor([[0.2, float("nan"), 0.3]]), torch.zeros(1)),
    "multinomial drawing with replacement, a negative entry": (
        lambda p, n: torch.multinomial(p, 3, replacement=True).sum() + n.sum(),
        torch.tensor([[0.2, 0.3], [0.5, -0.1]]), torch.zeros(1)),
    "multinomial of an all-zero row": (lambda p, n: torch.multinomial(p, 1).sum() + n.sum(),
                                       torch.tensor([[0.2, 0.3], [0.0, 0.0]]), torch.zeros(1)),
    "integer floor division by zero": (lambda a, b: (a // b).sum(), torch.tensor([5, 7]),
                                       torch.tensor([1, 0])),
    "integer remainder by a zero tensor": (lambda a, b: (a % b).sum(), torch.tensor([5, 7]),
                                           torch.tensor([0, 2])),
    "masked_scatter with too short a source": (
        lambda x, m: x.masked_scatter(m, torch.ones(2, device=x.device)).sum(), torch.zeros(4),
        torch.tensor([True, True, False, True])),
    "searchsorted with a sorter out of range": (
        lambda s, v: torch.searchsorted(s, v, sorter=torch.tensor([2, 0, 5]).to(s.device)).sum(),
        torch.tensor([3.0, 1.0, 2.0]), torch.tensor([2.5])),
    "histc over data that is not finite": (
        lambda x, n: torch.histc(x, 4).sum() + n.sum(), torch.tensor([1.0, float("inf")]),
        torch.zeros(1)),
    # (CPU's min and max of several values make x86's default NaN: "-nan" in its words)
    "histc over data holding a NaN": (
        lambda x, n: torch.histc(x, 4).sum() + n.sum(), torch.tensor([1.0, float("nan"), 2.0]),
        torch.zeros(1)),
    "segment_reduce lengths that do not sum to the data": (
        lambda d, lengths: torch.segment_reduce(d, "sum", lengths=lengths).sum(),
        torch.arange(6.0), torch.tensor([3, 4])),
    "segment_reduce with a negative length": (
        lambda d, lengths: torch.segment_reduce(d, "sum", lengths=lengths).sum(),
        torch.arange(6.0), torch.tensor([-1, 7])),
    "multilabel_margin_loss target past the classes": (
        lambda x, t: F.multilabel_margin_loss(x, t), torch.randn(2, 3),
        torch.tensor([[0, -1, 5], [1, 2, -1]])),
    "multilabel_margin_loss target below -1": (
        lambda x, t: F.multilabel_margin_loss(x, t), torch.randn(2, 3),
        torch.tensor([[0, 1, -1], [-2, 0, 1]])),
    "embedding_bag offsets that do not start at 0": (
        lambda w, o: F.embedding_bag(torch.tensor([1, 2, 3]).to(w.device), w, o).sum(),
        torch.randn(5, 3), torch.tensor([1, 2])),
    "embedding_bag offsets past the indices": (
        lambda w, o: F.embedding_bag(torch.tensor([1, 2, 3]).to(w.device), w, o).sum(),
        torch.randn(5, 3), torch.tensor([0, 4])),
    "max_unpool2d index outside the output": (
        lambda x, i: F.max_unpool2d(x, i, 2).sum(), torch.ones(1, 1, 2, 2),
        torch.tensor([[[[0, 3], [8, 16]]]])),
}
