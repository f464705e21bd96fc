"""Backward ATen ops called directly, on CPU and on tpu, over the arguments OpInfo samples
leave out: scale factors, align_corners, padding and interpolation modes, pooling options.

Called directly, not through autograd: an error inside a C++ backward formula would abort
the process, here it fails one test.
"""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F
from conftest import TPU, assert_same

import torchtpu

aten = torch.ops.aten
TOL = dict(rtol=1e-4, atol=1e-4)


def _randn(*shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def _both(op, *args, **kwargs):
    """``op`` on CPU and on tpu copies of the same arguments."""
    on_tpu = [a.to(TPU) if isinstance(a, torch.Tensor) else a for a in args]
    return op(*on_tpu, **kwargs), op(*args, **kwargs)


# (input size, output size, scale factor given by the caller or None)
SIZES = [(4, 7, None), (5, 3, None), (3, 8, 2.7), (6, 6, None), (6, 6, 1.5), (4, 8, 2.1),
         (4, 1, None), (1, 3, None), (7, 3, 0.45)]

UPSAMPLE = {
    "linear1d": (aten.upsample_linear1d_backward, 1, True),
    "bilinear2d": (aten.upsample_bilinear2d_backward, 2, True),
    "trilinear3d": (aten.upsample_trilinear3d_backward, 3, True),
    "bicubic2d": (aten.upsample_bicubic2d_backward, 2, True),
    "nearest1d": (aten.upsample_nearest1d_backward, 1, False),
    "nearest2d": (aten.upsample_nearest2d_backward, 2, False),
    "nearest3d": (aten.upsample_nearest3d_backward, 3, False),
    "nearest_exact1d": (aten._upsample_nearest_exact1d_backward, 1, False),
    "nearest_exact2d": (aten._upsample_nearest_exact2d_backward, 2, False),
    "nearest_exact3d": (aten._upsample_nearest_exact3d_backward, 3, False),
}


@pytest.mark.parametrize("size", SIZES, ids=str)
@pytest.mark.parametrize("name", list(UPSAMPLE))
def test_upsample_backward(name, size):
    op, nd, has_align = UPSAMPLE[name]
    n_in, n_out, scale = size
    # Axes differ: the last one takes the size under test, the others a fixed pair.
    ins = [3, 2][: nd - 1] + [n_in]
    outs = [5, 4][: nd - 1] + [n_out]
    scales = [None] * (nd - 1) + [scale] if scale is not None else [None] * nd
    if scale is not None:  # all or none, as F.interpolate passes them
        scales = [o / i for i, o in zip(ins[:-1], outs[:-1], strict=True)] + [scale]
    grad = _randn(2, 3, *outs)
    for align in ((False, True) if has_align else (None,)):
        flag = () if align is None else (align,)
        actual, expected = _both(op, grad, outs, [2, 3, *ins], *flag, *scales)
        assert_same(actual, expected, **TOL)


@pytest.mark.parametrize("name", ["linear1d", "bilinear2d", "trilinear3d", "bicubic2d"])
def test_upsample_backward_in_float64(name):
    # CPU computes double's weights in double: float32 weights were off by ~1e-7 relative.
    op, nd, _ = UPSAMPLE[name]
    ins, outs = [5, 6, 7][-nd:], [7, 9, 10][-nd:]
    grad = _randn(2, 3, *outs).double()
    for align in (False, True):
        actual, expected = _both(op, grad, outs, [2, 3, *ins], align, *[None] * nd)
        assert_same(actual, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", ["linear", "bilinear", "bicubic", "trilinear"])
def test_linear_and_cubic_source_positions_round_once_as_cpus(mode):
    # 345 -> 270 rows: CPU's kernel fuses scale * (row + 0.5) - 0.5 into one multiply-add,
    # so row 200 sits at 255.694443, not 255.694458 (two roundings). Neighbours 2000 apart
    # turn that into a difference of 0.03 (the backward's weights: 1.5e-5).
    nd = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}[mode]
    sign = torch.tensor([(-1.0) ** i for i in range(345)])
    x = (1000 * sign).reshape(1, 1, *[1] * (nd - 1), 345).expand(1, 2, *[2] * (nd - 1), 345)
    x = x.contiguous().requires_grad_()
    size = [2] * (nd - 1) + [270]

    def run(t):
        out = F.interpolate(t, size=size, mode=mode, align_corners=False)
        (grad,) = torch.autograd.grad(out.sum(), t)  # the weights each input row gets
        return out, grad

    xt = x.detach().to(TPU).requires_grad_()
    (out, grad), (cpu_out, cpu_grad) = run(xt), run(x)
    assert_same(out, cpu_out, rtol=0, atol=1e-3)
    assert_same(grad, cpu_grad, rtol=0, atol=5e-6)


@pytest.mark.parametrize("size", SIZES, ids=str)
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_upsample_nearest_forward(nd, size):
    # The forward rule shares its index arithmetic with the backward above.
    op = (aten.upsample_nearest1d, aten.upsample_nearest2d, aten.upsample_nearest3d)[nd - 1]
    n_in, n_out, scale = size
    x = _randn(2, 3, *([3] * (nd - 1)), n_in)
    scales = [None] * nd if scale is None else [1.0] * (nd - 1) + [scale]
    actual, expected = _both(op, x, [3] * (nd - 1) + [n_out], *scales)
    assert_same(actual, expected)


POOL = [
    # kernel, stride, padding, ceil_mode, count_include_pad, divisor_override
    ((3, 3), (2, 2), (1, 1), False, True, None),
    ((3, 3), (2, 2), (1, 1), True, True, None),
    ((3, 2), (2, 1), (1, 0), True, False, None),
    ((2, 2), (3, 3), (0, 0), True, False, None),
    ((3, 3), (2, 2), (1, 1), False, False, 5),
    ((2, 3), (1, 2), (1, 1), True, True, 2),
]


@pytest.mark.parametrize("cfg", POOL, ids=str)
@pytest.mark.parametrize("nd", [2, 3])
def test_avg_pool_backward(nd, cfg):
    kernel, stride, padding, ceil_mode, count_include_pad, divisor = cfg
    if nd == 3:
        kernel, stride, padding = (2,) + kernel, (1,) + stride, (1,) + padding
    forward = aten.avg_pool2d if nd == 2 else aten.avg_pool3d
    backward = aten.avg_pool2d_backward if nd == 2 else aten.avg_pool3d_backward
    x = _randn(2, 3, *([7] * nd))
    args = (kernel, stride, padding, ceil_mode, count_include_pad, divisor)
    grad = _randn(*forward(x, *args).shape, seed=1)
    actual, expected = _both(backward, grad, x, *args)
    assert_same(actual, expected, **TOL)


# One window per dimension, far wider than the input: global pooling as EfficientNet writes it
# (avg_pool2d(x, 2560, ceil_mode=True) on a 1x1 map), and windows overhanging into padding.
ONE_WINDOW = [((1, 1), 2560, 0, True), ((3, 3), 7, 3, True), ((3, 5), (4, 6), (2, 3), False),
              ((5, 2), (6, 1), (3, 0), True)]


@pytest.mark.parametrize("cfg", ONE_WINDOW, ids=str)
def test_pool_one_wide_window(cfg):
    size, kernel, padding, ceil_mode = cfg
    x = _randn(2, 3, *size)
    for count_include_pad in (True, False):
        args = (kernel, None, padding, ceil_mode, count_include_pad)
        actual, expected = _both(torch.nn.functional.avg_pool2d, x, *args)
        assert_same(actual, expected, **TOL)
        grad = _randn(*expected.shape, seed=1)
        a = (kernel, [], padding if isinstance(padding, tuple) else (padding,), ceil_mode,
             count_include_pad, None)
        actual, expected = _both(aten.avg_pool2d_backward, grad, x, *a)
        assert_same(actual, expected, **TOL)
    if 2 * max(padding if isinstance(padding, tuple) else (padding,)) <= min(
            kernel if isinstance(kernel, tuple) else (kernel,)):
        actual, expected = _both(torch.nn.functional.max_pool2d, x, kernel, None, padding,
                                 ceil_mode=ceil_mode, return_indices=True)
        assert_same(actual[0], expected[0])
        assert_same(actual[1], expected[1])


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding_mode", [0, 1, 2], ids=["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", [0, 1, 2], ids=["bilinear", "nearest", "bicubic"])
def test_grid_sampler_2d_backward(mode, padding_mode, align_corners):
    x = _randn(2, 3, 5, 6)
    # Beyond [-1, 1], so that every padding mode has coordinates to move.
    grid = _randn(2, 4, 7, 2, seed=1) * 0.9
    grad = _randn(2, 3, 4, 7, seed=2)
    # Without input's gradient (a grid that is learned, an input that is not).
    masks = ([True, True], [False, True]) if mode == 0 else ([True, True],)
    for mask in masks:
        args = (grad, x, grid, mode, padding_mode, align_corners, mask)
        actual, expected = _both(aten.grid_sampler_2d_backward, *args)
        assert_same(actual, expected, **TOL)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding_mode", [0, 1, 2], ids=["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", [0, 1], ids=["trilinear", "nearest"])
def test_grid_sampler_3d(mode, padding_mode, align_corners):
    x = _randn(2, 3, 4, 5, 3)
    grid = _randn(2, 3, 2, 4, 3, seed=1) * 0.9
    actual, expected = _both(aten.grid_sampler_3d, x, grid, mode, padding_mode, align_corners)
    assert_same(actual, expected, **TOL)
    grad = _randn(2, 3, 3, 2, 4, seed=2)
    args = (grad, x, grid, mode, padding_mode, align_corners, [True, True])
    actual, expected = _both(aten.grid_sampler_3d_backward, *args)
    assert_same(actual, expected, **TOL)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_grid_sampler_3d_skips_corners_outside_as_cpu(dtype):
    # An infinite coordinate (a degenerate affine transform) samples nothing: CPU's 3-d kernel
    # adds only the corners inside the input, so the output is 0 there, not NaN (inf - inf
    # weights), and the input's gradient stays finite.
    x = _randn(1, 2, 3, 3, 3).to(dtype)
    grid = (_randn(1, 2, 3, 2, 3, seed=1) * 0.9).to(dtype)
    grid[0, 1, 1, 1, 0] = float("inf")
    grid[0, 0, 2, 0, 2] = float("-inf")
    actual, expected = _both(aten.grid_sampler_3d, x, grid, 0, 0, False)
    assert_same(actual, expected, **TOL)
    grad = _randn(1, 2, 2, 3, 2, seed=2).to(dtype)
    args = (grad, x, grid, 0, 0, False, [True, False])
    actual, expected = _both(aten.grid_sampler_3d_backward, *args)
    assert_same(actual[0], expected[0], **TOL)


@pytest.mark.parametrize("p,weighted,reduction", list(itertools.product([1, 2], [False, True],
                                                                         [0, 1, 2])))
def test_multi_margin_loss(p, weighted, reduction):
    x = _randn(4, 5)
    target = torch.tensor([0, 3, 4, 3])
    weight = _randn(5, seed=1).abs() if weighted else None
    _check_multi_margin(x, target, p, weight, reduction)
    # One sample: a vector input, a scalar target.
    _check_multi_margin(x[1], target[1], p, weight, reduction)


def _check_multi_margin(x, target, p, weight, reduction):
    out, expected = _both(aten.multi_margin_loss, x, target, p, 0.7, weight, reduction)
    assert_same(out, expected, **TOL)
    grad = _randn(*expected.shape, seed=2)
    actual, expected = _both(aten.multi_margin_loss_backward, grad, x, target, p, 0.7, weight,
                             reduction)
    assert_same(actual, expected, **TOL)


@pytest.mark.parametrize("reduction", [0, 1, 2])
@pytest.mark.parametrize("shape", ["2d", "1d", "0d"])
def test_multilabel_margin_loss(shape, reduction):
    x = _randn(3, 5)
    # Targets end at the first -1; a repeated index counts twice; a row may have none.
    target = torch.tensor([[3, 0, -1, 1, 2], [1, 1, 4, 2, 0], [-1, 2, 0, 0, 0]])
    if shape == "1d":
        x, target = x[0], target[0]
    elif shape == "0d":
        x, target = x[0, 0], target[0, 1]
    out, expected = _both(aten.multilabel_margin_loss_forward, x, target, reduction)
    assert_same(out, expected, **TOL)
    grad = _randn(*expected[0].shape, seed=2)
    actual, expected = _both(aten.multilabel_margin_loss_backward, grad, x, target, reduction,
                             expected[1])
    assert_same(actual, expected, **TOL)


@pytest.mark.parametrize("shapes", [((2, 1, 3, 4), (5, 2, 4)), ((3, 4), (0, 2, 4)),
                                    ((0, 2, 4), (3, 4))], ids=str)
@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 2.0, 3.0, float("inf")])
def test_cdist_backward_broadcasts(p, shapes):
    x1, x2 = _randn(*shapes[0]), _randn(*shapes[1], seed=1)
    dist = torch.cdist(x1, x2, p)
    grad = _randn(*dist.shape, seed=2)
    actual, expected = _both(aten._cdist_backward, grad, x1, x2, p, dist)
    assert_same(actual, expected, **TOL)


