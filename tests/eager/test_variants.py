"""In-place, method and out= forms of an op give what its function form gives, as on CPU."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from conftest import TPU, assert_same, raises_as_cpu


def test_an_inplace_op_whose_function_takes_its_arguments_in_another_order():
    # polygamma_(self, n) is polygamma(n, self).
    def run(device):
        x, y = torch.arange(1.0, 5.0, device=device), torch.arange(1.0, 5.0, device=device)
        return x.polygamma_(1), x, y.polygamma_(n=2)

    assert_same(run(TPU), run("cpu"))


def test_out_of_an_op_with_its_own_dtype_argument():
    # softmax's dtype is the caller's: out= added it again (a crash), and a complex norm's
    # float32 out made its dtype float32 (refused).
    def run(device):
        x = torch.arange(6.0, device=device).reshape(2, 3)
        soft = torch.empty(2, 3, dtype=torch.float64, device=device)
        returned = torch.softmax(x, 1, dtype=torch.float64, out=soft)
        norm = torch.empty((), device=device)
        torch.linalg.vector_norm(torch.tensor([3 + 4j, 1j], device=device), out=norm)
        return returned is soft, soft, norm

    assert_same(run(TPU), run("cpu"), rtol=1e-15, atol=0)


def test_out_as_a_list_of_tensors():
    def run(device):
        x = torch.arange(6.0, device=device).reshape(2, 3)
        split = [torch.empty(2, device=device), torch.empty(4, device=device)]
        unbound = [torch.empty(3, device=device), torch.empty(3, device=device)]
        returned = (torch.split_with_sizes_copy(x.flatten(), [2, 4], out=split),
                    torch.unbind_copy(x, 0, out=unbound))
        return returned, split, unbound

    assert_same(run(TPU), run("cpu"))


def test_resize_to_the_same_shape_keeps_the_layout():
    # ATen's resize_impl_: the same sizes without a memory format change nothing.
    def run(device):
        x = torch.arange(6.0, device=device).reshape(3, 2).t()
        y = torch.arange(6.0, device=device).reshape(3, 2).t()
        z = torch.arange(6.0, device=device).reshape(3, 2).t()
        x.resize_(2, 3)
        y.resize_as_(torch.empty(2, 3, device=device))
        z.resize_(2, 3, memory_format=torch.contiguous_format)
        return [(t, t.stride()) for t in (x, y)], z.stride()

    assert_same(run(TPU), run("cpu"))


@pytest.mark.parametrize("op", [
    lambda x, out: torch.add(x, x[0], out=out),
    lambda x, out: torch.eq(x[:1], x, out=out),
    lambda x, out: torch.exp(x, out=out),
    lambda x, out: torch.fft.fft2(x, out=out),
])
@pytest.mark.parametrize("size", [(0,), (2, 1)])
def test_an_empty_out_is_resized_to_the_results_layout(op, size):
    # TensorIterator restrides an out it resizes in a permuted input's order (an empty one,
    # or one of another shape, resized with a warning); fft2 leaves its out contiguous,
    # though its own result is not.
    def run(device):
        x = torch.arange(24.0, device=device).reshape(2, 3, 4).permute(2, 0, 1) / 10 + 1
        out = torch.zeros(size, dtype=op(x, None).dtype, device=device)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            returned = op(x, out)
        return returned is out, out, out.stride()

    assert_same(run(TPU), run("cpu"))


_NN = torch._C._nn


@pytest.mark.parametrize("op", [
    lambda x, d: torch.cat((x, x), 1, out=torch.empty(0, device=d)),
    lambda x, d: torch.sort(x, out=(torch.empty(0, device=d),
                                    torch.empty(0, dtype=torch.long, device=d)))[1],
    lambda x, d: torch.complex(x, x, out=torch.empty(0, dtype=torch.cfloat, device=d)),
    lambda x, d: _NN.upsample_nearest2d(x, [5, 7], out=torch.empty(0, device=d)),
    lambda x, d: _NN.max_pool2d_with_indices(x, 2, out=(torch.empty(0, device=d),
                                                        torch.empty(0, dtype=torch.long,
                                                                    device=d)))[1],
    lambda x, d: _NN.reflection_pad2d(x, [1, 1, 1, 1], out=torch.empty(3, device=d)),
    lambda x, d: _NN.avg_pool3d(x.unsqueeze(2), 1, out=torch.empty(0, device=d)),  # stays
], ids=["cat", "sort", "complex", "upsample", "max_pool", "reflection_pad", "avg_pool3d"])
def test_a_structured_kernels_resized_out_takes_its_results_layout(op):
    # PyTorch's test_cat_out_memory_format: a channels_last input's cat into torch.empty(0)
    # was contiguous on tpu, channels_last on CPU (resize_out restrides as the result is
    # laid out); so were sort's, pooling's, upsampling's and padding's outs.
    def run(device):
        x = torch.randn(2, 3, 4, 6, generator=torch.Generator().manual_seed(0))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = op(x.contiguous(memory_format=torch.channels_last).to(device), device)
        return out, out.stride()

    assert_same(run(TPU), run("cpu"))


def _mat(device, *shape, spd=False):
    g = torch.Generator().manual_seed(sum(shape))
    a = torch.randn(*shape, dtype=torch.float64, generator=g)
    if spd:
        a = a @ a.mT + shape[-1] * torch.eye(shape[-1], dtype=torch.float64)
    return a.to(device)


def _tri(device):
    return _mat(device, 2, 4, 4).triu() + 4 * torch.eye(4, dtype=torch.float64, device=device)


_F, _I32, _I64 = torch.float64, torch.int32, torch.int64


@pytest.mark.parametrize("op, dtypes", [
    (lambda d, out: torch.linalg.inv(_mat(d, 2, 4, 4), out=out[0]), [_F]),
    (lambda d, out: torch.linalg.cholesky_ex(_mat(d, 2, 4, 4, spd=True), out=out), [_F, _I32]),
    (lambda d, out: torch.linalg.lu_factor(_mat(d, 2, 4, 3), out=out), [_F, _I32]),
    (lambda d, out: torch.linalg.qr(_mat(d, 2, 4, 3), mode="complete", out=out), [_F, _F]),
    (lambda d, out: torch.linalg.eigh(_mat(d, 2, 4, 4, spd=True), out=out), [_F, _F]),
    (lambda d, out: torch.linalg.svd(_mat(d, 2, 4, 3), out=out), [_F, _F, _F]),
    # (V: Vh's layout, transposed)
    (lambda d, out: torch.svd(_mat(d, 2, 4, 3), out=out), [_F, _F, _F]),
    (lambda d, out: torch.linalg.solve(_mat(d, 2, 4, 4), _mat(d, 2, 4), out=out[0]), [_F]),
    # left=False solves the transposed system: row-major
    (lambda d, out: torch.linalg.solve(_mat(d, 2, 4, 4), _mat(d, 2, 3, 4), left=False,
                                       out=out[0]), [_F]),
    (lambda d, out: torch.linalg.solve_triangular(_tri(d), _mat(d, 2, 3, 4), upper=True,
                                                  left=False, out=out[0]), [_F]),
    (lambda d, out: torch.triangular_solve(_mat(d, 2, 4, 3), _tri(d), out=out), [_F, _F]),
    (lambda d, out: torch.geqrf(_mat(d, 2, 4, 3), out=out), [_F, _F]),
    # (a solution narrowed from a buffer of max(m, n) rows)
    (lambda d, out: torch.linalg.lstsq(_mat(d, 2, 4, 3), _mat(d, 2, 4, 2), out=out),
     [_F, _F, _I64, _F]),
    (lambda d, out: torch.linalg.lstsq(_mat(d, 5, 3), _mat(d, 5), driver="gelsd", out=out),
     [_F, _F, _I64, _F]),
    (lambda d, out: torch.linalg.pinv(_mat(d, 2, 4, 3), out=out[0]), [_F]),
    (lambda d, out: torch.cholesky_solve(_mat(d, 2, 4, 3), _mat(d, 2, 4, 4), out=out[0]), [_F]),
])
def test_a_resized_linalg_out_is_column_major_as_lapack_leaves_it(op, dtypes):
    # CPU's LAPACK kernels resize their matrix outs to batched column-major strides; their
    # vectors, infos and pivots, and other kernels' outs, resize contiguous.
    def run(device):
        outs = [torch.empty(0, dtype=t, device=device) for t in dtypes]
        op(device, outs)
        return outs

    resized = run(TPU)
    assert [t.stride() for t in resized] == [t.stride() for t in run("cpu")]
    # the values written through those strides: as into outs of the right shape already
    kept = [torch.empty(t.shape, dtype=t.dtype, device=TPU) for t in resized]
    op(TPU, kept)
    assert_same(resized, kept)


def test_a_non_empty_linalg_out_of_another_shape_is_resized_column_major():
    def run(device):
        out = torch.empty(3, 3, dtype=torch.float64, device=device)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (the resize warning)
            torch.linalg.inv(_mat(device, 2, 4, 4), out=out)
        return out, out.stride()

    assert_same(run(TPU), run("cpu"))


def test_an_out_of_the_right_shape_keeps_its_strides_in_linalg():
    def run(device):
        out = torch.empty(2, 4, 4, dtype=torch.float64, device=device)
        returned = torch.linalg.inv(_mat(device, 2, 4, 4), out=out)
        return returned is out, out, out.stride()

    assert_same(run(TPU), run("cpu"))


def test_a_resized_out_warns_in_cpus_words():
    def run(device):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.linalg.cholesky(_mat(device, 3, 3, spd=True),
                                  out=torch.empty(2, 3, dtype=torch.float64, device=device))
        return [str(w.message).split(" (Triggered internally")[0] for w in caught]

    assert run(TPU) == run("cpu")


def test_kron_into_out():
    # kron's out= multiplies into an _unsafe_view of out, which aliases it as on CPU.
    def run(device):
        a = torch.arange(4.0, device=device).reshape(2, 2)
        out = torch.empty(2, 4, device=device)
        torch.kron(a, torch.tensor([[1.0, 10.0]], device=device), out=out)
        return out

    assert_same(run(TPU), run("cpu"))


@pytest.mark.parametrize("write", [
    lambda p: torch.nn.utils.clip_grad_value_([p], 2.5),  # multi-tensor by default
    lambda p: torch.nn.utils.clip_grad_norm_([p], 1.0, foreach=True),
    lambda p: torch._foreach_add_([p.grad[:, 1:]], [p.grad[:, :-1].contiguous()]),
])
def test_multi_tensor_writes_check_overlap_as_each_tensor_would(write):
    # An expanded gradient: the per-tensor ops refuse it, so must their multi-tensor forms.
    def run(device):
        p = torch.nn.Parameter(torch.randn(3, 4).to(device))
        p.grad = torch.tensor([1.0, 2.0, 3.0, 4.0], device=device).expand(3, 4)
        write(p)

    raises_as_cpu(run)


def test_multi_tensor_partial_overlap_and_zero():
    def partial(device):  # x[1:] += x[:-1] reads elements it has already written
        x = torch.arange(5.0, device=device)
        torch._foreach_add_([x[1:]], [x[:-1]])

    raises_as_cpu(partial)

    def zero(device):  # zero_ may write an expanded tensor, and so may _foreach_zero_
        g = torch.tensor([1.0, 2.0], device=device).expand(3, 2)
        torch._foreach_zero_([g])
        return g

    assert_same(zero(TPU), zero("cpu"))


def test_inplace_abs_of_complex_is_refused():
    raises_as_cpu(lambda d: torch.tensor([3 + 4j], device=d).abs_())


@pytest.mark.filterwarnings("ignore:torch.range is deprecated")
@pytest.mark.parametrize("make", [
    lambda out: torch.arange(0, 6, out=out), lambda out: torch.arange(6.0, out=out),
    lambda out: torch.range(0, 5, out=out), lambda out: torch.linspace(0, 5, 6, out=out),
    lambda out: torch.logspace(0, 5, 6, out=out),
    lambda out: torch.eye(2, 3, out=out), lambda out: torch.full((6,), 2.0, out=out),
])
@pytest.mark.parametrize("shape", [(2, 3), (3,), (4, 4), (0,)])
def test_factory_out_of_another_shape_as_cpu(make, shape):
    # The range factories resize an out= only when its element count differs (one of
    # another shape and the same count keeps its shape); no factory gives resize_output's
    # deprecation warning (arange gives its own).
    def run(device):
        out = torch.zeros(shape, device=device).t() if len(shape) == 2 else torch.zeros(
            shape, device=device)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            make(out)
        # (a C++ warning ends by naming the line that raised it)
        return out, [str(w.message).split(" (Triggered internally")[0] for w in caught
                     if "torch.range is deprecated" not in str(w.message)]

    (out, warned), (expected, expected_warned) = run(TPU), run("cpu")
    assert warned == expected_warned
    assert out.shape == expected.shape
    assert_same(out, expected)


def _indexed_write(name):
    def run(device):
        x, i = torch.arange(4.0, device=device), torch.tensor([1, 2], device=device)
        mask = torch.tensor([True, False, True, False], device=device)
        return {"setitem": lambda: x.__setitem__(i, x[0:2]),
                "index_put_disjoint": lambda: x.index_put_((i,), x[2:4]),
                "index_put_accumulate": lambda: x.index_put_((i,), x[2:4], accumulate=True),
                "index_put_mask": lambda: x.index_put_((mask,), x[0:2]),
                "index_put_mask_one_value": lambda: x.index_put_((mask,), x[0]),  # masked_fill_
                "index_put_own_index": lambda: i.index_put_((i[:1],), i[1:].clone()),
                "index_copy_": lambda: x.index_copy_(0, i, x[0:2]),
                "index_add_": lambda: x.index_add_(0, i, x[0:2]),
                "index_reduce_": lambda: x.index_reduce_(0, i, x[0:2], "prod"),
                "scatter_": lambda: x.scatter_(0, i, x[0:2]),
                "scatter_add_": lambda: x.scatter_add_(0, i, x[0:2]),
                "put_": lambda: x.put_(i, x[0:2]),
                "index_fill_": lambda: x.index_fill_(0, i, x[0]),  # (reads a number)
                "disjoint_views": lambda: x[:2].index_put_((i - 1,), x[2:4])}[name]()

    return run


@pytest.mark.parametrize("name", [
    "setitem", "index_put_disjoint", "index_put_accumulate", "index_put_mask",
    "index_put_mask_one_value", "index_put_own_index", "index_copy_", "index_add_",
    "index_reduce_", "scatter_", "scatter_add_", "put_", "index_fill_", "disjoint_views"])
def test_indexed_writes_refuse_a_source_sharing_self_as_cpu(name):
    # CPU's kernels assert no overlap of self with its source or index, unless index_put_
    # takes its masked_fill_ path.
    try:
        expected = _indexed_write(name)("cpu")
    except RuntimeError:
        return raises_as_cpu(_indexed_write(name))
    assert_same(_indexed_write(name)(TPU), expected)


@pytest.mark.parametrize("op", [
    lambda args, outs: torch.ops.aten._native_batch_norm_legit.out(
        *args, True, 0.5, 0.6, out=outs[0], save_mean=outs[1], save_invstd=outs[2]),
    lambda args, outs: torch.ops.aten._batch_norm_with_update.out(
        *args, 0.5, 0.6, out=outs[0], save_mean=outs[1], save_invstd=outs[2], reserve=outs[3]),
    lambda args, outs: torch.native_batch_norm(*args, True, 0.5, 0.6, out=tuple(outs[:3])),
], ids=["_native_batch_norm_legit", "_batch_norm_with_update", "native_batch_norm"])
def test_out_of_an_op_that_also_writes_inputs(op):
    # batch norm's out= forms write their running stats (positional) and their outs (keyword)
    def run(device):
        g = torch.Generator().manual_seed(0)
        x, w, b, mean = (torch.randn(n, generator=g) for n in ((4, 3, 2), 3, 3, 3))
        args = [t.to(device) for t in (x, w, b, mean, torch.rand(3, generator=g) + 0.5)]
        outs = [torch.empty(0, device=device), torch.empty(3, device=device),
                torch.empty(7, device=device), torch.empty(0, dtype=torch.uint8, device=device)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (resizing the 7-element out warns on both)
            returned = op(args, outs)
        return [r is o for r, o in zip(returned, outs, strict=False)], outs[:3], args[3:]

    assert_same(run(TPU), run("cpu"))


def test_resizing_a_nonempty_out_warns_in_cpus_words():
    # (callers match resize_output's words: PyTorch's test_out_warning looks for "An output
    # with one or more elements")
    def run(device):
        out = torch.zeros(3, device=device)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.add(torch.ones(2, 2, device=device), 1, out=out)
        return out, [str(w.message).split(" (Triggered internally")[0] for w in caught]

    (out, warned), (expected, expected_warned) = run(TPU), run("cpu")
    assert warned == expected_warned
    assert_same(out, expected)


@pytest.mark.parametrize("op", [
    lambda d, out: torch.addbmm(torch.ones(2, 2, device=d), torch.ones(3, 2, 2, device=d),
                                torch.ones(3, 2, 2, device=d), out=out),
    lambda d, out: torch.narrow_copy(torch.ones(4, 2, device=d), 0, 1, 2, out=out),
    lambda d, out: torch.bernoulli(torch.ones(2, 2, device=d), out=out),
    lambda d, out: torch._C._nn.log_sigmoid(torch.ones(2, 2, device=d), out=out),
], ids=["addbmm", "narrow_copy", "bernoulli", "log_sigmoid"])
def test_kernels_that_resize_their_out_quietly(op):
    # (their CPU kernels call resize_, not resize_output)
    def run(device):
        out = torch.zeros(3, device=device)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            op(device, out)
        return out, [str(w.message).split(" (Triggered internally")[0] for w in caught]

    (out, warned), (expected, expected_warned) = run(TPU), run("cpu")
    assert warned == expected_warned
    assert_same(out, expected)


@pytest.mark.parametrize("shapes", [
    ((2, 4, 3), (3, 5)), ((2, 4, 3), (3,)), ((3,), (2, 3, 5)), ((4, 3), (2, 3, 5)),
    ((3,), (3, 5)),  # (CPU's 1-d @ 2-d form resizes its out through an unsqueeze: it warns)
])
@pytest.mark.parametrize("strided", [False, True])
def test_matmul_into_a_strided_out_as_cpu(shapes, strided):
    # matmul's out= composite folds a batched operand into one matrix product written through
    # out.reshape(...), and copies it back unless that reshape aliases the out; a view of
    # ours shares no C++ storage, so the copy of the folded product failed.
    def run(device):
        torch.manual_seed(0)
        a, b = (torch.randn(s).to(device) for s in shapes)
        shape = torch.matmul(a, b).shape
        out = torch.empty(*shape[:-1], shape[-1] * 2, device=device)
        out = out[..., ::2] if strided else out[..., :shape[-1]].contiguous()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            returned = torch.matmul(a, b, out=out)
        return returned is out, out, out.stride(), len(caught)

    assert_same(run(TPU), run("cpu"))


@pytest.mark.parametrize("shapes", [((2, 4, 3), (3,)), ((2, 2, 4, 3), (3,)), ((2, 4, 3), (3, 5)),
                                    ((3,), (2, 3, 5))])
@pytest.mark.parametrize("dtype", [torch.float64, torch.int64])
def test_matmul_into_an_out_of_another_dtype_is_refused_as_cpu(shapes, dtype):
    # CPU folds a batch @ vector into addmv's out= kernel, which words it its own way
    raises_as_cpu(lambda d: torch.matmul(*(torch.randn(s, device=d) for s in shapes),
                                         out=torch.empty(0, dtype=dtype, device=d)))


@pytest.mark.parametrize("op", [
    lambda d, out: torch.ormqr(_mat(d, 5, 0), _mat(d, 0), _mat(d, 5, 0), out=out),
    lambda d, out: torch.ormqr(_mat(d, 5, 3), _mat(d, 3), _mat(d, 5, 0), out=out),
    lambda d, out: torch.linalg.householder_product(_mat(d, 5, 0), _mat(d, 0), out=out),
    lambda d, out: torch.cholesky_inverse(_mat(d, 0, 3, 3), out=out),
    lambda d, out: torch.triangular_solve(_mat(d, 0, 5, 5), _mat(d, 0, 5, 5),
                                          out=(out, out.clone()))[0],
])
def test_an_empty_lapack_out_of_the_right_shape_is_restrided_as_cpu(op):
    # these kernels lay out their out column-major whenever it holds no elements (only an
    # out with elements but not column-major is computed aside and copied in)
    def run(device):
        shape = op("cpu", torch.empty(0, dtype=torch.float64)).shape
        out = torch.empty_strided(shape, (1,) * len(shape), dtype=torch.float64, device=device)
        op(device, out)
        return out.stride()

    assert run(TPU) == run("cpu")


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("strided", [False, True])
def test_linear_of_a_vector_into_out_as_cpu(bias, strided):
    # CPU's linear_out runs matmul_out for a 1-d input, whose out resizes to 1 x n (warning)
    # and is squeezed back: contiguous whatever its strides were
    def run(device):
        torch.manual_seed(0)
        x, w, b = (torch.randn(s).to(device) for s in ((3,), (4, 3), (4,)))
        out = torch.empty(8, device=device)
        out = out[::2] if strided else out[:4]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            returned = torch.nn.functional.linear(x, w, b if bias else None, out=out)
        return returned is out, out, out.stride(), len(caught)

    assert_same(run(TPU), run("cpu"))


@pytest.mark.parametrize("shape", [(), (5,), (2, 5)])
def test_mode_resizes_the_outs_of_a_0d_input_quietly(shape):
    # (CPU's mode kernel resize_s them for a 0-d input, resize_output for the others)
    def run(device):
        x = torch.arange(10.0, device=device)[:max(math.prod(shape), 1)].reshape(shape)
        outs = torch.zeros(3, device=device), torch.zeros(3, dtype=torch.long, device=device)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.mode(x, -1 if shape else 0, out=outs)
        return outs, len(caught)

    assert_same(run(TPU), run("cpu"))


@pytest.mark.parametrize("shape", [(2, 3), (3,), (1, 3), (2, 2, 3), (2, 4), (0,)])
def test_normal_of_a_tensor_mean_draws_over_its_outs_shape_as_cpu(shape):
    # CPU's normal(Tensor, float, out=) broadcasts the mean with the out's own shape
    def run(device):
        mean = torch.zeros(2, 3, device=device)
        out = torch.zeros(shape, device=device)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.normal(mean, 1e-30, out=out)
        return out, len(caught)

    if shape in [(2, 4), (0,)]:  # (no broadcast with the mean's)
        raises_as_cpu(run)
    else:
        assert_same(run(TPU), run("cpu"))
