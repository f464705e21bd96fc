"""Sparse CSR and CSC tensors on tpu (torchtpu/sparse_compressed.py) against PyTorch's on CPU:
indices, values, dtypes, layouts, products, gradients and error messages."""

from __future__ import annotations

import io
import warnings

import pytest
import torch
from conftest import TPU, assert_same, raises_as_cpu

import torchtpu

warnings.filterwarnings("ignore", "Sparse CSR tensor support is in beta", UserWarning)
warnings.filterwarnings("ignore", "Sparse invariant checks", UserWarning)

DENSE = torch.tensor([[0.0, 1.0, 0.0, 4.0], [2.0, 0.0, 3.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
COMPRESSED = (torch.sparse_csr, torch.sparse_csc)
X = torch.randn(4, 5, generator=torch.Generator().manual_seed(0))


def _members(t):
    if t.layout is torch.sparse_csr:
        return t.crow_indices(), t.col_indices(), t.values()
    return t.ccol_indices(), t.row_indices(), t.values()


def assert_compressed_same(actual, expected):
    """The same CSR/CSC tensor as stored: layout, size, dtype, indices and values."""
    assert actual.layout == expected.layout and actual.device.type == "tpu"
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    for a, e in zip(_members(actual), _members(expected), strict=True):
        assert a.device.type == "tpu"
        assert_same(a, e)


def both(fn):
    expected, actual = fn("cpu"), fn(TPU)
    if isinstance(expected, torch.Tensor) and expected.layout in COMPRESSED:
        assert_compressed_same(actual, expected)
    elif isinstance(expected, torch.Tensor) and expected.layout is torch.sparse_coo:
        assert actual.layout is torch.sparse_coo
        assert actual.is_coalesced() == expected.is_coalesced()
        assert_same(actual._indices(), expected._indices())
        assert_same(actual._values(), expected._values())
    else:
        assert_same(actual, expected)


def _csr(d, dtype=torch.float32):
    return DENSE.to(d, dtype).to_sparse_csr()


@pytest.mark.parametrize("layout", COMPRESSED)
def test_conversions_match_cpu(layout):
    both(lambda d: DENSE.to(d).to_sparse(layout=layout))
    both(lambda d: DENSE.to(d).to_sparse_csr() if layout is torch.sparse_csr
         else DENSE.to(d).to_sparse_csc())
    both(lambda d: DENSE.to_sparse(layout=layout).to(d))  # moved from the CPU
    both(lambda d: DENSE.to(d).to_sparse(layout=layout).to_dense())
    both(lambda d: DENSE.to(d).to_sparse(layout=layout).to_sparse())  # CSC's is uncoalesced
    both(lambda d: DENSE.to(d).to_sparse().to_sparse(layout=layout))  # from COO
    both(lambda d: DENSE.to(d).to_sparse(layout=layout).to_sparse_csr())
    both(lambda d: DENSE.to(d).to_sparse(layout=layout).to_sparse_csc())
    both(lambda d: DENSE.to(d).to_sparse(layout=layout).t())  # CSR <-> CSC, no copy
    both(lambda d: torch.zeros(3, 2, device=d).to_sparse(layout=layout))  # no entries
    both(lambda d: DENSE.to(d).to_sparse(layout=layout).double())


def test_constructor_members_and_duplicates_match_cpu():
    crow, col = torch.tensor([0, 2, 3]), torch.tensor([1, 1, 0])  # (0, 1) twice
    both(lambda d: torch.sparse_csr_tensor(crow, col, torch.tensor([1.0, 2, 3]), (2, 3),
                                           device=d))
    both(lambda d: torch.sparse_csr_tensor(crow.to(d), col.to(d), torch.tensor([1.0, 2, 3])
                                           .to(d), (2, 3)).to_dense())  # duplicates add
    both(lambda d: torch.sparse_csr_tensor(crow.int(), col.int(), torch.ones(3), (2, 3),
                                           device=d) @ torch.ones(3, 2, device=d))
    both(lambda d: torch.sparse_csr_tensor(torch.tensor([0, 1, 2]), torch.tensor([1, 0]),
                                           torch.ones(2, 2), (2, 3, 2), device=d).to_dense())
    c = _csr(TPU)
    assert_compressed_same(c.cpu().to(TPU), _csr("cpu"))
    assert (c._nnz(), c.sparse_dim(), c.dense_dim()) == (4, 2, 0)
    assert "crow_indices=tensor([0, 2, 4, 4]" in repr(c) and "device='tpu:0'" in repr(c)


@pytest.mark.parametrize("layout", COMPRESSED)
def test_products_with_dense_operands_match_cpu(layout):
    s = lambda d: DENSE.to(d).to_sparse(layout=layout)  # noqa: E731
    both(lambda d: s(d) @ X.to(d))
    both(lambda d: torch.mm(s(d), X.to(d)))
    both(lambda d: torch.sparse.mm(s(d), X.to(d)))
    both(lambda d: torch.matmul(s(d), X[:, 0].to(d)))
    both(lambda d: torch.mv(s(d), X[:, 1].to(d)))
    both(lambda d: X.t()[:2, :3].to(d) @ s(d))
    both(lambda d: torch.addmm(torch.ones(3, 5, device=d), s(d), X.to(d), beta=0.5, alpha=2))


def test_products_of_two_compressed_operands_match_cpu():
    other = torch.tensor([[1.0, 0.0], [0.0, 0.0], [1.0, -2.0], [0.0, 3.0]])
    both(lambda d: _csr(d) @ other.to(d).to_sparse_csr())  # a CSR result, zeros kept
    both(lambda d: DENSE.to(d).to_sparse_csc() @ other.to(d).to_sparse_csc())  # CSR too


def test_sampled_addmm_matches_cpu():
    m1, m2 = torch.randn(3, 2), torch.randn(2, 4)
    both(lambda d: torch.sparse.sampled_addmm(_csr(d), m1.to(d), m2.to(d), beta=0.5, alpha=2))
    both(lambda d: torch.sparse.sampled_addmm(_csr(d), m1.to(d), m2.to(d), beta=0))
    raises_as_cpu(lambda d: torch.sparse.sampled_addmm(_csr(d), m1.to(d), m1.t().to(d)))


def test_product_errors_match_cpu():
    raises_as_cpu(lambda d: _csr(d) @ X.to(d, torch.float64))
    raises_as_cpu(lambda d: _csr(d) @ torch.ones(3, 2, device=d))


@pytest.mark.parametrize("mode", ["strict", pytest.param("fused", marks=pytest.mark.slow)])
def test_gradients_match_cpu(mode):
    def grads(d):
        x = X.clone().to(d).requires_grad_()
        values = torch.tensor([1.0, 2.0, 3.0, 4.0], device=d, requires_grad=True)
        dense = DENSE.clone().to(d).requires_grad_()
        s = torch.sparse_csr_tensor(torch.tensor([0, 2, 4, 4], device=d),
                                    torch.tensor([1, 3, 0, 2], device=d), values, (3, 4))
        loss = (s @ x).pow(2).sum() + s.to_dense().pow(3).sum() \
            + dense.to_sparse_csr().to_dense().sin().sum()
        loss.backward()
        return loss, x.grad, values.grad, dense.grad

    with torchtpu.set_eager_mode(mode):
        both(grads)


def test_value_wise_ops_match_cpu():
    both(lambda d: -_csr(d))
    both(lambda d: torch.sin(_csr(d)))
    both(lambda d: _csr(d).sqrt().relu())
    both(lambda d: _csr(d).isnan())
    both(lambda d: _csr(d) * 2)
    both(lambda d: 3 * _csr(d))
    both(lambda d: _csr(d).neg_().abs_())
    both(lambda d: _csr(d).mul_(torch.tensor(0.5)))
    both(lambda d: _csr(d).clone())
    both(lambda d: _csr(d).sum())
    both(lambda d: _csr(d, torch.int64).sum())
    both(lambda d: _csr(d).copy_((DENSE * 2).to(d).to_sparse_csr()))


def test_additions_match_cpu():
    other = torch.tensor([[1.0, -1.0, 0.0, 0.0], [0.0, 0.0, -3.0, 0.0], [0.0, 5.0, 0.0, 0.0]])
    both(lambda d: _csr(d) + other.to(d).to_sparse_csr())  # union of entries; a zero kept
    both(lambda d: torch.add(_csr(d), other.to(d).to_sparse_csr(), alpha=2))
    both(lambda d: _csr(d) + other.to(d))
    both(lambda d: other.to(d) + _csr(d))
    both(lambda d: other.clone().to(d).add_(_csr(d), alpha=-1))


@pytest.mark.parametrize("layout", COMPRESSED)
def test_factories_and_fills_match_cpu(layout):
    both(lambda d: torch.zeros(2, 3, layout=layout, device=d))
    empty = torch.empty(4, 2, layout=layout, device=TPU)
    assert (empty.layout, empty.shape, empty._nnz()) == (layout, (4, 2), 0)
    assert empty.values().device.type == "tpu"
    both(lambda d: torch.zeros_like(DENSE.to(d).to_sparse(layout=layout)))
    both(lambda d: DENSE.to(d).to_sparse(layout=layout).zero_())
    both(lambda d: DENSE.to(d).to_sparse(layout=layout).fill_(5))


def test_save_and_load_match_cpu():
    def saved(d):
        buffer = io.BytesIO()
        torch.save({"m": _csr(d)}, buffer)
        buffer.seek(0)
        return torch.load(buffer)["m"]

    both(saved)


@pytest.mark.parametrize("layout", COMPRESSED)
def test_selecting_a_row_or_column_gives_cpus_coo_tensor(layout):
    for dim, index in ((0, 1), (1, 3), (0, -1), (1, 2)):
        both(lambda d, dim=dim, index=index: X.to(d).relu().to_sparse(layout=layout).select(
            dim, index))
    both(lambda d: X.to(d).relu().to_sparse_csr()[2])
    raises_as_cpu(lambda d: X.to(d).to_sparse(layout=layout).select(0, 4), IndexError)
    hybrid = torch.randn(4, 5, 2, generator=torch.Generator().manual_seed(1)).relu()
    both(lambda d: hybrid.to_sparse_csr(dense_dim=1).to(d).select(2, 1).to_dense())


def test_unsupported_ops_are_refused_by_name():
    c = _csr(TPU)
    with pytest.raises(NotImplementedError, match="_to_sparse_bsr.*layout=torch.sparse_csr"):
        c.to_sparse_bsr((1, 1))
    with pytest.raises(NotImplementedError, match="3-d tensor to torch.sparse_csr"):
        torch.ones(2, 2, 3, device=TPU).to_sparse_csr()
    with pytest.raises(NotImplementedError, match="max.*sparse compressed"):
        torch.max(c)


@pytest.mark.slow  # (torch_geometric's import)
def test_pyg_layers_with_a_csr_adjacency_match_cpu():
    pyg = pytest.importorskip("torch_geometric")
    from torch_geometric.utils import to_torch_csr_tensor

    edges = torch.tensor([[0, 1, 1, 2, 3], [1, 0, 2, 1, 0]])
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))
    for make in (lambda: pyg.nn.SAGEConv(8, 4), lambda: pyg.nn.GINConv(torch.nn.Linear(8, 4))):
        torch.manual_seed(1)
        layer = make()
        expected = layer(x, to_torch_csr_tensor(edges, size=(4, 4)).t())
        layer.to(TPU)
        actual = layer(x.to(TPU), to_torch_csr_tensor(edges.to(TPU), size=(4, 4)).t())
        assert_same(actual, expected)
