"""Results laid out as CPU lays them out: what `stride()`, `is_contiguous()` and `.view()`
see after an op on a slice of a channels_last tensor, a permuted input, or a factorization."""

import math

import pytest
import torch
import torch.nn.functional as F
from conftest import assert_same


def _sliced_channels_last(x: torch.Tensor, device: str) -> torch.Tensor:
    """``x``'s values in the first half of a channels_last tensor's channels (not dense)."""
    fmt = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
    big = torch.zeros(x.shape[0], 2 * x.shape[1], *x.shape[2:], device=device)
    return big.to(memory_format=fmt)[:, : x.shape[1]].copy_(x)


@pytest.mark.usefixtures("eager_mode")
@pytest.mark.parametrize("op", [
    lambda x: x + 1, torch.relu, lambda x: torch.cat([x, x], 1), lambda x: torch.cat([x, x]),
    lambda x: F.max_pool2d(x, 2), lambda x: F.avg_pool2d(x, 2),
    lambda x: F.adaptive_avg_pool2d(x, 3), lambda x: F.batch_norm(x, None, None, training=True),
    lambda x: F.interpolate(x, scale_factor=2, mode="nearest"),
    lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"),
    lambda x: F.conv2d(x, torch.ones(3, 4, 1, 1, device=x.device)),
], ids=["add", "relu", "cat_channels", "cat_batch", "max_pool", "avg_pool", "adaptive_pool",
        "batch_norm", "nearest", "bilinear", "conv"])
def test_a_slice_of_a_channels_last_tensor_gives_channels_last_results(op):
    # CPU's kernels ask suggest_memory_format, which reads the strides' order, not density.
    x = torch.randn(2, 4, 6, 6)
    cpu, tpu = op(_sliced_channels_last(x, "cpu")), op(_sliced_channels_last(x, "tpu"))
    assert cpu.is_contiguous(memory_format=torch.channels_last)
    assert tpu.stride() == cpu.stride()
    assert_same(tpu, cpu, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", [
    lambda x: F.max_pool2d(x, 2, return_indices=True),
    lambda x: F.adaptive_max_pool2d(x, 3, return_indices=True),
    lambda x: F.avg_pool2d(x, 2),
    lambda x: F.conv2d(x, torch.ones(3, 4, 1, 1, device=x.device)),
], ids=["max_pool2d", "adaptive_max_pool2d", "avg_pool2d", "conv2d"])
def test_indices_and_gradients_of_a_channels_last_slice_are_channels_last(op):
    # c10's suggest_memory_format reads the strides' order, not density: x[:, ::2] of a
    # channels_last tensor is channels_last to CPU's kernels (the results, and the gradient)
    def run(device):
        x = torch.arange(400.0).reshape(2, 8, 5, 5).to(memory_format=torch.channels_last)
        x = x.to(device)[:, ::2].requires_grad_()
        out = op(x)
        out = out if isinstance(out, tuple) else (out,)
        out[0].sum().backward()
        return [*out, x.grad]

    cpu, tpu = run("cpu"), run("tpu")
    assert [t.stride() for t in tpu] == [t.stride() for t in cpu]
    for t, c in zip(tpu, cpu, strict=True):
        torch.testing.assert_close(t.cpu(), c)


def test_unbatched_channels_last_3d_max_pool3d_gives_cpus_layout():
    # CPU's kernel pools it as a batch of one in channels_last_3d and returns that layout
    def run(device):
        x = torch.arange(2 * 6 * 5 * 7.0).reshape(1, 2, 6, 5, 7)
        x = x.contiguous(memory_format=torch.channels_last_3d).squeeze(0).to(device)
        return F.max_pool3d(x.requires_grad_(), 2, return_indices=True)

    cpu, tpu = run("cpu"), run("tpu")
    assert [t.stride() for t in tpu] == [t.stride() for t in cpu]
    for t, c in zip(tpu, cpu, strict=True):
        torch.testing.assert_close(t.cpu(), c)


@pytest.mark.usefixtures("eager_mode")
@pytest.mark.parametrize("op", [
    lambda x: x.flip(0), lambda x: x.sort(0)[0], lambda x: x.argsort(1), F.hardswish,
    F.hardshrink, lambda x: x.index_put(
        (torch.tensor([0, 2], device=x.device),), torch.zeros(5, device=x.device)),
    lambda x: torch.addr(x, torch.ones(5, device=x.device), torch.ones(5, device=x.device)),
    lambda x: torch.fft.fft(x, dim=0), lambda x: torch.polar(x.abs(), x),
], ids=["flip", "sort", "argsort", "hardswish", "hardshrink", "index_put", "addr",
        "fft", "polar"])