@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, float("inf")])
def test_pdist_backward_zero_distance_and_ties(p):
    x = _randn(5, 4)
    x[3] = x[1]  # a zero distance: a zero gradient, not NaN
    x[4] = x[0] + torch.tensor([1.0, -1.0, 0.5, 0.0])  # inf-norm tie; one equal coordinate
    dist = torch.pdist(x, p)
    grad = _randn(*dist.shape, seed=2)
    actual, expected = _both(aten._pdist_backward, grad, x, p, dist)
    assert_same(actual, expected, **TOL)


@pytest.mark.parametrize("initial", [None, 2.0])
@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("by", ["lengths", "offsets"])
def test_segment_reduce_backward_ties_zeros_nans(by, reduce, initial):
    # Segments with ties, a NaN, one zero, two zeros, a zero with an infinity, and an empty one.
    nan, inf = float("nan"), float("inf")
    row = torch.tensor([1, 3, 3, 3, 2, nan, 0, 5, 0, 2, 0, 0, 3, 0, inf])
    lengths = torch.tensor([4, 0, 2, 2, 2, 3, 2])
    # Two rows (the second reversed, its segments too), segmented along axis 1, and an inner
    # dimension whose negated column turns maxima into minima.
    data = torch.stack([row, row.flip(0)])[..., None] * torch.tensor([1.0, -1.0, 0.5])
    lengths = torch.stack([lengths, lengths.flip(0)])
    if by == "offsets":
        kwargs = dict(offsets=torch.cat([torch.zeros(2, 1, dtype=torch.long),
                                         lengths.cumsum(1)], 1))
    else:
        kwargs = dict(lengths=lengths)
    output = aten.segment_reduce(data, reduce, axis=1, initial=initial, **kwargs)
    grad = _randn(*output.shape, seed=1)  # both signs: CPU splits only positive ones at ties
    kwargs = {k: v.to(TPU) for k, v in kwargs.items()}
    actual = aten._segment_reduce_backward(grad.to(TPU), output.to(TPU), data.to(TPU), reduce,
                                           axis=1, initial=initial, **kwargs)
    kwargs = {k: v.cpu() for k, v in kwargs.items()}
    expected = aten._segment_reduce_backward(grad, output, data, reduce, axis=1,
                                             initial=initial, **kwargs)
    assert_same(actual, expected, **TOL)


