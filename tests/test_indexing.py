"""Indexing, masks and data-dependent shapes."""

from __future__ import annotations

import pytest
import torch
from conftest import TPU, assert_same, raises_as_cpu, run_both

# Every case runs in every eager mode (strict, debug, fused).
pytestmark = pytest.mark.usefixtures("eager_mode")


def test_bool_mask_assignment_scalar_and_tensor():
    def fn(x):
        x[x > 10] = -1.0
        m = x < 3
        x[m] = torch.arange(float(m.sum().item()), device=x.device) * 10
        return x

    run_both(fn, torch.arange(16.0).reshape(4, 4))


def test_index_add_assign_and_duplicates():
    def fn(x, idx):
        x[idx] += 1
        x[idx, 1] = 5.0
        return x

    run_both(fn, torch.zeros(5, 3), torch.tensor([0, 2, 4]))


def test_index_put_accumulate_counts_duplicates():
    def fn(x, idx):
        return x.index_put((idx,), torch.ones(4, device=x.device), accumulate=True)

    run_both(fn, torch.zeros(5), torch.tensor([1, 1, 3, 1]))


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_impl_as_cpu(accumulate):
    # (the in-place kernel some libraries call directly: it had no rule)
    def fn(x, idx):
        return torch.ops.aten._index_put_impl_(x.clone(), (idx,), torch.ones(4, device=x.device),
                                               accumulate, False)

    run_both(fn, torch.zeros(5), torch.tensor([1, 1, 3, 1] if accumulate else [0, 1, 3, 4]))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x[torch.tensor([2, 0, -1], device=x.device)],
        lambda x: x[:, torch.tensor([1, 3], device=x.device)],
        lambda x: x[torch.tensor([0, 2], device=x.device), torch.tensor([1, 3], device=x.device)],
        lambda x: x[x > 5],
        lambda x: x[1:, None, ..., 2],
        lambda x: x.nonzero(),
        lambda x: torch.nonzero(x > 7, as_tuple=True),
        lambda x: x.masked_select(x.remainder(2) == 0),
        lambda x: torch.unique(x.remainder(3)),
        lambda x: torch.unique(x.remainder(3), return_inverse=True, return_counts=True),
        lambda x: torch.where(x > 4, x, torch.zeros_like(x)),
        lambda x: torch.where(x > 4, x, 0.0),
        lambda x: x.gather(1, torch.tensor([[0, 1], [2, 3], [1, 1]], device=x.device)),
        lambda x: x.index_select(0, torch.tensor([2, 0], device=x.device)),
        lambda x: torch.zeros(3, 5, device=x.device).scatter_(
            1, torch.tensor([[0, 4], [1, 2], [3, 3]], device=x.device), 1.0),
        lambda x: torch.zeros(4, device=x.device).scatter_add_(
            0, torch.tensor([0, 1, 1, 3], device=x.device), torch.ones(4, device=x.device)),
        lambda x: torch.cat([x, x * 2], dim=1),
        lambda x: torch.stack([x, x + 1]),
        lambda x: x.flip(0).roll(1, 1),
        lambda x: x.sort(dim=1, descending=True),
        lambda x: x.topk(2, dim=1),
        lambda x: x.argmax(dim=1),
        lambda x: torch.nn.functional.one_hot(x.long().remainder(4), 4),
        lambda x: x.masked_fill(x > 5, float("nan")),
        lambda x: torch.nn.functional.pad(x, (1, 2, 0, 1), value=-1.0),
        lambda x: torch.nn.functional.interpolate(x[None, None], size=(5, 7), mode="bilinear"),
        lambda x: torch.view_as_real(torch.complex(x, -x)),
        lambda x: x.to(torch.int64).to(torch.float16),
        lambda x: torch.cdist(x, x[:2] + 1),
    ],
)
def test_indexing_ops(fn):
    run_both(fn, torch.arange(12.0).reshape(3, 4))


def test_out_of_range_index_raises_index_error():
    x = torch.zeros(3, 4, device="tpu")
    with pytest.raises(IndexError):
        x[5]
    with pytest.raises(IndexError):
        x.select(1, 9)


