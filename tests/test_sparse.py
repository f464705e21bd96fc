"""Sparse COO tensors on tpu (torchtpu/sparse.py) against PyTorch's on CPU: values, dtypes,
nnz, the coalesced flag and error messages."""

from __future__ import annotations

import io
import warnings

import pytest
import torch
from conftest import TPU, assert_same, raises_as_cpu

import torchtpu

warnings.filterwarnings("ignore", "Sparse invariant checks", UserWarning)

IDX = torch.tensor([[1, 0, 1, 2], [0, 1, 0, 2]])  # (1, 0) twice: uncoalesced
V = torch.tensor([1.0, 2.0, 3.0, -4.0])
SLOW = pytest.mark.slow


def _sparse(device, dtype=torch.float32, coalesce=False):
    s = torch.sparse_coo_tensor(IDX, V.to(dtype, copy=True), (3, 3), device=device)
    return s.coalesce() if coalesce else s


def assert_sparse_same(actual, expected):
    """The same sparse tensor entry for entry, as stored (not only the same values)."""
    assert actual.layout == expected.layout == torch.sparse_coo
    assert actual.device.type == "tpu"
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    assert actual.is_coalesced() == expected.is_coalesced()
    assert (actual.sparse_dim(), actual.dense_dim(), actual._nnz()) == (
        expected.sparse_dim(), expected.dense_dim(), expected._nnz())
    assert torch.equal(actual._indices().cpu(), expected._indices())
    assert_same(actual._values(), expected._values())


def both(fn):
    """``fn(device)`` on CPU and on tpu: the same sparse tensor, or the same dense one."""
    expected, actual = fn("cpu"), fn(TPU)
    if isinstance(expected, torch.Tensor) and expected.is_sparse:
        assert_sparse_same(actual, expected)
    else:
        assert actual.layout == torch.strided
        assert_same(actual, expected)


def test_constructions_match_cpu():
    both(lambda d: torch.sparse_coo_tensor(IDX, V, (3, 3), device=d))
    both(lambda d: torch.sparse_coo_tensor(IDX.to(d), V.to(d), (3, 3)))
    both(lambda d: torch.sparse_coo_tensor(IDX.to(d), V.to(d)))  # size read from the indices
    both(lambda d: torch.sparse_coo_tensor(IDX[:1], torch.ones(4, 2), (3, 2), device=d))  # hybrid
    both(lambda d: torch.sparse_coo_tensor(size=(2, 3), device=d))  # no entries: coalesced
    both(lambda d: torch.sparse_coo_tensor([[1], [0]], [2.0], (2, 3), device=d))
    both(lambda d: torch.sparse_coo_tensor(IDX, V, (3, 3), device=d, dtype=torch.float64))
    both(lambda d: torch.sparse_coo_tensor(IDX, V, (3, 3), device=d, is_coalesced=False))
    both(lambda d: torch.sparse_coo_tensor(IDX, V, (3, 3)).to(d))
    both(lambda d: torch.eye(3).to_sparse().to(d))
    s = torch.sparse_coo_tensor(IDX, V, (3, 3), device="tpu")
    assert s.is_sparse and s.layout == torch.sparse_coo and s.device == torch.device(TPU)


def test_invalid_constructions_raise_as_cpu():
    raises_as_cpu(lambda d: torch.sparse_coo_tensor(IDX, V, (1, 3), device=d,
                                                     check_invariants=True))
    raises_as_cpu(lambda d: torch.sparse_coo_tensor(-IDX, V, (3, 3), device=d,
                                                     check_invariants=True))
    raises_as_cpu(lambda d: torch.sparse_coo_tensor(IDX, V[:2], (3, 3), device=d))
    raises_as_cpu(lambda d: torch.sparse_coo_tensor(IDX, V, (3,), device=d))
    # an is_coalesced claim checked (an internal assert on tpu before), from tpu members too
    raises_as_cpu(lambda d: torch.sparse_coo_tensor(IDX.to(d), V.to(d), (3, 3),
                                                     is_coalesced=True, check_invariants=True))
    raises_as_cpu(lambda d: torch._validate_sparse_coo_tensor_args(IDX.to(d), V.to(d), (3, 3),
                                                                    True))
    both(lambda d: torch.sparse_coo_tensor(IDX[:, 1:].to(d), V[1:].to(d), is_coalesced=True,
                                           check_invariants=True))