@pytest.mark.parametrize("as_tensors", [False, True])
@pytest.mark.parametrize("zero_infinity", [False, True])
@pytest.mark.parametrize("concatenated", [False, True])
def test_ctc_loss_backward(concatenated, zero_infinity, as_tensors):
    # Log-probabilities not normalised (CPU's exp(log_probs) term shows), inputs shorter than
    # the longest, an empty target, repeated labels, and a target too long for its input
    # (an infinite loss: NaN gradients, or zeros with zero_infinity).
    log_probs = _randn(7, 4, 5) - 1.5
    targets = torch.tensor([[1, 2, 2, 3], [4, 4, 4, 0], [1, 0, 0, 0], [2, 3, 1, 2]])
    input_lengths, target_lengths = [7, 6, 5, 3], [4, 3, 0, 4]
    if concatenated:
        targets = torch.cat([t[:n] for t, n in zip(targets, target_lengths, strict=True)])
    if as_tensors:
        input_lengths, target_lengths = torch.tensor(input_lengths), torch.tensor(target_lengths)
    nll, log_alpha = aten._ctc_loss(log_probs, targets, input_lengths, target_lengths, 0,
                                    zero_infinity)
    grad = _randn(4, seed=1)
    actual, expected = _both(aten._ctc_loss_backward, grad, log_probs, targets, input_lengths,
                             target_lengths, nll, log_alpha, 0, zero_infinity)
    assert_same(actual, expected, **TOL)