def test_zero_size_and_scalar_tensors():
    def fn(x):
        e = x[:0]
        return [e.sum(0), e * 2, x[0, 0] * 3, x.sum(), torch.zeros(0, 3, device=x.device).mean()]

    run_both(fn, torch.arange(12.0).reshape(3, 4))


def test_nan_and_inf_propagate():
    v = torch.tensor([0.0, -1.0, 1.0, float("inf"), float("nan")])
    run_both(lambda x: [x.log(), x.sqrt(), 1 / x, x.exp(), x.isnan(), x.isinf(), x.max()], v)


def test_assert_same_catches_differences():
    with pytest.raises(AssertionError):
        assert_same(torch.ones(2, device="tpu"), torch.zeros(2))


def test_advanced_indexing_takes_host_indices_as_cuda_does():
    # x[cpu_index] and x[cpu_index] = v work on cuda; gather and index_select refuse.
    x = torch.arange(12.0).reshape(3, 4)
    t = x.to("tpu")
    i, mask = torch.tensor([0, 2, 0]), torch.tensor([True, False, True])
    assert_same(t[i], x[i])
    assert_same(t[i, 1], x[i, 1])
    assert_same(t[mask], x[mask])
    a, b = x.clone(), t.clone()
    a[i, 1] = 5.0
    b[i, 1] = 5.0
    assert_same(b, a)
    a.index_put_((i,), torch.ones(4), accumulate=True)
    b.index_put_((i,), torch.ones(4, device="tpu"), accumulate=True)
    assert_same(b, a)
    leaf = x.to("tpu").requires_grad_()
    leaf[i].pow(2).sum().backward()
    cpu_leaf = x.clone().requires_grad_()
    cpu_leaf[i].pow(2).sum().backward()
    assert_same(leaf.grad, cpu_leaf.grad)
    with pytest.raises(RuntimeError, match="same device"):
        t.index_select(0, i)


BAD_INDICES = {
    "mask too long": lambda x, d: x[torch.tensor([True, False, True], device=d)],
    "mask of wrong inner shape": lambda x, d: x[:, torch.ones(3, 5, dtype=torch.bool, device=d)],
    "float index": lambda x, d: x[torch.tensor([1.0], device=d)],
    "int16 index": lambda x, d: x[torch.tensor([0], dtype=torch.int16, device=d)],
    "unbroadcastable": lambda x, d: x[torch.tensor([0, 1], device=d),
                                      torch.tensor([0, 1, 2], device=d)],
    "set through a long mask": lambda x, d: x.__setitem__(
        torch.tensor([True, False, True], device=d), 1.0),
    "value of the wrong shape": lambda x, d: x.__setitem__(([0, 1], slice(None), [2, 3]),
                                                           torch.ones(4, 2, device=d)),
}


@pytest.mark.parametrize("case", sorted(BAD_INDICES))
def test_bad_indices_raise_cpus_error(case):
    errors = []
    for device in ("cpu", TPU):
        x = torch.arange(24.0, device=device).reshape(2, 3, 4)
        with pytest.raises((IndexError, RuntimeError)) as info:
            BAD_INDICES[case](x, device)
        errors.append((info.type, str(info.value)))
    (cpu_type, cpu_text), (tpu_type, tpu_text) = errors
    assert tpu_type is cpu_type and tpu_text.startswith(cpu_text)  # debug mode adds the op


def test_uint8_indices_are_masks_as_on_cpu():
    x = torch.arange(6.0).reshape(2, 3)
    mask = torch.tensor([1, 0], dtype=torch.uint8)
    with pytest.warns(UserWarning, match="uint8 is now deprecated"):
        assert_same(x.to(TPU)[mask.to(TPU)], x[mask])