def test_copies_and_conversions_match_cpu():
    both(lambda d: _sparse(d).cpu().to(d))
    both(lambda d: _sparse(d).double())
    both(lambda d: _sparse(d).to(torch.int32))
    both(lambda d: _sparse(d).clone())
    both(lambda d: _sparse(d).detach())
    both(lambda d: torch.zeros_like(_sparse(d)))
    both(lambda d: torch.zeros_like(_sparse(d), layout=torch.strided))
    assert _sparse(TPU).cpu().device.type == "cpu"


def test_parts_and_metadata_match_cpu():
    s, c = _sparse(TPU), _sparse(TPU, coalesce=True)
    assert (s._nnz(), s.sparse_dim(), s.dense_dim(), s.is_coalesced()) == (4, 2, 0, False)
    assert_same(s._indices(), IDX)
    assert_same(s._values(), V)
    assert_same(c.indices(), _sparse("cpu", coalesce=True).indices())
    assert_same(c.values(), _sparse("cpu", coalesce=True).values())
    raises_as_cpu(lambda d: _sparse(d).indices())
    raises_as_cpu(lambda d: _sparse(d).values())


@pytest.mark.parametrize("dtype", [torch.float32, pytest.param(torch.int64, marks=SLOW),
                                   pytest.param(torch.bool, marks=SLOW)])
def test_coalesce_sums_duplicates_and_sorts_as_cpu(dtype):
    both(lambda d: _sparse(d, dtype).coalesce())
    # unsorted, with dense dims
    both(lambda d: torch.sparse_coo_tensor([[2, 0, 2, 1]], torch.arange(8.).view(4, 2), (3, 2),
                                           device=d).coalesce())
    c = _sparse(TPU, coalesce=True)
    assert c.coalesce() is c  # a coalesced tensor is its own coalesce, as on CPU


def test_dense_conversions_match_cpu():
    x = torch.tensor([[0.0, 1.0, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, -3.0]])
    both(lambda d: _sparse(d).to_dense())
    both(lambda d: x.to(d).to_sparse())
    both(lambda d: x.to(d).to_sparse(1))
    both(lambda d: x.to(d).to_sparse().to_dense())
    both(lambda d: torch.tensor(3.0, device=d).to_sparse())
    both(lambda d: torch.zeros(2, 3, device=d).to_sparse())
    raises_as_cpu(lambda d: x.to(d).to_sparse(3))


@pytest.mark.parametrize("coalesce", [False, pytest.param(True, marks=SLOW)])
def test_products_with_a_dense_operand_match_cpu(coalesce):
    m = torch.randn(3, 4)
    both(lambda d: torch.sparse.mm(_sparse(d, coalesce=coalesce), m.to(d)))
    both(lambda d: torch.spmm(_sparse(d, coalesce=coalesce), m.to(d)))
    both(lambda d: torch.mm(_sparse(d, coalesce=coalesce), m.to(d)))
    both(lambda d: _sparse(d, coalesce=coalesce) @ m.to(d))
    both(lambda d: _sparse(d, coalesce=coalesce) @ m[:, 0].to(d))
    both(lambda d: m.t().to(d) @ _sparse(d, coalesce=coalesce))
    both(lambda d: torch.addmm(torch.ones(3, 4, device=d), _sparse(d, coalesce=coalesce),
                               m.to(d), beta=0.5, alpha=2))
    both(lambda d: torch.addmm(torch.full((4,), float("nan"), device=d),
                               _sparse(d, coalesce=coalesce), m.to(d), beta=0))
    batched = torch.stack([_sparse("cpu"), _sparse("cpu").t()])
    both(lambda d: batched.to(d).bmm(torch.stack([m, -m]).to(d)))