@pytest.mark.parametrize("unpack_data,unpack_pivots", [(True, False), (False, True),
                                                       (False, False)])
def test_lu_unpack_leaves_out_what_is_not_asked(unpack_data, unpack_pivots):
    lu, pivots = torch.linalg.lu_factor(_randn(2, 3, 3))
    actual, expected = _both(aten.lu_unpack, lu, pivots, unpack_data, unpack_pivots)
    assert_same(actual, expected, **TOL)


@pytest.mark.parametrize("accumulate", [False, True])
def test_put(accumulate):
    x = _randn(3, 4)
    # Negative positions count from the end; accumulating, a repeated one adds twice.
    index = torch.tensor([[0, -1], [5, 11 if accumulate else 7]])
    source = _randn(2, 2, seed=1)
    actual, expected = _both(aten.put, x, index, source, accumulate)
    assert_same(actual, expected)


@pytest.mark.parametrize("dim", [0, 1])
def test_weight_norm_interface_backward(dim):
    v, grad_w = _randn(3, 4), _randn(3, 4, seed=1)
    g = _randn(*(3, 1) if dim == 0 else (1, 4), seed=2)
    _, norms = torch._weight_norm_interface(v, g, dim)
    on_tpu, on_cpu = _both(aten._weight_norm_interface_backward, grad_w, v, g, norms, dim)
    for a, b in zip(on_tpu, on_cpu, strict=True):
        assert_same(a, b, **TOL)