NAN = float("nan")
SEARCHES = {
    "bincount float32 weights": lambda t: torch.bincount(t([0, 1, 1]),
                                                         weights=t([1.0, 2.0, 3.0])),
    "bincount int weights": lambda t: torch.bincount(t([0, 1, 1]), weights=t([1, 2, 3])),
    "unique keeps each NaN": lambda t: torch.unique(t([NAN, 1.0, NAN]), return_inverse=True,
                                                    return_counts=True),
    # numpy sorted bfloat16 by a comparison NaN breaks: duplicates stayed, unsorted
    "unique of bfloat16 with NaN": lambda t: torch.unique(
        t([3.0, NAN, 1.0, NAN, 2.0, 1.0], dtype=torch.bfloat16), return_inverse=True,
        return_counts=True),
    "unique rows of bfloat16 with NaN": lambda t: torch.unique(
        t([[3.0, NAN], [1.0, 0.0], [1.0, 0.0], [NAN, 2.0]], dtype=torch.bfloat16), dim=0,
        return_inverse=True, return_counts=True),
    "median of nothing": lambda t: (torch.median(t([])), torch.nanmedian(t([]))),
    "searchsorted with NaNs": lambda t: torch.searchsorted(t([1.0, 3.0, NAN]),
                                                           t([NAN, 2.0, 5.0, 0.0, 3.0])),
    "searchsorted right": lambda t: torch.searchsorted(t([1.0, 3.0, 3.0, NAN]),
                                                       t([NAN, 2.0, 3.0, 5.0]), right=True),
    "searchsorted in nothing": lambda t: torch.searchsorted(t([]), t([1.0])),
}


@pytest.mark.parametrize("case", sorted(SEARCHES))
def test_data_dependent_ops_match_cpu_at_their_edges(case):
    def run(device):
        return SEARCHES[case](lambda *a, **k: torch.tensor(*a, device=device, **k))

    assert_same(run(TPU), run("cpu"))


@pytest.mark.parametrize("bad, exc", [
    (lambda t: torch.bincount(t([1.0])), NotImplementedError),
    (lambda t: torch.repeat_interleave(t([1, 2]), t([1, -1])), RuntimeError),
    (lambda t: t([]).argmax(), IndexError),
])
def test_data_dependent_ops_refuse_as_cpu(bad, exc):
    for device in ("cpu", TPU):
        with pytest.raises(exc):
            bad(lambda *a, device=device, **k: torch.tensor(*a, device=device, **k))


@pytest.mark.parametrize("classes, num_classes", [
    ([0, 5], 3), ([-1, 1], 3), ([], -1), ([[0, 2], [1, 1]], -1), ([0, 2], 4), ([], 3)])
def test_one_hot_checks_its_classes_as_cpu(classes, num_classes, eager_mode):
    # PyTorch skips the checks for a tensor subclass: a class out of range was a zero row.
    def run(device):
        try:
            return torch.nn.functional.one_hot(torch.tensor(classes, dtype=torch.long,
                                                            device=device), num_classes)
        except RuntimeError as e:
            return str(e)

    expected = run("cpu")
    if isinstance(expected, str) and eager_mode == "fused" and num_classes != -1:
        pytest.skip("fused eager reads no index values, as for out-of-range indices")
    actual = run(TPU)
    if isinstance(expected, str):
        assert actual == expected
    else:
        assert_same(actual, expected)


def test_nonzero_indices_are_laid_out_as_cpus():
    # a column at a time: as_tuple's and where(cond)'s index tensors are contiguous
    x = torch.tensor([[1, 0, 3], [0, 5, 6]])
    for fn in (torch.nonzero, torch.argwhere, lambda t: torch.nonzero(t, as_tuple=True),
               lambda t: torch.where(t.bool()), lambda t: torch.nonzero(t[0])):
        out, expected = fn(x.to(TPU)), fn(x)
        assert_same(out, expected)
        for o, e in zip(out if isinstance(out, tuple) else [out],
                        expected if isinstance(expected, tuple) else [expected], strict=True):
            assert o.stride() == e.stride()


def _masked_assign(values):
    def bad(device):
        a = torch.arange(4, device=device)
        a[a > -1] = values.to(device)

    return bad


def _index_op(op, index, source):
    """``op`` on a (3, 4) float tensor, with an index and a source given as (shape, dtype)."""
    def bad(device):
        x = torch.zeros(3, 4, device=device)
        i = torch.zeros(index[0], dtype=index[1], device=device)
        s = torch.zeros(source[0], dtype=source[1], device=device) if source else None
        return {"index_add": lambda: x.index_add(1, i, s),
                "index_reduce": lambda: x.index_reduce(1, i, s, "prod"),
                "index_reduce_sum": lambda: x.index_reduce(1, i, s, "sum"),
                "index_copy": lambda: x.index_copy(1, i, s),
                "index_copy_": lambda: x.index_copy_(1, i, s),
                "index_fill": lambda: x.index_fill(1, i, -2.0),
                "index_fill_": lambda: x.index_fill_(1, i, -2.0),
                "index_fill_tensor": lambda: x.index_fill(1, i, s),
                "take": lambda: x.take(i),
                "put": lambda: x.put(i, s),
                "put_": lambda: x.put_(i, s)}[op]()

    return bad