def test_invalid_products_raise_as_cpu():
    raises_as_cpu(lambda d: torch.sparse.mm(_sparse(d), torch.ones(4, 2, device=d)))
    raises_as_cpu(lambda d: torch.sparse.mm(_sparse(d), torch.ones(3, 2, device=d,
                                                                   dtype=torch.float64)))
    raises_as_cpu(lambda d: torch.stack([_sparse("cpu")]).to(d).bmm(torch.ones(2, 3, 2, device=d)))


def test_products_of_two_sparse_operands_match_cpu():
    other = torch.sparse_coo_tensor([[0, 2, 2, 1], [1, 0, 1, 1]], [1.0, 2.0, -2.0, 0.5], (3, 2))
    both(lambda d: torch.sparse.mm(_sparse(d), other.to(d)))  # coalesced, zeros kept
    both(lambda d: _sparse(d) @ other.to(d))
    both(lambda d: torch.sparse.mm(torch.sparse_coo_tensor(size=(2, 3), device=d), other.to(d)))
    raises_as_cpu(lambda d: torch.mm(_sparse(d), _sparse(d).double()))
    raises_as_cpu(lambda d: torch.mm(_sparse(d), torch.ones(2, 3, 2).to_sparse().to(d)))
    raises_as_cpu(lambda d: torch.mm(_sparse(d), torch.ones(3, 2).to_sparse(1).to(d)),
                  tpu_kernels=True)


@SLOW
def test_gradients_of_products_of_two_sparse_operands_match_cpu():
    other = torch.sparse_coo_tensor([[0, 2, 2, 1], [1, 0, 1, 1]], [1.0, 2.0, -2.0, 0.5], (3, 2))

    def grads(d):
        a = _sparse(d).coalesce().detach().requires_grad_()
        b = other.to(d).coalesce().detach().requires_grad_()
        torch.sparse.mm(a, b).to_dense().sin().sum().backward()
        return a.grad._coalesced_(True), b.grad._coalesced_(True)

    for actual, expected in zip(grads(TPU), grads("cpu"), strict=True):
        assert_sparse_same(actual, expected)  # the product's entries, projected


@pytest.mark.parametrize("product", [torch.sparse.mm, torch.mm])
def test_gradients_of_products_match_cpu(product):
    m = torch.randn(3, 4)

    def grads(d):
        w = m.to(d).requires_grad_()
        s = _sparse(d).coalesce().detach().requires_grad_()
        product(s, w).sin().sum().backward()
        return w.grad, s.grad

    (w_tpu, s_tpu), (w_cpu, s_cpu) = grads(TPU), grads("cpu")
    assert_same(w_tpu, w_cpu)
    if s_cpu.is_sparse:  # (torch.sparse.mm's; mm's is dense)
        # CPU's AccumulateGrad rebuilds a gradient no one else holds, dropping its coalesced
        # flag; it clones ours (the Python object holds references), keeping it.
        assert s_tpu.is_coalesced()
        assert_sparse_same(s_tpu, s_cpu._coalesced_(True))
    else:
        assert_same(s_tpu, s_cpu)


def test_gradients_through_construction_and_to_dense_match_cpu():
    def grads(d):
        v = V.to(d, copy=True).requires_grad_()
        s = torch.sparse_coo_tensor(IDX.to(d), v, (3, 3))
        (s.to_dense() * torch.arange(9.0, device=d).view(3, 3)).sum().backward()
        return v.grad

    assert_same(grads(TPU), grads("cpu"))


@pytest.mark.parametrize("coalesce", [False, pytest.param(True, marks=SLOW)])
def test_elementwise_with_numbers_match_cpu(coalesce):
    both(lambda d: _sparse(d, coalesce=coalesce) * 2)
    both(lambda d: 2.5 * _sparse(d, torch.int64, coalesce=coalesce))
    both(lambda d: _sparse(d, coalesce=coalesce) * torch.tensor(3.0, device=d))
    both(lambda d: _sparse(d, coalesce=coalesce) / 2)
    both(lambda d: _sparse(d, torch.int64, coalesce=coalesce) / 2)
    both(lambda d: torch.div(_sparse(d, coalesce=coalesce), 2, rounding_mode="floor"))
    both(lambda d: -_sparse(d, coalesce=coalesce))
    raises_as_cpu(lambda d: _sparse(d) / torch.ones(3, device=d))