def test_ops_that_follow_a_transposed_inputs_order(op):
    x = torch.randn(5, 5) * 3
    cpu, tpu = op(x.t()), op(x.to("tpu").t())
    assert tpu.stride() == cpu.stride() != (5, 1)
    assert_same(tpu, cpu)


@pytest.mark.parametrize("stride, perm", [((10, 1, 1), (0, 2, 1)), ((10, 3, 3), (0, 2, 1))])
def test_an_overlapping_inputs_equal_strides_order_a_pointwise_result(stride, perm):
    # PyTorch's test_like_fn_stride_proparation_vs_tensoriterator_unary_op: CPU's iterator
    # puts the smaller of two equally strided dimensions inside; tpu kept exp's result
    # contiguous (its in-order check saw no stride growing)
    def run(device):
        x = torch.empty_strided((4, 3, 2), stride, device=device).fill_(1.5).permute(perm)
        return torch.exp(x), torch.exp(x).stride()

    assert_same(run("tpu"), run("cpu"))


_A = torch.ops.aten


@pytest.mark.usefixtures("eager_mode")
@pytest.mark.parametrize("op", [
    lambda x, s: torch.div(x, s, rounding_mode="floor"), lambda x, s: torch.copysign(x, s),
    lambda x, s: torch.floor_divide(x, s), lambda x, s: torch.rsub(x, s),
    lambda x, s: torch.rsub(s, x), lambda x, s: torch.floor_divide(x, x + s),
    lambda x, s: torch.rsub(x, x * s), lambda x, s: torch.fill(x, s),
    lambda x, s: _A.hardtanh_backward(x * s, x, -1.0, 1.0),
    lambda x, s: _A.leaky_relu_backward(x * s, x, 0.1, False),
    lambda x, s: _A.hardsigmoid_backward(x * s, x), lambda x, s: _A.mish_backward(x * s, x),
    lambda x, s: _A.softshrink_backward(x * s, x, 0.5),
], ids=["div_floor", "copysign", "floor_divide", "rsub", "rsub_0dim_first",
        "floor_divide_tensors", "rsub_tensors", "fill", "hardtanh_backward",
        "leaky_relu_backward", "hardsigmoid_backward", "mish_backward", "softshrink_backward"])
def test_tensor_iterator_ops_follow_a_permuted_input_past_a_0dim_operand(op):
    # A 0-dim operand decides nothing in CPU's iterator order; these ops' meta kernels (or
    # missing pointwise tags) gave contiguous results.
    x, s = torch.randn(4, 3, 5).permute(2, 0, 1) * 3, torch.tensor(1.5)
    cpu, tpu = op(x, s), op(x.to("tpu"), s.to("tpu"))
    assert tpu.stride() == cpu.stride() == (1, 15, 5)
    assert_same(tpu, cpu)


@pytest.mark.usefixtures("eager_mode")
@pytest.mark.parametrize("op", [
    torch.relu, torch.exp, lambda x: x + 1, lambda x: x * x, lambda x: F.normalize(x, dim=1),
    lambda x: torch.where(x > 3, x, 0.0),
], ids=["relu", "exp", "add", "mul", "normalize", "where"])
def test_a_one_channel_slice_of_a_channels_last_tensor_gives_channels_last_results(op):
    # Its channel stride (1) is the smallest: CPU's iterator puts that dimension innermost,
    # though c10's contiguity check skips size-1 dimensions.
    def one_channel(device):
        big = torch.arange(200.0, device=device).reshape(2, 4, 5, 5)
        return big.contiguous(memory_format=torch.channels_last)[:, :1]

    cpu, tpu = op(one_channel("cpu")), op(one_channel("tpu"))
    assert tpu.stride() == cpu.stride() == (25, 1, 5, 1)
    assert_same(tpu, cpu)


