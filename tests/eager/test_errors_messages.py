"""CPU's messages where PyTorch's meta kernels word an error otherwise."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import raises_as_cpu


def _ones(*shape, dtype=torch.float32):
    return lambda d: torch.ones(shape, dtype=dtype, device=d)


@pytest.mark.parametrize("bad", [
    # the pair CPU's broadcast fails on, in its order
    lambda d: torch._foreach_add_([_ones(3)(d), _ones(5)(d)], [_ones(2)(d), _ones(5)(d)]),
    lambda d: torch._foreach_mul([_ones(3)(d), _ones(5)(d)], [_ones(3)(d), _ones(4)(d)]),
    lambda d: F.binary_cross_entropy_with_logits(_ones(4, 3)(d), _ones(4, 3)(d),
                                                 pos_weight=_ones(4)(d)),
    # a bias CPU expands to the product's shape
    lambda d: F.linear(_ones(2, 4)(d), _ones(3, 4)(d), _ones(5)(d)),
    lambda d: F.linear(_ones(2, 2, 4)(d), _ones(3, 4)(d), _ones(5)(d)),
    lambda d: torch.addmm(_ones(5)(d), _ones(2, 4)(d), _ones(4, 3)(d)),
    # no meta tensor's type in a message
    lambda d: _ones(3, 4)(d).expand(4),
    lambda d: _ones(3, 4, dtype=torch.long)(d).expand(4),
    # mean of integers: CPU's dtype error before the dims' (out of range here)
    lambda d: _ones(6, dtype=torch.long)(d).mean(5),
    lambda d: _ones(2, 3, dtype=torch.bool)(d).mean((0, 4)),
    # dtypes by c10's names
    lambda d: torch.linalg.det(_ones(2, 2, dtype=torch.long)(d)),
    lambda d: torch.linalg.vector_norm(_ones(2, dtype=torch.long)(d)),
    lambda d: torch.mm(_ones(2, 3, 4)(d), _ones(4, 5)(d)),
    lambda d: torch.mm(_ones(2, 3)(d), _ones(3, 2, 2)(d)),
    lambda d: torch.mm(_ones(2, 3, 4)(d), _ones(3, 2, dtype=torch.double)(d)),
    lambda d: torch.linalg.inv(_ones(2, 3)(d)),
    lambda d: torch.linalg.inv_ex(_ones(2, 3)(d)),
    lambda d: _ones(3)(d).masked_fill(_ones(3)(d), 0.),
    lambda d: _ones(3)(d).masked_fill(_ones(3, dtype=torch.long)(d), 0.),
    lambda d: _ones(3)(d).masked_fill(_ones(3, dtype=torch.bool)(d), _ones(3)(d)),
    lambda d: _ones(3)(d).masked_fill_(_ones(3, dtype=torch.bool)(d), _ones(3, 1)(d)),
    lambda d: torch.zeros(5, 3, device=d).index_add(0, torch.tensor([0, 1], device=d),
                                                   _ones(3, 3)(d)),
    lambda d: torch.zeros(5, 3, device=d).index_add_(0, torch.tensor([0, 1], device=d),
                                                    _ones(3, 3)(d)),
])
def test_messages_read_as_cpu(bad, eager_mode):
    raises_as_cpu(bad, RuntimeError)


def test_masked_fill_takes_a_bool_mask_and_0_d_value():
    x, mask = torch.arange(3.0), torch.tensor([True, False, True])
    out = x.to("tpu").masked_fill(mask.to("tpu"), torch.tensor(7.0, device="tpu"))
    assert out.cpu().tolist() == x.masked_fill(mask, 7.0).tolist()


def test_block_diag_refuses_in_atens_words():
    # torch._refs' decomposition words both checks otherwise (without the op's name).
    raises_as_cpu(lambda d: torch.block_diag(torch.ones(2, device=d),
                                             torch.ones(1, 1, 1, device=d)))
    with pytest.raises(RuntimeError, match=r"^torch\.block_diag: input tensors must all be on the "
                       r"same device\. Input 0 is on device cpu and input 1 is on device tpu:0$"):
        torch.block_diag(torch.ones(2, 2), torch.ones(2, 2, device="tpu:0"))


@pytest.mark.parametrize("bad, exc", [
    # the meta kernel wrapped the dims before it compared the counts, and spaced "dims: 2"
    (lambda d: torch.arange(8, device=d).view(2, 4).roll((1,), (1, 2)), RuntimeError),
    (lambda d: torch.arange(8, device=d).view(2, 4).roll((1, 2), ()), RuntimeError),
    (lambda d: torch.tensor(3, device=d).roll(1, 1), IndexError),
    (lambda d: torch.repeat_interleave(torch.ones(2, 2, dtype=torch.long, device=d)),
     RuntimeError),
])
def test_roll_and_repeat_interleave_refuse_as_cpu(bad, exc):
    raises_as_cpu(bad, exc)


@pytest.mark.parametrize("op", [torch.complex, torch.polar])
@pytest.mark.parametrize("dtypes", [(torch.int64, torch.int64), (torch.float32, torch.float64)])
def test_complex_and_polar_refuse_parts_as_cpu(op, dtypes):
    # polar promoted mixed dtypes and let its meta kernel word integer parts.
    raises_as_cpu(lambda d: op(torch.ones(2, dtype=dtypes[0], device=d),
                               torch.ones(2, dtype=dtypes[1], device=d)))


_B, _H = torch.bool, torch.half


@pytest.mark.parametrize("bad", [
    # CPU checks the shapes before the dtypes (meta kernels check dtypes first)
    lambda d: torch.mm(_ones(2, 3, dtype=_B)(d), _ones(4, 2)(d)),
    lambda d: torch.bmm(_ones(3, 2, 3, dtype=_H)(d), _ones(3, 4, 2)(d)),
    lambda d: torch.matmul(_ones(3, 2, 3, dtype=_B)(d), _ones(3, 4, 2, dtype=_B)(d)),
    lambda d: torch.baddbmm(_ones(2, 5, 5)(d), _ones(2, 2, 3)(d), _ones(2, 3, 2, dtype=_H)(d)),
    lambda d: torch.mv(_ones(2, 3)(d), _ones(4, dtype=_B)(d)),
    lambda d: torch.addmv(_ones(2)(d), _ones(2, 3)(d), _ones(4, dtype=_H)(d)),
    lambda d: torch.dot(_ones(3, dtype=_B)(d), _ones(4, dtype=_B)(d)),
    lambda d: torch.addbmm(_ones(2, 2, dtype=_B)(d), _ones(2, 2, 3, dtype=_B)(d),
                           _ones(2, 4, 2)(d)),
    # the kernel is chosen by the first operand's dtype; addmm compares dtypes before bools
    lambda d: torch.bmm(_ones(3, 2, 3)(d), _ones(3, 3, 2, dtype=_B)(d)),
    lambda d: torch.baddbmm(_ones(1, dtype=_B)(d), _ones(3, 2, 3, dtype=_B)(d),
                            _ones(3, 3, 2)(d)),
    lambda d: torch.addmm(_ones(2, 2, dtype=_B)(d), _ones(2, 3, dtype=_B)(d), _ones(3, 2)(d)),
])
def test_matrix_products_check_in_cpus_order(bad):
    raises_as_cpu(bad, Exception)


@pytest.mark.parametrize("bad, exc", [
    # CPU checks an index against self and src in one message (the meta kernel: two)
    (lambda d: torch.zeros(3, 4, device=d).scatter_(
        -1, torch.zeros(3, 2, dtype=torch.long, device=d), torch.ones(3, 1, device=d)),
     RuntimeError),
    (lambda d: torch.zeros(3, 4, device=d).scatter_add(
        1, torch.zeros(4, 2, dtype=torch.long, device=d), torch.ones(4, 2, device=d)),
     RuntimeError),
    (lambda d: torch.zeros(3, device=d).scatter_reduce(
        0, torch.tensor([0], device=d), torch.ones(1, device=d), "maximum"), RuntimeError),
    (lambda d: torch.zeros(3, dtype=torch.complex64, device=d).scatter_reduce(
        0, torch.tensor([0], device=d), torch.ones(1, dtype=torch.complex64, device=d), "amax"),
     NotImplementedError),
])
def test_scatters_refuse_as_cpu(bad, exc):
    raises_as_cpu(bad, exc)


def test_scatter_reduce_takes_max_and_min_as_cpu():
    # (aliases of amax and amin in CPU's kernel; the meta kernel refused them)
    def run(d):
        x, i = torch.tensor([5.0, 1.0, 2.0], device=d), torch.tensor([0, 0, 2], device=d)
        src = torch.tensor([7.0, -3.0, 1.5], device=d)
        return [x.scatter_reduce(0, i, src, r, include_self=s)
                for r in ("max", "min") for s in (True, False)]

    assert [t.tolist() for t in run("tpu")] == [t.tolist() for t in run("cpu")]