def test_additions_match_cpu():
    other = torch.sparse_coo_tensor([[0, 2, 2], [1, 2, 0]], [5.0, 6.0, 7.0], (3, 3))
    for a in (False, True):
        for b in (False, True):
            both(lambda d, a=a, b=b: _sparse(d, coalesce=a) + (
                other.to(d).coalesce() if b else other.to(d)))
    both(lambda d: _sparse(d, coalesce=True) + _sparse(d, coalesce=True).t())
    both(lambda d: _sparse(d) - _sparse(d, torch.float64))
    both(lambda d: torch.add(_sparse(d), other.to(d), alpha=3))
    both(lambda d: _sparse(d) + torch.sparse_coo_tensor(size=(3, 3), device=d))
    both(lambda d: torch.ones(3, 3, device=d) + _sparse(d))
    both(lambda d: torch.add(torch.ones(3, 3, dtype=torch.int64, device=d), _sparse(d), alpha=2))
    both(lambda d: torch.ones(3, 3, device=d).add_(_sparse(d)))
    both(lambda d: _sparse(d).add_(other.to(d)))
    raises_as_cpu(lambda d: _sparse(d) + torch.ones(3, 3, device=d))
    raises_as_cpu(lambda d: torch.ones(2, 3, device=d) + _sparse(d))
    raises_as_cpu(lambda d: _sparse(d) + torch.sparse_coo_tensor(size=(3, 2), device=d))


def test_sums_match_cpu():
    hybrid = torch.sparse_coo_tensor(IDX[:1], torch.arange(8.0).view(4, 2), (3, 2))
    both(lambda d: _sparse(d).sum())
    both(lambda d: torch.sparse.sum(_sparse(d)))
    both(lambda d: torch.sparse.sum(_sparse(d), dtype=torch.float64))
    both(lambda d: torch.sparse.sum(_sparse(d), 0))
    both(lambda d: torch.sparse.sum(_sparse(d), (0, 1)))
    both(lambda d: _sparse(d).sum(1))
    both(lambda d: torch.sparse.sum(hybrid.to(d), 1))
    both(lambda d: torch.sparse.sum(hybrid.to(d), 0))


def test_selects_unbinds_and_stacks_match_cpu():
    hybrid = torch.sparse_coo_tensor(IDX[:1], torch.arange(8.0).view(4, 2), (3, 2))
    both(lambda d: _sparse(d).select(0, 2))  # one entry left: coalesced
    both(lambda d: _sparse(d).select(1, 0))
    both(lambda d: _sparse(d, coalesce=True)[-1])
    both(lambda d: hybrid.to(d)[1])  # no sparse dim left: dense, duplicates summed
    both(lambda d: hybrid.to(d).select(1, 1))
    both(lambda d: torch.ones(2, 3).to_sparse().to(d).select(0, 1))  # uncoalesced, as any new
    for a, b in zip(_sparse(TPU).unbind(1), _sparse("cpu").unbind(1), strict=True):
        assert_sparse_same(a, b)
    both(lambda d: torch.stack(list(_sparse(d, coalesce=True))))
    raises_as_cpu(lambda d: _sparse(d).select(0, 5), IndexError)
    raises_as_cpu(lambda d: torch.cat([_sparse(d), torch.ones(3, 3, device=d)]))


@SLOW
def test_index_selects_and_concatenations_match_cpu():
    hybrid = torch.sparse_coo_tensor(IDX[:1], torch.arange(8.0).view(4, 2), (3, 2))
    for dim, index in ((0, [1, 0, 1]), (1, [0, -1]), (0, [2]), (0, [])):
        both(lambda d, dim=dim, index=index: _sparse(d).index_select(
            dim, torch.tensor(index, dtype=torch.int64, device=d)))
    both(lambda d: hybrid.to(d).index_select(1, torch.tensor([1], device=d)))
    raises_as_cpu(lambda d: _sparse(d).index_select(0, torch.tensor([3], device=d)), IndexError)
    both(lambda d: torch.cat([_sparse(d), _sparse(d, coalesce=True)], 1))