@pytest.mark.parametrize("op", [
    lambda x: torch.pow(2.0, x), lambda x: torch.ldexp(torch.tensor(2.0, device=x.device), x),
    lambda x: F.rrelu(x), lambda x: x.masked_fill(x > 0, 2.0),
], ids=["pow", "ldexp", "rrelu", "masked_fill"])
def test_pow_of_a_number_and_rrelu_are_contiguous_as_cpus(op):
    # CPU's pow(Scalar, Tensor) allocates its result before it runs the iterator (ldexp is
    # self * pow(2, other)); rrelu's kernel allocates it contiguous, masked_fill fills a
    # contiguous clone.
    for x in (torch.randn(4, 3, 5, 2).permute(2, 0, 1, 3),
              torch.randn(5, 4, 3, 2).contiguous(memory_format=torch.channels_last)):
        cpu, tpu = op(x), op(x.to("tpu"))
        assert tpu.stride() == cpu.stride() == (24, 6, 2, 1)
        assert_same(tpu, cpu)


@pytest.mark.usefixtures("eager_mode")
@pytest.mark.parametrize("op", [
    torch.linalg.inv, torch.linalg.cholesky, lambda a: torch.linalg.lu_factor(a)[0],
    lambda a: torch.linalg.qr(a)[0], lambda a: torch.linalg.eigh(a)[1],
    lambda a: torch.linalg.solve(a, torch.ones_like(a[:, :3])),
    lambda a: torch.linalg.solve_triangular(a.triu(), torch.ones_like(a[:, :3]), upper=True),
    lambda a: torch.linalg.eig(a)[1], lambda a: torch.linalg.svd(a)[2],
    lambda a: torch.geqrf(a)[0],
], ids=["inv", "cholesky", "lu_factor", "qr", "eigh", "solve", "solve_triangular", "eig",
        "svd_vh", "geqrf"])
def test_factorizations_are_column_major_as_lapacks(op):
    # CPU's results are LAPACK's column-major matrices: `.view(-1)` of one fails, `.mT` of
    # one is contiguous, whatever the input's layout.
    a = torch.randn(5, 5, dtype=torch.float64)
    a = a @ a.T + 5 * torch.eye(5, dtype=torch.float64)
    cpu, tpu = op(a), op(a.to("tpu"))
    assert cpu.stride() == (1, 5)
    assert tpu.stride() == cpu.stride()
    torch.testing.assert_close(tpu.cpu().abs(), cpu.abs())  # (eigenvectors up to sign)


@pytest.mark.usefixtures("eager_mode")
@pytest.mark.parametrize("conv, kwargs, dtype, batch", [
    (F.conv3d, {}, torch.float64, 2),  # slow_conv3d
    (F.conv3d, {}, torch.float32, 1),  # "native is faster" for one small image
    (F.conv3d, {}, torch.float32, 2),  # oneDNN
    (F.conv3d, {"dilation": 2}, torch.float64, 2),  # slow_conv_dilated3d
    (F.conv_transpose3d, {"stride": 2, "output_padding": 1}, torch.float32, 2),  # oneDNN
    (F.conv_transpose3d, {"stride": 2, "output_padding": 2, "dilation": 3}, torch.float32, 2),
    (F.conv2d, {}, torch.float64, 2),  # the 2-d slow kernels keep channels_last
    (F.conv_transpose2d, {"stride": 2, "output_padding": 2, "dilation": 3}, torch.float32, 2),
], ids=["conv3d_f64", "conv3d_one_image", "conv3d_mkldnn", "dilated3d", "transpose3d_mkldnn",
        "transpose3d_big_output_padding", "conv2d_f64", "transpose2d_big_output_padding"])
def test_a_channels_last_convolution_takes_the_layout_of_cpus_kernel(conv, kwargs, dtype, batch):
    # oneDNN and the 2-d slow kernels give channels_last; the 3-d slow kernels (which CPU
    # takes outside oneDNN's cases, or for an output padding of at least the stride) do not.
    nd = 3 if conv in (F.conv3d, F.conv_transpose3d) else 2
    fmt = torch.channels_last_3d if nd == 3 else torch.channels_last
    x = torch.randn(batch, 4, *[6] * nd, dtype=dtype).to(memory_format=fmt)
    w = torch.randn(4, 4, *[3] * nd, dtype=dtype)
    cpu, tpu = conv(x, w, **kwargs), conv(x.to("tpu"), w.to("tpu"), **kwargs)
    assert tpu.stride() == cpu.stride()
    assert_same(tpu, cpu, rtol=1e-5, atol=1e-5)