_F, _L, _I = torch.float32, torch.int64, torch.int32
# CPU's dtype and shape checks of the index ops, in CPU's order (first failing one wins).
_BAD_INDEX_ARGS = [
    ("index_add", ((1,), _F), ((3, 1), _F)), ("index_add", ((1, 1), _L), ((3, 1), _F)),
    ("index_add", ((1,), torch.int16), ((3, 1), _F)), ("index_add", ((1,), _F), ((3, 1), _L)),
    ("index_reduce", ((1,), _F), ((3, 1), _F)), ("index_reduce", ((1, 1), _L), ((3, 1), _F)),
    ("index_reduce", ((1,), _L), ((3, 1), _L)), ("index_reduce", ((2,), _L), ((3, 1), _F)),
    ("index_reduce_sum", ((1,), _L), ((3, 1), _L)),
    ("index_copy", ((1,), _I), ((3, 1), _F)), ("index_copy", ((1,), _F), ((3, 1), _F)),
    ("index_copy_", ((1,), _I), ((3, 1), _F)), ("index_copy", ((1, 1), _I), ((3, 1), _F)),
    ("index_copy", ((2,), _L), ((3, 1), _F)), ("index_copy", ((2,), _I), ((3, 1), _F)),
    ("index_copy", ((1,), _I), ((3, 1), _L)), ("index_copy", ((1,), _L), ((3,), _F)),
    ("index_copy", ((1,), _L), ((2, 1), _F)), ("index_copy", ((2,), _L), ((), _F)),
    ("index_fill", ((1,), _I), None), ("index_fill_", ((1,), _I), None),
    ("index_fill", ((1,), _F), None), ("index_fill", ((1, 1), _L), None),
    ("index_fill", ((1, 1), _I), None), ("index_fill_tensor", ((1,), _I), ((1,), _F)),
    ("take", ((1,), _I), None), ("take", ((1,), _F), None),
    ("put", ((1,), _I), ((1,), _F)), ("put_", ((1,), _I), ((1,), _F)),
    ("put", ((1,), _F), ((1,), _F)), ("put", ((1,), _L), ((1,), _L)),
    ("put", ((2,), _L), ((1,), _F)), ("put", ((1,), _I), ((1,), _L)),
]


@pytest.mark.parametrize("bad, exc", [
    (lambda d: torch.empty(10, 0, device=d)[:, [0, 1]], IndexError),
    (lambda d: torch.empty(0, 3, device=d)[[0]], IndexError),
    (lambda d: torch.ops.aten.index.Tensor(torch.ones(1, device=d), []), IndexError),
    # the values' shape is checked before their dtype
    (_masked_assign(torch.tensor([])), RuntimeError),
    (_masked_assign(torch.tensor([1.0, 2.0, 3.0, 4.0])), RuntimeError),
    (lambda d: torch.ones(2, 2, device=d).index_fill_(1, torch.tensor([0], device=d), 1 + 1j),
     RuntimeError),
    (lambda d: torch.ones(2, 2, dtype=torch.bool, device=d).index_fill(
        1, torch.tensor([0], device=d), torch.tensor(1j, device=d)), RuntimeError),
    (lambda d: torch.ones(2, dtype=torch.int8, device=d).index_fill_(
        0, torch.tensor([0], device=d), 1000), RuntimeError),
    # a uint8 mask is a mask to indexing, but not to masked_select (its dtype before shapes)
    (lambda d: torch.zeros(3, device=d).masked_select(
        torch.tensor([1, 0, 1], dtype=torch.uint8, device=d)), RuntimeError),
    (lambda d: torch.zeros(3, device=d).masked_select(
        torch.ones(2, dtype=torch.int64, device=d)), RuntimeError),
    # a 0-d self takes one index, and only 0
    (lambda d: torch.ones((), device=d).index_select(0, torch.tensor([0, 0], device=d)),
     RuntimeError),
    (lambda d: torch.ones((), device=d).index_select(
        0, torch.tensor([], dtype=torch.int64, device=d)), RuntimeError),
    *[(_index_op(op, index, source), Exception) for op, index, source in _BAD_INDEX_ARGS],
    (lambda d: torch.zeros(2, 0, device=d).index_select(1, torch.tensor([0], device=d)),
     RuntimeError),
])
def test_bad_indexing_is_refused_as_cpu(bad, exc):
    raises_as_cpu(bad, exc)