def test_elementwise_products_with_tensors_match_cpu():
    other = torch.sparse_coo_tensor([[1, 2, 0], [0, 2, 2]], [2.0, -1.0, 4.0], (3, 3))
    for a_coalesced, b_coalesced in ((True, True), (False, True), (True, False), (False, False)):
        b = other.coalesce() if b_coalesced else other
        # both coalesced: their common entries; else the uncoalesced one's entries, flagged
        both(lambda d, c=a_coalesced, b=b: _sparse(d, coalesce=c) * b.to(d))
    both(lambda d: _sparse(d) * torch.arange(9.0).view(3, 3).to(d))  # the sparse one's entries
    both(lambda d: torch.ones(3, 1, device=d, dtype=torch.float64) * _sparse(d, coalesce=True))


def test_products_with_a_dense_operand_of_more_dims_are_sparse_over_them_as_cpu():
    hybrid = torch.sparse_coo_tensor(IDX[:1], torch.arange(8.0).view(4, 2), (3, 2))
    both(lambda d: _sparse(d) * torch.arange(18.0).view(2, 3, 3).to(d))  # coalesced first
    both(lambda d: torch.arange(54.0).view(3, 2, 1, 3, 3).to(d) * _sparse(d, coalesce=True))
    both(lambda d: hybrid.to(d) * torch.arange(12.0).view(2, 3, 2).to(d))


def test_smm_and_sspaddmm_match_cpu():
    dense = torch.arange(6.0).view(3, 2)
    both(lambda d: torch.smm(_sparse(d), dense.to(d)))
    both(lambda d: torch.smm(torch.zeros(3, 3).to_sparse().to(d), dense.to(d)))
    both(lambda d: torch.sspaddmm(torch.ones(3, 2).to_sparse().to(d), _sparse(d), dense.to(d),
                                  beta=2, alpha=0.5))
    for bad in (dense.view(3, 2, 1), torch.ones(4, 2), dense.double(), dense.to_sparse()):
        raises_as_cpu(lambda d, bad=bad: torch.sspaddmm(
            torch.zeros(3, 2).to_sparse().to(d), _sparse(d), bad.to(d)))
    raises_as_cpu(lambda d: torch.smm(torch.zeros(3, 3, device=d), dense.to(d)))


def test_resizes_and_copies_between_sizes_match_cpu():
    for args in (((5, 6), 2, 0), ((2, 6), 2, 0), ((3, 3, 2), 2, 1), ((3, 3), 1, 1),
                 ((5, 6), 3, 0)):
        raises = args[0][0] < 3 or args[1:] != (2, 0)
        if raises:
            raises_as_cpu(lambda d, a=args: _sparse(d).sparse_resize_(*a))
        else:
            both(lambda d, a=args: _sparse(d).sparse_resize_(*a))
    both(lambda d: torch.zeros(3, 4).to_sparse().to(d).sparse_resize_((2, 3, 4), 1, 2))
    both(lambda d: _sparse(d).sparse_resize_and_clear_((2, 5, 4), 2, 1))
    both(lambda d: torch.zeros(2, 2).to_sparse().to(d).copy_(_sparse(d)))
    resized = _sparse(TPU).sparse_resize_((4, 4), 2, 0)
    assert torch.equal(resized.to_dense().cpu(), _sparse("cpu").sparse_resize_((4, 4), 2,
                                                                                0).to_dense())


def test_concatenation_along_a_dense_dim_and_any_match_cpu():
    hybrid = torch.sparse_coo_tensor(IDX[:1], torch.arange(8.0).view(4, 2), (3, 2))
    other = torch.sparse_coo_tensor([[2]], torch.ones(1, 3, dtype=torch.float64), (3, 3))
    both(lambda d: torch.cat([hybrid.to(d), other.to(d)], 1))
    both(lambda d: torch.any(_sparse(d)).reshape(1))
    both(lambda d: torch.any(torch.zeros(2, 2).to_sparse().to(d)).reshape(1))