def test_weight_norm_parametrization_trains_as_on_cpu():
    torch.manual_seed(0)
    m = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(4, 3))
    on_tpu = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(4, 3))
    on_tpu.load_state_dict(m.state_dict())
    on_tpu.to(TPU)
    x = _randn(2, 4)
    m(x).pow(2).sum().backward()
    on_tpu(x.to(TPU)).pow(2).sum().backward()
    for p, q in zip(m.parameters(), on_tpu.parameters(), strict=True):
        assert_same(q.grad, p.grad, **TOL)


def _resize_and_its_gradient_as_cpu(**resize):
    x = _randn(2, 3, 17, 23)
    on_tpu = x.to(TPU).requires_grad_()
    on_cpu = x.clone().requires_grad_()
    out_tpu = torch.nn.functional.interpolate(on_tpu, **resize)
    out_cpu = torch.nn.functional.interpolate(on_cpu, **resize)
    assert_same(out_tpu, out_cpu, **TOL)
    out_tpu.pow(2).sum().backward()
    out_cpu.pow(2).sum().backward()
    assert_same(on_tpu.grad, on_cpu.grad, **TOL)


@pytest.mark.parametrize("size", [(7, 9), (34, 46)])
@pytest.mark.parametrize("align_corners", [False, True])
def test_antialiased_bicubic_resize_and_its_gradient(size, align_corners):
    _resize_and_its_gradient_as_cpu(size=size, mode="bicubic", antialias=True,
                                    align_corners=align_corners)


@pytest.mark.parametrize("size", [(7, 30), (34, 11)])
def test_lanczos_resize_and_its_gradient(size):
    # interpolate(mode="lanczos") had no rule on tpu (CPU's is its only kernel)
    _resize_and_its_gradient_as_cpu(size=size, mode="lanczos", antialias=True)


@pytest.mark.parametrize("loss", ["mse_loss", "smooth_l1_loss", "huber_loss", "embedding"])
def test_backward_of_an_empty_input(loss):
    # PyTorch's decompositions divide by the numel of the input (mean reduction), and a
    # reshape(0, -1) has no size to infer: CPU returns the empty (or zero) gradient.
    def run(device):
        if loss == "embedding":
            w = torch.ones(5, 2, device=device, requires_grad=True)
            F.embedding(torch.zeros(0, dtype=torch.long, device=device), w).sum().backward()
            return w.grad
        x = torch.zeros(0, device=device, requires_grad=True)
        getattr(F, loss)(x, torch.zeros(0, device=device)).backward()
        return x.grad

    assert_same(run(TPU), run("cpu"))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_ctc_loss_of_one_unbatched_sample(reduction):
    # (T, C) log-probabilities, 1-D targets and 0-d lengths: ctc_loss adds the batch of one.
    logits = _randn(12, 5)
    targets = torch.tensor([1, 2, 2, 3])

    def run(device):
        x = logits.to(device).requires_grad_()
        loss = F.ctc_loss(x.log_softmax(1), targets.to(device), torch.tensor(12, device=device),
                          torch.tensor(4, device=device), reduction=reduction)
        loss.sum().backward()
        return loss, x.grad

    assert_same(run(TPU), run("cpu"), **TOL)