def test_index_select_of_a_0d_tensor_takes_index_0_only(eager_mode):
    def run(device):
        return torch.tensor(3.0, device=device).index_select(0, torch.tensor([0], device=device))

    assert_same(run("tpu"), run("cpu"))
    if eager_mode == "fused":
        pytest.skip("fused eager reads no index values, as for out-of-range indices")
    raises_as_cpu(lambda d: torch.ones((), device=d).index_select(
        0, torch.tensor([1], device=d)), IndexError)


@pytest.mark.parametrize("sizes", [(t, i, s) for t in ((), (1,)) for i in ((), (1,))
                                   for s in ((), (1,))])
def test_index_copy_of_0d_and_1_element_tensors(sizes):
    def run(device):
        target = torch.zeros(sizes[0], device=device)
        target.index_copy_(0, torch.zeros(sizes[1], dtype=torch.int64, device=device),
                           torch.full(sizes[2], 7.0, device=device))
        return target

    assert_same(run("tpu"), run("cpu"))


@pytest.mark.parametrize("size", [1, 3])
def test_gather_and_scatter_take_a_0d_index_into_a_1d_tensor(size):
    def run(device):
        x = torch.arange(1.0, size + 1, device=device, requires_grad=True)
        i = torch.tensor(size - 1, device=device)
        out = torch.gather(x, 0, i)
        (out * 2).backward()
        z = torch.zeros(size, device=device)
        return [out, x.grad, z.scatter_add(0, i, torch.tensor(5.0, device=device)),
                z.scatter(0, i, 7.0)]

    assert_same(run("tpu"), run("cpu"))