def test_spdiags_matches_cpu():
    diagonals = torch.arange(1.0, 13.0).view(3, 4)
    offsets = torch.tensor([0, -1, 2])
    both(lambda d: torch.sparse.spdiags(diagonals.to(d), offsets, (4, 4)))
    both(lambda d: torch.sparse.spdiags(diagonals[:, :2].to(d), offsets.to(d), (3, 5)))
    csr = torch.sparse.spdiags(diagonals.to(TPU), offsets, (4, 4), layout=torch.sparse_csr)
    assert csr.layout is torch.sparse_csr
    assert torch.equal(csr.to_dense().cpu(), torch.sparse.spdiags(diagonals, offsets,
                                                                  (4, 4)).to_dense())
    raises_as_cpu(lambda d: torch.sparse.spdiags(diagonals.to(d), torch.tensor([0, 0, 1]),
                                                 (4, 4)))


def test_narrow_copy_permute_and_hspmm_match_cpu():
    hybrid = torch.sparse_coo_tensor([[0, 1], [1, 0]], torch.arange(6.0).view(2, 3), (2, 2, 3))
    both(lambda d: _sparse(d, coalesce=True).narrow_copy(1, 1, 2))
    both(lambda d: _sparse(d).narrow_copy(0, 0, 2))
    both(lambda d: hybrid.to(d).narrow_copy(2, 1, 2))
    raises_as_cpu(lambda d: _sparse(d).narrow_copy(0, -2, 2))
    both(lambda d: _sparse(d, coalesce=True).permute(1, 0))  # flagged uncoalesced, as on CPU
    both(lambda d: hybrid.to(d).permute(1, 0, 2))
    raises_as_cpu(lambda d: hybrid.to(d).permute(2, 0, 1))
    both(lambda d: torch.hspmm(_sparse(d), torch.arange(6.0).view(3, 2).to(d)))
    both(lambda d: torch.sparse_coo_tensor(torch.zeros(0, 1, dtype=torch.int64), [3.0], (),
                                           device=d).transpose(0, 0))


def test_transposes_match_cpu():
    both(lambda d: _sparse(d).t())
    both(lambda d: _sparse(d, coalesce=True).t())
    both(lambda d: _sparse(d).transpose(0, 1))
    both(lambda d: torch.sparse_coo_tensor([[1], [0]], [2.0], (2, 3), device=d).coalesce().t())
    both(lambda d: torch.sparse_coo_tensor(size=(2, 3), device=d).t())  # no entries: coalesced
    both(lambda d: torch.sparse_coo_tensor(IDX.clone(), V, (3, 4), device=d).t_())
    both(lambda d: torch.sparse_coo_tensor(IDX.clone(), V, (3, 4), device=d).transpose_(1, 0))
    for d in ("cpu", TPU):  # in place: the indices the tensor was made from see it, as on CPU
        indices = IDX.to(d, copy=True)
        torch.sparse_coo_tensor(indices, V.to(d), (3, 4)).t_()
        assert_same(indices, IDX.flip(0))
    for dim in (0, 1, 2, -1):
        both(lambda d, dim=dim: _sparse(d, coalesce=True).unsqueeze(dim))
        both(lambda d, dim=dim: torch.sparse_coo_tensor(IDX[:1], torch.ones(4, 2), (3, 2),
                                                        device=d).unsqueeze(dim))
    both(lambda d: torch.sparse_coo_tensor([[1]], [2.0], (2,), device=d).unsqueeze(0))
    raises_as_cpu(lambda d: _sparse(d).unsqueeze(3), IndexError)
    raises_as_cpu(lambda d: torch.sparse_coo_tensor(IDX[:1], torch.ones(4, 2), (3, 2),
                                                    device=d).transpose(0, 1))
    raises_as_cpu(lambda d: torch.sparse_coo_tensor(torch.zeros(3, 1, dtype=torch.int64),
                                                    [1.0], (2, 2, 2), device=d).t())


@pytest.mark.parametrize("op", ["abs", "sqrt", "isnan", *(
    pytest.param(op, marks=SLOW) for op in ("sin", "sign", "floor", "tanh", "expm1", "signbit",
                                            "relu", "nan_to_num"))])