def test_dropout_follows_a_transposed_inputs_order():
    # CPU's dropout is its input times an empty_like mask; cuda's fused kernel (the one a
    # tpu tensor takes) lays its result and mask out as the input too.
    x = torch.rand(2, 3, 5, 4) + 1
    cpu = torch.native_dropout(x.transpose(2, 3), 0.3, True)
    out, mask = torch.native_dropout(x.to("tpu").transpose(2, 3), 0.3, True)
    assert out.stride() == mask.stride() == cpu[0].stride() == (60, 20, 1, 4)
    kept = mask.cpu()
    torch.testing.assert_close(out.cpu()[kept], x.transpose(2, 3)[kept] / 0.7)


@pytest.mark.parametrize("shape, weight", [
    ((0, 4, 8, 8), (4, 4, 3, 3)), ((0, 4, 5, 5, 5), (4, 4, 3, 3, 3)), ((2, 0, 5, 5), (3, 0, 3, 3))],
    ids=["empty_batch_2d", "empty_batch_3d", "no_channels"])
def test_convolution_of_an_empty_channels_last_input_is_contiguous(shape, weight):
    # CPU's _convolution answers an empty batch (or no channels) with a view, not a backend
    fmt = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
    x, w = torch.randn(shape).to(memory_format=fmt), torch.randn(weight)
    cpu = F.conv2d(x, w) if len(shape) == 4 else F.conv3d(x, w)
    x, w = x.to("tpu"), w.to("tpu")
    tpu = F.conv2d(x, w) if len(shape) == 4 else F.conv3d(x, w)
    assert tpu.stride() == cpu.stride() and tpu.shape == cpu.shape


@pytest.mark.parametrize("op", [
    lambda x: torch.fft.fft(x, dim=0), lambda x: torch.fft.rfft(x, dim=1),
    lambda x: torch.fft.ihfft(x, dim=0), lambda x: torch.fft.irfft(x, dim=1),
    lambda x: torch.fft.fftn(x, dim=(0, 2)), lambda x: torch.fft.rfft2(x, dim=(-1, 0)),
    lambda x: torch.fft.irfftn(x, dim=(1, 0)), lambda x: torch.fft.hfft2(x, dim=(1, 2)),
    lambda x: torch.fft.ihfftn(x[0]), lambda x: torch.fft.fftn(x.mT, dim=(0, 1)),
    lambda x: torch.fft.fftn(x, dim=()),
], ids=["fft", "rfft", "ihfft", "irfft", "fftn", "rfft2", "irfftn", "hfft2", "ihfftn",
        "fftn_transposed", "fftn_no_dims"])
def test_ffts_are_laid_out_as_mkls(op):
    # CPU's (MKL's) FFTs put the batch dimensions outermost and the transformed ones innermost,
    # in the order they ran: fft(x, dim=0) of a contiguous x is not contiguous.
    x = torch.randn(4, 5, 6, 7)
    cpu, tpu = op(x), op(x.to("tpu"))
    assert tpu.stride() == cpu.stride()
    assert_same(tpu, cpu, rtol=1e-4, atol=1e-4)


def test_fft_batch_dimensions_of_equal_strides_are_in_mkls_order():
    # CPU partitions the batch dimensions out with std::partition, which is not stable: of
    # two size-1 dimensions of one stride the later one ends up outer
    x = torch.randn(3, 4, 1, dtype=torch.complex64)
    x = x.as_strided(x.shape, (4, 1, 1))
    cpu, tpu = torch.fft.fft(x, dim=0), torch.fft.fft(x.to("tpu"), dim=0)
    assert tpu.stride() == cpu.stride() == (1, 3, 12)
    assert_same(tpu, cpu, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", [
    torch.clone, lambda x: x.to(torch.complex64), torch.empty_like, torch.zeros_like,
], ids=["clone", "to", "empty_like", "zeros_like"])
def test_copies_of_a_dense_layout_keep_the_strides_of_its_size_one_dims(op):
    # empty_like's preserve_format copies a non-overlapping, dense input's strides as they are,
    # a size-1 dimension's too (the meta kernels' empty_like recomputes that one)
    x = torch.randn(3, 1, 4).mT
    assert x.stride() == (4, 1, 4)
    cpu, tpu = op(x), op(x.to("tpu"))
    assert tpu.stride() == cpu.stride() == x.stride()