@pytest.mark.parametrize("as_tensors", [False, True])
def test_ctc_loss_backward_when_every_target_is_empty(as_tensors):
    # The lattice is one state wide: the backward's skip mask kept two columns
    logits = _randn(7, 3, 5)

    def run(device):
        x = logits.to(device).requires_grad_()
        lengths = [[7, 6, 5], [0, 0, 0]]
        if as_tensors:
            lengths = [torch.tensor(v, device=device) for v in lengths]
        loss = F.ctc_loss(x.log_softmax(2), torch.zeros(0, dtype=torch.long, device=device),
                          *lengths)
        loss.backward()
        return loss, x.grad

    assert_same(run(TPU), run("cpu"), **TOL)


@pytest.mark.parametrize("mode", ["strict", "fused"])
@pytest.mark.parametrize("layer", [
    lambda: torch.nn.BatchNorm1d(6),
    lambda: torch.nn.BatchNorm1d(6).eval(),
    lambda: torch.nn.InstanceNorm1d(6, affine=True),
])
def test_a_norm_layer_on_an_input_without_grad(layer, mode):
    # BatchNorm as the first layer, on raw features: the backward is asked for the weight's
    # and bias's gradients only, and leaves grad_input out.
    def run(device):
        torch.manual_seed(0)
        norm = layer().to(device)
        x = _randn(5, 6, 4).to(device)
        (norm(x) * x).sum().backward()
        return norm.weight.grad, norm.bias.grad

    with torchtpu.set_eager_mode(mode):
        actual = run(TPU)
    expected = run("cpu")
    torch.testing.assert_close([a.cpu() for a in actual], list(expected), **TOL)


@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_places_pixels_as_cpu(align_corners):
    # CPU's kernel rounds (x + 1) * (size / 2) - 0.5 once (a fused multiply-add; XLA:CPU
    # fuses ours too): a position one float32 step off moves the output by its share of
    # neighbours 2000 apart (two roundings misplace ~0.2% of positions).
    h, w = 345, 456
    rows = torch.tensor([(-1.0) ** i for i in range(h)]).view(h, 1)
    cols = torch.tensor([(-1.0) ** i for i in range(w)]).view(1, w)
    x = (1000 * rows * cols).expand(1, 1, h, w).contiguous()
    grid = torch.rand(1, h, w, 2, generator=torch.Generator().manual_seed(0)) * 1.9 - 0.95
    actual, expected = _both(F.grid_sample, x, grid, align_corners=align_corners)
    assert_same(actual, expected, rtol=0, atol=1e-3)


@pytest.mark.parametrize("antialias", [False, True])
@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "lanczos"])
@pytest.mark.parametrize("size", [(32, 32), (90, 120)])
def test_uint8_resize_rounds_each_pass_as_cpu(mode, antialias, size):
    if mode == "lanczos" and not antialias:
        pytest.skip("PyTorch: Lanczos mode requires antialias=True")
    # CPU resizes uint8 images width first, then height, rounding to uint8 after each pass
    # (in fixed point: a pixel may still differ by one); truncating shifted a picture darker
    # by half a level on average.
    torch.manual_seed(0)
    x = torch.randint(0, 256, (2, 3, 40, 50), dtype=torch.uint8)
    x[..., 20:, :] = 255  # an edge: bicubic overshoots and clamps there
    actual = F.interpolate(x.to(TPU), size=size, mode=mode, antialias=antialias).cpu()
    expected = F.interpolate(x, size=size, mode=mode, antialias=antialias)
    diff = (actual.int() - expected.int()).abs()
    # (CPU rounds its weights to int16 fixed point: over Lanczos's six taps, two levels)
    assert diff.max() <= (2 if mode == "lanczos" else 1)
    assert diff.float().mean() < 0.1



@pytest.mark.parametrize("op, shape, args", [
    (F.max_pool2d, (3, 1, 5), ((2, 3), None, (1, 0), (2, 1), True)),
    (F.max_pool2d, (3, 1, 5), ((2, 3), None, (1, 0), (2, 1), False)),
    (F.max_pool3d, (2, 3, 3, 1, 5), ((3, 2, 3), None, (0, 1, 0), (1, 2, 1), True)),
    (F.max_pool1d, (1, 1, 1), (2, 2, 1, 2, False)),
], ids=["2d_ceil", "2d", "3d", "1d"])
def test_max_pool_index_of_a_window_of_padding_only_is_cpus(op, shape, args):
    # A dilation steps over the input: CPU's kernel gives the window's first position moved
    # past the padding (outside the plane here), the rule gave int32's largest value.
    actual, expected = _both(op, _randn(*shape), *args, return_indices=True)
    assert_same(actual, expected)