def test_zero_preserving_functions_work_on_the_coalesced_values_as_cpu(op):
    both(lambda d: getattr(torch, op)(_sparse(d)))
    both(lambda d: getattr(_sparse(d, coalesce=True), op + "_")() if hasattr(
        torch.Tensor, op + "_") else getattr(torch, op)(_sparse(d, coalesce=True)))


def test_powers_floor_division_and_in_place_arithmetic_match_cpu():
    both(lambda d: _sparse(d).pow(2))
    both(lambda d: _sparse(d, torch.complex64).conj_physical())
    both(lambda d: torch.floor_divide(_sparse(d), 2))
    both(lambda d: _sparse(d).neg_())
    both(lambda d: _sparse(d).mul_(2))
    both(lambda d: _sparse(d).div_(4))
    both(lambda d: _sparse(d).sub_(_sparse(d, coalesce=True)))
    both(lambda d: _sparse(d).copy_(_sparse(d, torch.float64, coalesce=True) * 2))
    both(lambda d: _sparse(d).copy_(_sparse("cpu") * 2))
    both(lambda d: _sparse(d).zero_())
    raises_as_cpu(lambda d: _sparse(d).abs_())  # in place needs a coalesced tensor
    raises_as_cpu(lambda d: _sparse(d).floor_divide(torch.ones(3, 3, device=d)))
    with pytest.raises(RuntimeError, match=r"copy_\(\) between dense and sparse Tensors is not"):
        _sparse(TPU).copy_(torch.ones(3, 3, device=TPU))  # (naming torch.tpu's tensor types)


def test_values_alias_the_constructors_values_as_on_cpu():
    def in_place(d, op):
        values = V.to(d, copy=True)
        op(torch.sparse_coo_tensor(IDX.to(d), values, (3, 3)))
        return values

    for op in (torch.Tensor.neg_, lambda s: s.div_(2), lambda s: s.mul_(2)):
        assert_same(in_place(TPU, op), in_place("cpu", op))


def test_sparse_factories_match_cpu():
    both(lambda d: torch.empty((2, 3), layout=torch.sparse_coo, device=d))
    both(lambda d: torch.zeros((2, 3), layout=torch.sparse_coo, device=d, dtype=torch.int32))
    both(lambda d: _sparse(d).new_zeros((2, 2)))
    both(lambda d: torch.empty_like(_sparse(d)))


@pytest.mark.parametrize("log,hybrid", [(False, False), *(
    pytest.param(log, hybrid, marks=SLOW) for log, hybrid in ((False, True), (True, False),
                                                              (True, True)))])
def test_softmax_and_its_gradient_match_cpu(log, hybrid):
    softmax = torch.sparse.log_softmax if log else torch.sparse.softmax
    values = torch.arange(8.0).view(4, 2) / 3
    make = (lambda d: torch.sparse_coo_tensor(IDX[:1], values, (3, 2), device=d)) if hybrid \
        else _sparse
    for dim in (0, 1):
        def grad(d, dim=dim):
            leaf = make(d).requires_grad_()
            out = softmax(leaf, dim)
            weights = torch.linspace(1, 2, out.numel(), device=d).view(out.shape)
            (out.to_dense() * weights).sum().backward()
            return out, leaf.grad

        (out_tpu, grad_tpu), (out_cpu, grad_cpu) = grad(TPU), grad("cpu")
        assert_sparse_same(out_tpu, out_cpu)
        assert_same(grad_tpu.to_dense(), grad_cpu.to_dense())
    both(lambda d: softmax(make(d), 1, dtype=torch.float64))
    raises_as_cpu(lambda d: softmax(make(d).long(), 1), NotImplementedError)


@SLOW
def test_gradients_of_sums_match_cpu():
    for dims in ((), (0,), (1,), (0, 1)):
        def grad(d, dims=dims):
            leaf = _sparse(d).requires_grad_()
            out = torch.sparse.sum(leaf, dims) if dims else torch.sparse.sum(leaf)
            (out.to_dense() if out.is_sparse else out).pow(2).sum().backward()
            return leaf.grad

        assert_same(grad(TPU).to_dense(), grad("cpu").to_dense())