_ODD_SIZE_ONE_STRIDES = [((1, 3, 4), (4, 4, 1)), ((3, 1, 4), (4, 100, 1)),
                         ((2, 1, 1, 4), (4, 1, 8, 1)), ((1, 3, 2, 2), (1, 1, 6, 3))]


@pytest.mark.usefixtures("eager_mode")
@pytest.mark.parametrize("layout", _ODD_SIZE_ONE_STRIDES, ids=str)
@pytest.mark.parametrize("op", [
    lambda x: x + 1, lambda x: x > 0, lambda x: torch.where(x > 0, x, 0.0),
    lambda x: F.normalize(x, dim=-1), lambda x: x * torch.tensor(2.0, device=x.device),
    lambda x: torch.xlogy(x, 2), F.hardtanh, torch.nan_to_num, lambda x: torch.frexp(x)[0],
    torch.exp, lambda x: x * x, lambda x: x ** 2, lambda x: torch.lerp(x, x, 0.5), F.hardshrink,
    lambda x: F.conv2d(x, torch.ones(2, x.shape[1], 1, 1, device=x.device)) if x.dim() == 4 else x,
], ids=["add_number", "gt_number", "where", "normalize", "mul_0dim", "xlogy", "hardtanh",
        "nan_to_num", "frexp", "exp", "mul", "pow", "lerp", "hardshrink", "conv"])
def test_size_one_strides_order_a_result_as_cpus_iterator_orders_it(op, layout):
    # c10 calls these tensors contiguous (or channels_last), but CPU's iterator sorts
    # dimensions by every stride unless its fast path runs (operands of one shape and layout,
    # no number made a 0-dim operand), and empty_like (hardtanh, nan_to_num, ...) keeps them.
    def odd(device):
        shape, stride = layout
        return torch.empty_strided(shape, stride, device=device).copy_(
            torch.arange(1.0, 1 + torch.Size(shape).numel()).reshape(shape) / 7)

    cpu, tpu = op(odd("cpu")), op(odd("tpu"))
    assert tpu.stride() == cpu.stride()
    assert_same(tpu, cpu)


@pytest.mark.usefixtures("eager_mode")
@pytest.mark.parametrize("pad", [torch.nn.ReflectionPad2d, torch.nn.ReplicationPad2d,
                                 torch.nn.ReflectionPad3d, torch.nn.ReplicationPad3d])
@pytest.mark.parametrize("sliced", [False, True])
def test_padding_a_channels_last_input_keeps_its_layout_and_its_gradients(pad, sliced):
    # CPU's padding kernels lay the result (and the gradient, a zeros_like of the input) out
    # in the input's suggest_memory_format; the meta kernels' are contiguous.
    nd = 2 if "2d" in pad.__name__ else 3
    shape = (2, 6, 4, 5, 3)[:nd + 2]
    fmt = torch.channels_last if nd == 2 else torch.channels_last_3d

    def run(device):
        x = torch.arange(float(math.prod(shape))).reshape(shape).to(memory_format=fmt)
        x = (x.to(device)[:, ::2] if sliced else x.to(device)).requires_grad_()
        out = pad(1)(x)
        grad = torch.linspace(-1, 1, out.numel()).reshape(out.shape)
        out.backward(grad.to(device))
        return out, x.grad

    cpu, tpu = run("cpu"), run("tpu")
    assert [t.stride() for t in tpu] == [t.stride() for t in cpu]
    for t, c in zip(tpu, cpu, strict=True):
        assert_same(t, c)


@pytest.mark.usefixtures("eager_mode")
@pytest.mark.parametrize("shapes", [((5, 3), (5, 2)), ((2, 6, 3), (2, 6, 4)), ((3, 5), (3, 2))],
                         ids=["tall", "batched_tall", "wide"])
def test_lstsq_solution_is_narrowed_from_lapacks_buffer(shapes):
    # CPU solves in a column-major buffer of max(m, n) rows and returns its first n rows:
    # strides with a gap for a tall matrix (not dense: `.view(-1)` of it fails)
    a, b = (torch.linspace(-1, 2, math.prod(s), dtype=torch.float64).reshape(s) ** 2
            + torch.eye(*s[-2:], dtype=torch.float64) for s in shapes)
    cpu = torch.linalg.lstsq(a, b).solution
    tpu = torch.linalg.lstsq(a.to("tpu"), b.to("tpu")).solution
    assert tpu.stride() == cpu.stride()
    assert tpu.is_contiguous() == cpu.is_contiguous()
    torch.testing.assert_close(tpu.cpu(), cpu)