@pytest.mark.parametrize("reduce", ["amax", "amin", "max", "min"])
def test_segment_reduce_takes_amax_and_amin_as_cpu(reduce):
    # CPU's kernel reads "amax" as "max" and "amin" as "min", forward and backward.
    def fn(data, lengths):
        data = data.requires_grad_()
        out = torch._segment_reduce(data, reduce, lengths=lengths, axis=0, initial=-1.0)
        out.backward(torch.arange(1.0, 4.0, device=data.device))
        return out, data.grad

    run_both(fn, torch.tensor([1.0, 3.0, 3.0, -2.0, 5.0]), torch.tensor([2, 0, 3]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("reduce", ["sum", "mean", "prod", "amax", "amin"])
@pytest.mark.parametrize("by", ["lengths", "offsets"])
def test_segment_reduce_of_empty_data_gives_the_initial_values(reduce, by, dtype):
    def fn(data, segments):
        return [torch._segment_reduce(data, reduce, axis=0, initial=initial, **{by: segments})
                for initial in (None, 2.0)]

    segments = torch.tensor([0, 0]) if by == "lengths" else torch.tensor([0, 0, 0])
    run_both(fn, torch.ones(0, dtype=dtype), segments)
    run_both(fn, torch.ones(0, 3, dtype=dtype), segments)


@pytest.mark.parametrize("index", [
    lambda x, d: x[:, torch.tensor([0, 1], device=d)],
    lambda x, d: x[torch.tensor([[0], [3]], device=d), :, torch.tensor([1, 2], device=d)],
    lambda x, d: x[..., torch.tensor([2, 0], device=d)],
    lambda x, d: x.transpose(1, 2)[torch.tensor([1, 0], device=d)],
])
def test_advanced_indexing_of_a_permuted_tensor_is_laid_out_as_cpu(index):
    # CPU's index kernel (TensorIterator) lays its result out in its input's memory order.
    def run(d):
        return index(torch.arange(60.0, device=d).reshape(3, 4, 5).permute(2, 0, 1), d)

    out, expected = run(TPU), run("cpu")
    assert_same(out, expected)
    assert out.stride() == expected.stride()


@pytest.mark.parametrize("index", [
    lambda x, i: x[i], lambda x, i: x[:, i], lambda x, i: x[i, :, i],
    lambda x, i: x[i, i[:1].contiguous()], lambda x, i: x.permute(2, 0, 1)[:, i],
    lambda x, i: x[i, 1:3],
], ids=["front", "middle", "apart", "broadcast_pair", "permuted_input", "with_slice"])
def test_advanced_indexing_with_a_transposed_index_is_laid_out_as_cpu(index):
    # CPU's iterator orders the result by the index's strides too (the meta kernel by the
    # input's alone).
    x, i = torch.randn(4, 5, 6), torch.tensor([[0, 1, 2], [3, 2, 1]]).t()
    out, expected = index(x.to(TPU), i.to(TPU)), index(x, i)
    assert_same(out, expected)
    assert out.stride() == expected.stride()


@pytest.mark.parametrize("size", [(), (3,), (2, 2)])
def test_take_returns_a_copy_not_a_view_of_its_input(size):
    # The decomposition's flattened[index] selects a view for a 0-d index; put's
    # backward then hands the same buffer to self's and source's .grad.
    def run(device):
        src = torch.arange(1.0, 1.0 + torch.Size(size).numel(), device=device).reshape(size)
        out = torch.take(src, torch.tensor(-1, device=device))
        out.add_(10)
        return src, out

    for t, c in zip(run("tpu"), run("cpu"), strict=True):
        assert_same(t, c)


def test_put_accumulate_grads_of_self_and_source_are_separate():
    def run(device):
        x = torch.tensor(0.5, device=device, requires_grad=True)
        src = torch.tensor(6.0, device=device, requires_grad=True)
        idx = torch.tensor(0, device=device)
        torch.put(x, idx, src, True).sum().abs().backward()
        torch.put(x.detach(), idx, src, True).sum().abs().backward()
        return x.grad, src.grad

    for t, c in zip(run("tpu"), run("cpu"), strict=True):
        assert_same(t, c)


@pytest.mark.parametrize("dtype", [torch.int32, pytest.param(torch.int64, marks=pytest.mark.slow)])
def test_repeat_interleave_positions_take_the_repeats_dtype(dtype):
    # PyG's ptr2index repeats an int32 arange by int32 counts and expects int32 back
    run_both(lambda r: (torch.repeat_interleave(r), torch.repeat_interleave(r, output_size=4)),
             torch.tensor([1, 0, 3], dtype=dtype))


COMPRESSED = {
    "coo to csr": lambda t: torch._convert_indices_from_coo_to_csr(t([0, 0, 2, 2, 3]), 6),
    "coo to csr int32 in": lambda t: torch._convert_indices_from_coo_to_csr(
        t([0, 1, 1], dtype=torch.int32), 3),
    "coo to csr int32 out": lambda t: torch._convert_indices_from_coo_to_csr(
        t([0, 1, 1], dtype=torch.uint8), 3, out_int32=True),
    "coo to csr below zero": lambda t: torch._convert_indices_from_coo_to_csr(t([-1, 0, 2]), 3),
    "coo to csr of nothing": lambda t: torch._convert_indices_from_coo_to_csr(
        t([], dtype=torch.int64), 3),
    "coo to csr 0-d": lambda t: torch._convert_indices_from_coo_to_csr(t(2), 3),
    "csr to coo (empty row)": lambda t: torch._convert_indices_from_csr_to_coo(
        t([0, 2, 2, 5]), t([1, 0, 2, 1, 0])),
    "csr to coo transposed int32": lambda t: torch._convert_indices_from_csr_to_coo(
        t([0, 2, 2, 5]), t([1, 0, 2, 1, 0]), out_int32=True, transpose=True),
    "csr to coo batched": lambda t: torch._convert_indices_from_csr_to_coo(
        t([[0, 2, 2, 5], [0, 1, 3, 5]]), t([[1, 0, 2, 1, 0], [0, 0, 1, 2, 2]])),
    "csr to coo of nothing": lambda t: torch._convert_indices_from_csr_to_coo(
        t([0]), t([], dtype=torch.int64)),
}


_COMPRESSED_DEFAULT = {"coo to csr int32 in", "csr to coo transposed int32", "csr to coo batched"}


@pytest.mark.parametrize("case", [
    pytest.param(case, marks=() if case in _COMPRESSED_DEFAULT else pytest.mark.slow)
    for case in sorted(COMPRESSED)])
def test_compressed_index_conversions_match_cpu(case):
    # dense integer tensors in and out (PyG's index2ptr): no sparse layout involved
    def run(device):
        return COMPRESSED[case](lambda *a, **k: torch.tensor(*a, device=device, **k))

    assert_same(run(TPU), run("cpu"))


@pytest.mark.parametrize("bad, exc", [
    (lambda d: torch._convert_indices_from_coo_to_csr(torch.zeros(3, device=d), 2),
     NotImplementedError),
    (lambda d: torch._convert_indices_from_coo_to_csr(
        torch.zeros(1, 2, dtype=torch.long, device=d), 2), RuntimeError),
    (lambda d: torch._convert_indices_from_csr_to_coo(
        torch.zeros(2, dtype=torch.bool, device=d), torch.zeros(1, dtype=torch.bool, device=d)),
     NotImplementedError),
])
def test_compressed_index_conversions_refuse_as_cpu(bad, exc):
    raises_as_cpu(bad, exc)


def _bools(d, *shape):
    return torch.ones(*shape, dtype=torch.bool, device=d)


@pytest.mark.parametrize("bad", [
    lambda d: torch.segment_reduce(torch.ones(3, dtype=torch.int64, device=d), "sum",
                                   lengths=torch.tensor([1, 2], device=d)),
    lambda d: _bools(d, 3).scatter_reduce(0, torch.tensor([0, 0, 2], device=d), _bools(d, 3),
                                          "mean"),
    lambda d: _bools(d, 3).scatter_reduce(0, torch.tensor([], dtype=torch.int64, device=d),
                                          _bools(d, 0), "mean", include_self=False),
    lambda d: _bools(d, 3, 2).index_reduce(0, torch.tensor([0, 2], device=d), _bools(d, 2, 2),
                                           "amax", include_self=False),
    lambda d: _bools(d, 3).index_reduce(0, torch.tensor([0, 2], device=d), _bools(d, 2),
                                        "amax"),
    lambda d: _bools(d, 3, 2).index_reduce(0, torch.tensor([0, 2], device=d), _bools(d, 2, 2),
                                           "mean"),
])
def test_reductions_into_places_refuse_dtypes_as_cpu(bad):
    raises_as_cpu(bad, NotImplementedError)


def test_index_reduce_prod_of_bools_is_a_logical_and():
    # CPU reduces a bool self of two dimensions or more slice by slice, with mul_
    run_both(lambda s, i, src: s.index_reduce(0, i, src, "prod"),
             torch.tensor([[True, True], [True, False], [False, True]]), torch.tensor([0, 0, 2]),
             torch.tensor([[True, False], [True, True], [True, True]]))


@pytest.mark.parametrize("bad", [
    lambda d: torch.zeros(3, 2, device=d).index_add(0, torch.tensor([5], device=d),
                                                     torch.ones(1, 2, device=d), alpha=2).cpu(),
    lambda d: torch.zeros(2, 3, 2, device=d).index_add(1, torch.tensor([-1], device=d),
                                                        torch.ones(2, 1, 2, device=d)).cpu(),
    lambda d: torch.zeros(0, 3, device=d).index_add(1, torch.tensor([5], device=d),
                                                     torch.ones(0, 1, device=d)).add(
                                                         torch.ones(2, device=d)),
], ids=["alpha", "middle_dim", "empty_self"])
def test_index_add_of_a_larger_self_checks_indices_as_cpus_path(bad):
    # CPU adds slice by slice (index_select's words) unless alpha is 1 along the first or last
    # dim (scatter_add's); into an empty self it reads no index (.cpu(): fused eager's check
    # runs at the sync)
    raises_as_cpu(bad, Exception)