def test_sparse_buffers_move_save_and_load_as_on_cpu():
    class Graph(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("adj", _sparse("cpu"))

    moved = Graph().to(TPU)
    assert moved.adj.device == torch.device(TPU) and moved.adj.is_sparse
    buffer = io.BytesIO()
    torch.save(moved.state_dict(), buffer)
    on_cpu, on_tpu = Graph(), Graph().to(TPU)
    on_cpu.load_state_dict(torch.load(io.BytesIO(buffer.getvalue())))  # tpu into CPU
    on_tpu.load_state_dict(Graph().state_dict())  # CPU into tpu
    assert on_cpu.adj.device.type == "cpu"
    assert_sparse_same(on_tpu.adj, _sparse("cpu"))


def test_tensors_on_another_device_are_refused_as_on_cuda():
    with pytest.raises(RuntimeError, match=r"same device, but found at least two devices, "
                                           r"tpu:0 and cpu!"):
        torch.sparse_coo_tensor(IDX.to(TPU), V)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.sparse.mm(_sparse(TPU), torch.ones(3, 2))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.ones(3, 3) + _sparse(TPU)


def test_printing_saving_and_leaves():
    s = _sparse(TPU)
    text = repr(s)
    assert text == repr(_sparse("cpu")).replace("size=", "device='tpu:0', size=")
    buffer = io.BytesIO()
    torch.save({"adj": s}, buffer)
    loaded = torch.load(io.BytesIO(buffer.getvalue()))["adj"]
    assert_sparse_same(loaded, _sparse("cpu"))
    on_cpu = torch.load(io.BytesIO(buffer.getvalue()), map_location="cpu")["adj"]
    assert on_cpu.device.type == "cpu" and on_cpu.is_sparse
    leaf = _sparse(TPU).requires_grad_()
    assert leaf.requires_grad and leaf.is_leaf
    assert "requires_grad=True" in repr(leaf)


def test_unsupported_ops_are_refused_naming_the_op_and_layout():
    with pytest.raises(NotImplementedError, match=r"aten\.cos\.default .*sparse_coo"):
        _sparse(TPU).cos()
    with pytest.raises(NotImplementedError, match=r"aten\.mul\.Tensor .*sparse_coo"):
        # (CPU's result keeps the (1, 3) operand's entries in row 0 of a (3, 3) tensor)
        torch.ones(1, 3).to_sparse().to(TPU) * torch.ones(3, 3, device=TPU)


class _GCNLayer(torch.nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(n_in, n_out) / n_in ** 0.5)
        self.bias = torch.nn.Parameter(torch.zeros(n_out))

    def forward(self, x, adj):
        return torch.spmm(adj, x @ self.weight) + self.bias


class _GCN(torch.nn.Module):
    """pygcn's model: two graph convolutions over a normalized sparse adjacency."""

    def __init__(self):
        super().__init__()
        self.gc1, self.gc2 = _GCNLayer(8, 16), _GCNLayer(16, 3)

    def forward(self, x, adj):
        x = torch.nn.functional.relu(self.gc1(x, adj))
        return torch.nn.functional.log_softmax(self.gc2(x, adj), dim=1)


def _graph(n=12):
    g = torch.Generator().manual_seed(0)
    edges = torch.randint(0, n, (2, 30), generator=g)
    dense = torch.zeros(n, n).index_put_(tuple(edges), torch.ones(30), accumulate=True)
    dense = (dense + dense.t() + torch.eye(n)).clamp(max=1)
    dense = dense / dense.sum(1, keepdim=True)  # pygcn's row normalization
    return (torch.randn(n, 8, generator=g), dense.to_sparse(),
            torch.randint(0, 3, (n,), generator=g))


def _train_gcn(device, steps=5):
    torch.manual_seed(0)
    model = _GCN().to(device)
    x, adj, labels = (t.to(device) for t in _graph())
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.nll_loss(model(x, adj), labels)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach().cpu() for p in model.parameters()]


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_pygcn_trains_as_on_cpu(mode):
    expected = _train_gcn("cpu")
    with torchtpu.set_eager_mode(mode):
        actual = _train_gcn(TPU)
    assert_same(actual[0], expected[0], rtol=1e-5)
    assert_same(actual[1], expected[1], rtol=1e-4, atol=1e-5)