# Contiguous and channels_last-contiguous at once (size-1 dims), or channels_last with a
# batch stride of 1: what c10's rule calls channels_last differs from the meta kernels'.
_DOUBLY_CONTIGUOUS = [((2, 1, 4, 4), (16, 1, 4, 1)), ((2, 1, 3, 1), (3, 1, 1, 1)),
                      ((1, 3, 4, 4), (1, 1, 12, 3)), ((1, 3, 4, 4), (48, 1, 12, 3)),
                      ((2, 1, 4, 4, 2), (32, 1, 8, 2, 1))]


@pytest.mark.usefixtures("eager_mode")
@pytest.mark.parametrize("layout", _DOUBLY_CONTIGUOUS, ids=str)
@pytest.mark.parametrize("op", [
    lambda x: F.batch_norm(x, None, None, training=True),
    lambda x: F.batch_norm(x, torch.zeros(x.shape[1], device=x.device),
                           torch.ones(x.shape[1], device=x.device)),
    lambda x: F.group_norm(x, 1),
    lambda x: F.interpolate(x, scale_factor=2),
    lambda x: F.interpolate(x, scale_factor=2, mode="bilinear" if x.dim() == 4 else "trilinear"),
    lambda x: F.interpolate(x, scale_factor=2, mode="bicubic") if x.dim() == 4 else x,
], ids=["batch_norm", "batch_norm_eval", "group_norm", "nearest", "linear", "bicubic"])
def test_norms_and_upsampling_of_doubly_contiguous_inputs_take_cpus_layout(op, layout):
    # CPU's kernels allocate in suggest_memory_format's canonical strides (batch norm's
    # forward: contiguous first); batch norm's gradient in the input's suggested format
    def run(device, stride):
        shape = layout[0]
        x = torch.empty_strided(shape, stride, device=device).copy_(
            torch.linspace(-2, 3, math.prod(shape)).reshape(shape)).requires_grad_()
        out = op(x)
        (grad,) = torch.autograd.grad(out, x, torch.linspace(-1, 1, out.numel())
                                      .reshape(out.shape).to(device))
        return out, grad

    cpu, tpu = run("cpu", layout[1]), run("tpu", layout[1])
    assert [t.stride() for t in tpu] == [t.stride() for t in cpu]
    # CPU's eval batch norm backward misreads a gradient of another format than an input of
    # these strides; its values on a contiguous input are the reference
    for t, c in zip(tpu, run("cpu", torch.empty(layout[0]).stride()), strict=True):
        assert_same(t, c, rtol=1e-4, atol=1e-4)


@pytest.mark.usefixtures("eager_mode")
@pytest.mark.parametrize("shape", [(2, 6, 4, 5), (2, 6, 3, 4, 5)], ids=["2d", "3d"])
def test_group_norm_gradient_of_a_channels_last_input_is_channels_last(shape):
    # PyTorch's formula keeps the input's format on CPU only; elsewhere the backward kernel
    # sees contiguous copies (its differentiable form, under create_graph, follows the input)
    layout = torch.channels_last if len(shape) == 4 else torch.channels_last_3d

    def run(device, dtype=torch.float32):
        x = torch.linspace(-2, 3, math.prod(shape), dtype=dtype).reshape(shape)
        x = x.to(device, memory_format=layout).requires_grad_()
        w, b = (torch.linspace(lo, 1.5, shape[1], dtype=dtype).to(device).requires_grad_()
                for lo in (0.5, -1))
        loss = (F.group_norm(x, 3, w, b) ** 2).sum()
        (plain,) = torch.autograd.grad(loss, x, retain_graph=True)
        gx, gw = torch.autograd.grad(loss, (x, w), create_graph=True)
        return plain, gx, *torch.autograd.grad(gx.sum() + gw.sum(), (x, w, b))

    cpu, tpu = run("cpu"), run("tpu")
    assert [t.stride() for t in tpu] == [t.stride() for t in cpu]
    # (CPU's own float32 second derivatives are 3-10x further from float64's than these)
    for t, exact in zip(tpu, run("cpu", torch.float64), strict=True):
        torch.testing.assert_close(t.cpu().double(), exact.detach(), rtol=1e-4,
                                   atol=1e-4 * exact.abs().max().item())


@pytest.mark.parametrize("layouts", [("channels_last", "contiguous"), ("channels_last",) * 2,
                                     ("transposed", "channels_last")])
def test_log_softmax_backward_is_contiguous_as_cpus(layouts):
    # CPU's _log_softmax_backward_data allocates its result contiguous whatever the
    # gradient's layout (cross_entropy with probability targets gives it a channels_last
    # one); the meta kernel's follows it.
    lay = {"contiguous": lambda t: t,
           "channels_last": lambda t: t.to(memory_format=torch.channels_last),
           "transposed": lambda t: t.transpose(0, 3).contiguous().transpose(0, 3)}
    grad, out = torch.randn(5, 3, 4, 2), torch.randn(5, 3, 4, 2).log_softmax(1)

    def run(device):
        return torch.ops.aten._log_softmax_backward_data(
            lay[layouts[0]](grad.to(device)), lay[layouts[1]](out.to(device)), 1, torch.float32)

    cpu, tpu = run("cpu"), run("tpu")
    assert tpu.stride() == cpu.stride() == (24, 8, 2, 1)
    assert_same(tpu, cpu)


_LAYOUTS = {"contiguous": lambda t: t,
            "channels_last": lambda t: t.contiguous(memory_format=torch.channels_last),
            "transposed": lambda t: t.transpose(0, 3).contiguous().transpose(0, 3)}




@pytest.mark.usefixtures("eager_mode")
@pytest.mark.parametrize("loss", [F.mse_loss, F.smooth_l1_loss, F.huber_loss])
@pytest.mark.parametrize("layout", ["channels_last", "transposed"])
@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_pointwise_loss_gradients_are_contiguous_as_cpus(loss, layout, reduction):
    # CPU's mse/smooth_l1/huber backward write into a zeros_like(input) allocated contiguous
    # (LEGACY_CONTIGUOUS_MEMORY_FORMAT); the meta kernels follow the input.
    x, t = torch.randn(2, 3, 4, 5), torch.randn(2, 3, 4, 5)

    def run(device):
        xx = _LAYOUTS[layout](x.to(device)).requires_grad_()
        out = loss(xx, _LAYOUTS[layout](t.to(device)), reduction=reduction)
        return torch.autograd.grad(out, xx, torch.ones_like(out))[0]

    cpu, tpu = run("cpu"), run("tpu")
    assert tpu.stride() == cpu.stride() == (60, 20, 5, 1)
    assert_same(tpu, cpu)


@pytest.mark.usefixtures("eager_mode")
@pytest.mark.parametrize("layouts", [("channels_last", "contiguous"),
                                     ("contiguous", "channels_last"),
                                     ("transposed", "channels_last")])
def test_binary_cross_entropy_and_its_gradient_are_laid_out_as_its_input(layouts):
    # CPU's kernels write into an empty_like(input) (the loss unreduced, and the gradient).
    x, t = torch.rand(2, 3, 4, 5) * 0.8 + 0.1, torch.rand(2, 3, 4, 5)

    def run(device):
        xx = _LAYOUTS[layouts[0]](x.to(device)).requires_grad_()
        out = F.binary_cross_entropy(xx, _LAYOUTS[layouts[1]](t.to(device)), reduction="none")
        return out, torch.autograd.grad(out, xx, torch.linspace(0, 1, 120).reshape(x.shape)
                                        .to(device))[0]

    cpu, tpu = run("cpu"), run("tpu")
    assert [r.stride() for r in tpu] == [r.stride() for r in cpu]
    for a, b in zip(tpu, cpu, strict=True):
        assert_same(a, b)


@pytest.mark.usefixtures("eager_mode")
@pytest.mark.parametrize("op", [
    F.logsigmoid, lambda x: F.binary_cross_entropy_with_logits(x, x.flip(1), reduction="none"),
], ids=["logsigmoid", "bce_with_logits"])
@pytest.mark.parametrize("layout", ["channels_last", "transposed"])
def test_log_sigmoid_of_a_permuted_input_is_laid_out_as_cpus(op, layout):
    # CPU's log_sigmoid kernel allocates its result contiguous; its decomposition here
    # followed the input (and returns a namedtuple, which the layout pass failed to rebuild:
    # bce_with_logits of a channels_last input raised a TypeError).
    x = _LAYOUTS[layout](torch.randn(2, 3, 4, 5))

    def run(device):
        xx = x.to(device).requires_grad_()
        out = op(xx)
        return out, torch.autograd.grad(out, xx, torch.ones_like(out))[0]

    cpu, tpu = run("cpu"), run("tpu")
    assert [r.stride() for r in tpu] == [r.stride() for r in cpu]
    for a, b in zip(tpu, cpu, strict=True):
        assert_same(a, b)


@pytest.mark.parametrize("other", [(1, 20, 1), (1, 7, 1), (7, 1, 1)])
def test_equal_of_permuted_operands_of_other_shapes_is_false_as_on_cpu(other):
    """equal is tagged pointwise but returns a bool: gpytorch's covar_dist compares
    ``x.mT.unsqueeze(-1)`` views of train and test inputs (odd unit strides), which once
    went through the pointwise layout and failed to broadcast 7 against 20."""
    for device in ("cpu", "tpu"):
        a = torch.arange(7.0, device=device).view(7, 1).mT.unsqueeze(-1)
        b = torch.arange(float(math.prod(other)), device=device).view(other)
        assert torch.equal(a, b) is (other == (1, 7, 1))
        assert torch.equal(a, a.contiguous()) is True


@pytest.mark.usefixtures("eager_mode")
@pytest.mark.parametrize("shape", [(2, 3, 5, 4), (1, 5, 4)], ids=["batched", "unbatched"])
def test_unfold_result_is_contiguous_as_cpus(shape):
    # im2col's kernel writes a fresh tensor; its decomposition reshapes a permuted gather
    x = torch.randn(shape)

    def run(device):
        return F.unfold(x.to(device), (1, 3), (2, 1), 0, (1, 2))

    out, expected = run("tpu"), run("cpu")
    assert out.stride() == expected.stride()
    torch.testing.assert_close(out.cpu(), expected)


@pytest.mark.usefixtures("eager_mode")
@pytest.mark.parametrize("pads", [[0, -1], [0, 0], [-1, -1, 0, 0], [0, 1, 0, 0]], ids=str)
def test_constant_pad_of_a_transposed_input_is_laid_out_as_cpus(pads):
    # CPU clones the input (its order) when no pad is positive, else writes a fresh tensor
    x = torch.randn(3, 2)

    def run(device):
        return F.pad(x.to(device).t(), pads, value=1.5)

    out, expected = run("tpu"), run("cpu")
    assert out.stride() == expected.stride()
    torch.testing.assert_close(out.cpu(), expected)


@pytest.mark.usefixtures("eager_mode")
@pytest.mark.parametrize("shape", [(2, 3, 4, 4), (2, 3, 1, 1)], ids=["4x4", "1x1"])
def test_max_unpool2d_of_a_channels_last_input_is_channels_last_as_cpus(shape):
    # CPU's kernel allocates its result in the input's suggested format; the meta kernel's
    # result is contiguous
    x = torch.randn(shape).contiguous(memory_format=torch.channels_last)

    def run(device):
        values, indices = F.max_pool2d(x.to(device), 1, return_indices=True)
        return F.max_unpool2d(values, indices, 2)

    out, expected = run("tpu"), run("cpu")
    assert out.stride() == expected.stride()
    torch.testing.assert_close(out.cpu(), expected)


@pytest.mark.usefixtures("eager_mode")
@pytest.mark.parametrize("case", ["c1_input", "transposed_input", "transposed_weight"])
def test_conv1d_result_is_laid_out_as_cpus(case):
    # CPU makes a 1-d input contiguous (one whose only channel makes it so stays as it is),
    # views both operands with a height of 1, and gives a channels_last result where either
    # is channels_last then
    x = torch.randn(2, 6, 1 if case == "c1_input" else 3)
    w = torch.randn(4, 2, x.shape[2])

    def run(device):
        xx, ww = x.to(device).transpose(1, 2), w.to(device)
        return F.conv1d(xx, ww.transpose(1, 2) if case == "transposed_weight" else
                        ww.transpose(1, 2).contiguous())

    out, expected = run("tpu"), run("cpu")
    assert out.stride() == expected.stride()
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-4, atol=1e-4)
