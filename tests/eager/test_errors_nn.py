"""Bad input to losses, norms, pooling and attention: CPU's exception types and messages."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from conftest import assert_same, raises_as_cpu

import torchtpu

_aten = torch.ops.aten


def _long(*rows):
    return lambda d: torch.tensor(rows, device=d)


@pytest.mark.parametrize("bad, exc", [
    # nll_loss: the meta kernel's checks in CPU's order, then the kernel's dtypes
    (lambda d: F.cross_entropy(torch.ones(5, device=d), torch.tensor([0, 1], device=d)),
     ValueError),
    (lambda d: F.cross_entropy(torch.ones(4, 5, device=d), torch.ones(4, 3, device=d)),
     RuntimeError),
    (lambda d: F.nll_loss(_long([1, 2], [3, 4])(d), torch.tensor([0, 1], device=d)),
     NotImplementedError),
    (lambda d: F.nll_loss(torch.ones(2, 2, dtype=torch.bool, device=d),
                          torch.tensor([0, 1], device=d)), NotImplementedError),
    (lambda d: F.nll_loss(_long([1, 2], [3, 4])(d), torch.tensor([0., 1.], device=d)),
     RuntimeError),
    (lambda d: _aten.nll_loss_forward(torch.ones(2, 3, dtype=torch.long, device=d),
                                      torch.zeros(2, dtype=torch.long, device=d),
                                      torch.ones(2, device=d), 1, -100), RuntimeError),
    (lambda d: _aten.nll_loss_forward(torch.ones(2, 3, 4, device=d),
                                      torch.zeros(2, dtype=torch.long, device=d), None, 1,
                                      -100), RuntimeError),
    (lambda d: _aten.nll_loss2d_forward(torch.ones(2, 3, 4, 4, dtype=torch.long, device=d),
                                        torch.zeros(2, 4, 4, dtype=torch.uint8, device=d),
                                        None, 1, -100), NotImplementedError),
    # nll_loss: class weights in another dtype than the input's (its kernels read them so)
    (lambda d: F.nll_loss(torch.ones(0, 0, device=d), torch.zeros(0, dtype=torch.long, device=d),
                          torch.ones(0, dtype=torch.half, device=d)), RuntimeError),
    (lambda d: F.cross_entropy(torch.ones(2, 3, device=d), torch.tensor([0, 1], device=d),
                               torch.ones(3, dtype=torch.double, device=d)), RuntimeError),
    (lambda d: _aten.nll_loss2d_forward(torch.ones(2, 3, 4, 4, device=d),
                                        torch.zeros(2, 4, 4, dtype=torch.uint8, device=d),
                                        torch.ones(3, dtype=torch.double, device=d), 1, -100),
     RuntimeError),
    # layer_norm: CPU's shape checks and wording, then its kernel's dtypes
    (lambda d: F.layer_norm(_long([1, 2, 3])(d), (3,)), NotImplementedError),
    (lambda d: F.layer_norm(torch.ones(2, 3, dtype=torch.bool, device=d), (3,)),
     NotImplementedError),
    (lambda d: F.layer_norm(_long([1, 2, 3])(d), (4,)), RuntimeError),
    (lambda d: F.layer_norm(_long([1, 2, 3])(d), (3,), torch.ones(3, device=d)), RuntimeError),
    (lambda d: torch.nn.LayerNorm(5).to(d)(torch.ones(2, 4, device=d)), RuntimeError),
    (lambda d: F.layer_norm(torch.ones(2, 3, device=d), (2, 3, 4)), RuntimeError),
    (lambda d: F.layer_norm(torch.ones(2, 3, device=d), (3,), torch.ones(4, device=d)),
     RuntimeError),
    (lambda d: F.layer_norm(torch.ones(2, 3, device=d), (3,), None, torch.ones(4, device=d)),
     RuntimeError),
    # decomposed losses: their kernels' dtypes and numbers
    (lambda d: F.mse_loss(_long(1, 2)(d), _long(1, 3)(d)), NotImplementedError),
    (lambda d: F.mse_loss(_long(1, 2)(d), _long(1, 3)(d), reduction="none"),
     NotImplementedError),
    (lambda d: F.mse_loss(torch.ones(2, dtype=torch.bool, device=d),
                          torch.ones(2, dtype=torch.bool, device=d)), NotImplementedError),
    (lambda d: F.smooth_l1_loss(torch.ones(3, device=d), torch.zeros(3, device=d), beta=-1.),
     RuntimeError),
    (lambda d: F.smooth_l1_loss(torch.ones(3, device=d), torch.zeros(3, device=d), beta=-1.,
                                reduction="none"), RuntimeError),
    (lambda d: F.huber_loss(torch.ones(3, device=d), torch.zeros(3, device=d), delta=-1.),
     RuntimeError),
    # adaptive average pooling: the input's dimensions before its sizes
    (lambda d: F.adaptive_avg_pool2d(torch.ones(4, device=d), 2), RuntimeError),
    (lambda d: F.adaptive_avg_pool2d(torch.ones(4, 4, device=d), 2), RuntimeError),
    (lambda d: F.adaptive_avg_pool2d(torch.ones(1, 1, 1, 0, 4, device=d), 2), RuntimeError),
    (lambda d: F.adaptive_avg_pool3d(torch.ones(4, 4, device=d), 2), RuntimeError),
    # nearest upsampling: empty spatial sizes first, then any empty dim but the batch
    *[(lambda d, shape=shape, mode=mode: F.interpolate(torch.ones(shape, device=d),
                                                      scale_factor=2, mode=mode), RuntimeError)
      for shape in [(2, 2, 0), (2, 2, 0, 4), (1, 1, 0, 1, 1), (2, 0, 4, 4), (0, 0, 3)]
      for mode in ("nearest", "nearest-exact")],
    # linear, cubic and antialiased resizing: the same order (an empty output size divided by
    # zero in their rules)
    *[(lambda d, shape=shape, size=size, mode=mode, aa=aa: F.interpolate(
        torch.ones(shape, device=d), size=size, mode=mode, antialias=aa), RuntimeError)
      for shape, size, mode, aa in [
          ((2, 3, 4), (0,), "linear", False), ((2, 3, 3, 1), (1, 0), "bicubic", False),
          ((2, 3, 3, 1), (1, 0), "bilinear", True),
          ((1, 1, 2, 2, 2), (1, 0, 2), "trilinear", False),
          ((2, 3, 0, 2), (2, 2), "bilinear", False), ((2, 0, 2, 2), (3, 3), "bicubic", False)]],
    (lambda d: F.interpolate(torch.ones(2, 3, 3, 1, device=d), scale_factor=0.5, mode="bicubic",
                             recompute_scale_factor=True), RuntimeError),
    # fractional max pooling: samples in another dtype than the input's
    *[(lambda d, nd=nd: getattr(F, f"fractional_max_pool{nd}d")(
        torch.ones((1, 2) + (5,) * nd, device=d), 2, output_size=2,
        _random_samples=torch.rand(1, 2, nd, dtype=torch.float64, device=d)), RuntimeError)
      for nd in (2, 3)],
])
def test_bad_nn_arguments_raise_as_cpu(bad, exc, eager_mode):
    raises_as_cpu(bad, exc)


def _ones(*shape, dtype=torch.float32):
    return lambda d: torch.ones(shape, dtype=dtype, device=d)


_X2, _X3 = _ones(1, 2, 4, 4), _ones(1, 2, 4, 4, 4)


@pytest.mark.parametrize("bad", [
    # max and average pooling: CPU's checks in its order (a negative kernel's half truncated
    # as C++ does, so the kernel's own check speaks first) and words (no commas between the
    # sizes, none between "got:" and a 2-d pooling's sizes)
    *[lambda d, f=f, x=x, k=k: f(x(d), k) for f, x in (
        (F.max_pool2d, _X2), (F.avg_pool2d, _X2), (F.max_pool3d, _X3), (F.avg_pool3d, _X3),
        (F.avg_pool1d, _ones(1, 2, 4))) for k in (-1, 0)],
    lambda d: F.max_pool2d(_X2(d), 2, dilation=0),
    lambda d: F.max_pool3d(_X3(d), 2, dilation=(1, 0, 1)),
    lambda d: F.max_pool2d(_X2(d), 2, stride=(1, -1)),
    lambda d: F.max_pool2d(_ones(1, 0, 4, 4)(d), 2),
    lambda d: F.avg_pool2d(_ones(2, 2, 2, 2, 2)(d), 2),
    lambda d: F.avg_pool1d(_ones(1, 0, 4)(d), 2),
    lambda d: F.max_pool3d(_ones(1, 0, 4, 4, 4)(d), 2),
    lambda d: F.max_pool3d(_X3(d), 3, padding=2, dilation=2),
    lambda d: F.avg_pool3d(_ones(1, 1, 2, 9, 9)(d), 3),
    lambda d: F.max_pool2d(_X2(d), 3, stride=2, dilation=2, return_indices=True),
    # adaptive average pooling: CPU's 3-d kernel refuses an empty channel too; the backward of
    # an empty output in CPU's words
    lambda d: F.adaptive_avg_pool3d(_ones(1, 0, 4, 4, 4)(d), 2),
    lambda d: F.adaptive_avg_pool2d(_ones(1, 3, 4, 4)(d).requires_grad_(), 0).sum().backward(),
    lambda d: F.adaptive_avg_pool1d(_ones(1, 3)(d).requires_grad_(), 0).sum().backward(),
    # fractional max pooling: sizes, then the samples (the 3-d rule read too few rows)
    *[lambda d, ks=ks, os=os: F.fractional_max_pool2d(
        _ones(2, 7, 7)(d), ks, output_size=os, _random_samples=torch.rand(1, 2, 2, device=d))
      for ks, os in [((), 3), ((1, 2, 3), 3), (2, (3,)), (2, (9, 3)), (2, (3, 9))]],
    *[lambda d, ks=ks, os=os: F.fractional_max_pool3d(
        _ones(2, 7, 7, 7)(d), ks, output_size=os,
        _random_samples=torch.rand(1, 2, 3, device=d))
      for ks, os in [((1, 1), 3), (2, (3, 3)), (2, (6, 3, 3)), (1, (3, 3, 7))]],
    *[lambda d, nd=nd, u=u: getattr(F, f"fractional_max_pool{nd}d")(
        _ones(*(2, 3) + (8,) * nd)(d), 2, output_size=3, _random_samples=torch.rand(u, device=d))
      for nd in (2, 3) for u in [(1, 3, nd), (2, 2, nd), (2, 3, 5 - nd), (3, nd)]],
    # max unpooling: CPU's words for the indices' dtype and shape, and its kernel's dtypes
    lambda d: F.max_unpool2d(_ones(1, 1, 2, 2)(d), torch.zeros(1, 1, 2, 2, device=d), 2),
    lambda d: F.max_unpool2d(_ones(1, 1, 2, 2)(d), torch.zeros(1, 1, 3, 3, dtype=torch.long,
                                                              device=d), 2),
    lambda d: F.max_unpool3d(_ones(1, 1, 2, 2, 2)(d), torch.zeros(1, 1, 2, 2, 3,
                                                                 dtype=torch.long, device=d), 2),
    lambda d: F.max_unpool2d(_ones(1, 1, 2, 2, dtype=torch.long)(d),
                             torch.zeros(1, 1, 2, 2, dtype=torch.long, device=d), 2),
])
def test_bad_pooling_arguments_raise_as_cpu(bad, eager_mode):
    raises_as_cpu(bad, (RuntimeError, NotImplementedError))


@pytest.mark.parametrize("mode", ["strict", "debug"])
@pytest.mark.parametrize("nd, value", [(1, 9), (1, -1), (2, 16), (3, -3)])
def test_max_unpool_of_indices_outside_raises_as_cpu(nd, value, mode):
    # (strict and debug eager read the indices, as CPU's kernel does; XLA's scatter dropped
    # them)
    def bad(d):
        x = torch.arange(4.0 ** nd).reshape((1, 1) + (4,) * nd)
        out, idx = getattr(F, f"max_pool{nd}d")(x, 2, return_indices=True)
        idx.view(-1)[-1] = value
        return getattr(F, f"max_unpool{nd}d")(out.to(d), idx.to(d), 2)

    with torchtpu.set_eager_mode(mode):
        raises_as_cpu(bad)


def _pad(kind, nd, shape, padding, dtype=torch.float32):
    op = getattr(_aten, f"{kind}_pad{nd}d")
    return lambda d: op(torch.ones(shape, dtype=dtype, device=d), padding)


@pytest.mark.parametrize("bad, exc", [
    # CPU's checks in its order: the padding's length, the input's dims (only the batch may be
    # empty), a reflection reaching past the input, the output's size, then the kernel's dtypes
    *[(_pad(kind, nd, (1, 1) + (3,) * nd, [1] * (2 * nd + 1)), RuntimeError)
      for kind in ("reflection", "replication") for nd in (1, 2, 3)],
    *[(_pad(kind, nd, shape, [1] * (2 * nd)), RuntimeError)
      for kind in ("reflection", "replication") for nd in (1, 2, 3)
      for shape in [(3,) * nd, (1, 1, 1) + (3,) * nd, (1, 0) + (3,) * nd, (0,) + (3,) * nd,
                    (1, 1) + (3,) * (nd - 1) + (0,)]],
    *[(_pad("reflection", nd, (1, 1) + (3,) * nd, padding), RuntimeError)
      for nd in (1, 2, 3) for padding in ([3] + [0] * (2 * nd - 1), [0] * (2 * nd - 1) + [3])],
    (lambda d: F.pad(torch.ones(1, 1, 4, 4, device=d), (1, 1, 4, 1), mode="reflect"),
     RuntimeError),
    (lambda d: torch.nn.ReflectionPad3d((0, 0, 0, 0, 4, 0))(torch.ones(1, 4, 4, 4, device=d)),
     RuntimeError),
    (lambda d: torch.nn.ReplicationPad1d(1)(torch.ones(1, 2, 0, device=d)), RuntimeError),
    *[(_pad(kind, nd, (1, 1) + (3,) * nd, padding), RuntimeError)
      for kind in ("reflection", "replication") for nd in (1, 2, 3)
      for padding in ([-2] * (2 * nd), [-2, -2] + [0] * (2 * nd - 2),
                      [0] * (2 * nd - 2) + [-1, -3])],
    (_pad("reflection", 1, (1, 1, 3), [-1, -2]), RuntimeError),
    *[(_pad(kind, nd, (1, 1) + (3,) * nd, [1] * (2 * nd), dtype), NotImplementedError)
      for kind in ("reflection", "replication") for nd in (1, 2, 3)
      for dtype in (torch.bool, torch.uint16)],
    (lambda d: F.pad(torch.ones(1, 2, 3, dtype=torch.bool, device=d), (1, 1), mode="reflect"),
     NotImplementedError),
    (_pad("replication", 1, (1, 1, 3), [3, 3], torch.bool), NotImplementedError),
    (_pad("reflection", 1, (1, 1, 3), [3, 3], torch.bool), RuntimeError),
])
def test_bad_padding_raises_as_cpu(bad, exc, eager_mode):
    raises_as_cpu(bad, exc)


@pytest.mark.parametrize("kind, nd, padding", [
    ("reflection", 2, [0, 0, -1, -2]), ("replication", 3, [0, 0, 0, 0, -1, -2]),
    ("reflection", 1, [-1, -1]), ("replication", 2, [5, 5, -1, 0]), ("reflection", 3, [2] * 6),
])
def test_padding_within_cpus_limits_computes(kind, nd, padding):
    x = torch.arange(3.0 ** nd).reshape((1, 1) + (3,) * nd)
    op = getattr(_aten, f"{kind}_pad{nd}d")
    assert torch.equal(op(x.to("tpu"), padding).cpu(), op(x, padding))


def _resize(mode, shape, dtype, antialias=False):
    return lambda d: F.interpolate(torch.ones(shape, dtype=dtype, device=d), scale_factor=2,
                                   mode=mode, antialias=antialias)


_RESIZES = [("nearest", (1, 2, 4)), ("nearest", (1, 2, 4, 4)), ("nearest-exact", (1, 2, 4, 4)),
            ("nearest", (1, 2, 2, 2, 2)), ("nearest-exact", (1, 2, 4)), ("linear", (1, 2, 4)),
            ("bilinear", (1, 2, 4, 4)), ("bicubic", (1, 2, 4, 4)),
            ("trilinear", (1, 2, 2, 2, 2))]


@pytest.mark.parametrize("bad", [
    # CPU's resizing kernels are built for floats (and uint8, but for linear and trilinear)
    *[_resize(mode, shape, dtype) for mode, shape in _RESIZES
      for dtype in (torch.bool, torch.int32, torch.int8, torch.complex64)],
    *[_resize(mode, shape, torch.uint8) for mode, shape in _RESIZES[5::3]],
    *[_resize(mode, (1, 2, 4, 4), dtype, antialias=True) for mode in ("bilinear", "bicubic")
      for dtype in (torch.bool, torch.int64, torch.complex64)],
])
def test_resizing_refuses_cpus_dtypes(bad, eager_mode):
    raises_as_cpu(bad, NotImplementedError)


@pytest.mark.parametrize("mode, shape", _RESIZES[:5] + [("bilinear", (1, 2, 4, 4))])
def test_resizing_uint8_still_computes(mode, shape):
    x = torch.arange(math.prod(shape), dtype=torch.uint8).reshape(shape)
    out = F.interpolate(x.to("tpu"), scale_factor=2, mode=mode)
    assert out.dtype == torch.uint8 and out.shape == F.interpolate(x, scale_factor=2,
                                                                    mode=mode).shape


def _pool(fn, dtype, nd=2):
    return lambda d: fn(torch.ones((1, 2) + (4,) * nd, device=d).to(dtype), 2)


@pytest.mark.parametrize("bad", [
    # CPU's pooling kernels: max pooling takes integers but not bool, complex or uint16;
    # average pooling int64 alone of the integers; adaptive pooling floats only
    *[_pool(fn, dtype, nd) for fn, nd in ((F.max_pool2d, 2), (F.max_pool3d, 3))
      for dtype in (torch.bool, torch.complex64, torch.uint16)],
    # max_pool1d: CPU's own kernel, floats only, where the input does not require grad
    *[_pool(F.max_pool1d, dtype, 1) for dtype in (torch.int64, torch.uint8, torch.bool,
                                                  torch.complex64)],
    *[_pool(fn, dtype, nd) for fn, nd in ((F.avg_pool2d, 2), (F.avg_pool3d, 3))
      for dtype in (torch.bool, torch.uint8, torch.int32, torch.complex64)],
    *[_pool(fn, dtype, nd) for fn, nd in (
        (F.adaptive_max_pool2d, 2), (F.adaptive_max_pool3d, 3), (F.adaptive_avg_pool2d, 2),
        (F.adaptive_avg_pool3d, 3), (F.adaptive_avg_pool1d, 1))
      for dtype in (torch.bool, torch.uint8, torch.int64, torch.complex64)],
])
def test_pooling_refuses_cpus_dtypes(bad, eager_mode):
    raises_as_cpu(bad, NotImplementedError)


@pytest.mark.parametrize("shape", [(5, 5), (5,), (1, 1, 1, 5, 5)])
def test_max_pool2d_of_other_dims_raises_as_cpu(shape, eager_mode):
    # an unbatched 2-d image: CPU's RuntimeError (PyTorch's meta kernel raised an IndexError)
    raises_as_cpu(lambda d: F.max_pool2d(torch.ones(shape, device=d), 2))


@pytest.mark.parametrize("fn, dtype", [(F.max_pool2d, torch.int64), (F.max_pool2d, torch.uint8),
                                       (F.max_pool3d, torch.int8), (F.avg_pool2d, torch.int64),
                                       (F.avg_pool3d, torch.int64)])
def test_pooling_integers_cpu_takes_still_compute(fn, dtype):
    nd = 3 if fn in (F.max_pool3d, F.avg_pool3d) else 2
    x = torch.arange(2 * 4 ** nd).reshape((1, 2) + (4,) * nd).to(dtype)
    assert torch.equal(fn(x.to("tpu"), 2).cpu(), fn(x, 2))


def test_max_pool1d_with_indices_still_takes_integers():
    # (CPU's max_pool1d_with_indices pools integers through max_pool2d's kernel)
    x = torch.arange(24).reshape(2, 3, 4)
    expected = F.max_pool1d(x, 2, return_indices=True)
    actual = F.max_pool1d(x.to("tpu"), 2, return_indices=True)
    assert all(torch.equal(a.cpu(), e) for a, e in zip(actual, expected, strict=True))


def _conv(fn, x_dtype, w_dtype, nd=2, transposed=False):
    x, w = (1, 3) + (5,) * nd, ((3, 2) if transposed else (2, 3)) + (3,) * nd
    return lambda d: fn(torch.ones(x, dtype=x_dtype, device=d),
                        torch.ones(w, dtype=w_dtype, device=d))


@pytest.mark.parametrize("bad", [
    # an input and weight of different dtypes (a double input to a float model): CPU's words,
    # which depend on the input's dtype; the shapes are checked first
    *[_conv(F.conv2d, x, w) for x, w in [
        (torch.float64, torch.float32), (torch.float32, torch.float64),
        (torch.int64, torch.float32), (torch.float16, torch.float32),
        (torch.bfloat16, torch.float32), (torch.float32, torch.bfloat16),
        (torch.bfloat16, torch.complex64),
        (torch.float16, torch.bfloat16)]],
    _conv(F.conv1d, torch.float64, torch.float32, nd=1),
    _conv(F.conv3d, torch.float16, torch.float64, nd=3),
    _conv(F.conv_transpose2d, torch.float64, torch.float32, transposed=True),
    lambda d: F.conv2d(torch.ones(1, 4, 5, 5, dtype=torch.float64, device=d),
                       torch.ones(2, 3, 3, 3, device=d)),
    lambda d: F.conv1d(torch.ones(1, 3, 5, device=d), torch.ones(6, 3, 3, 3, device=d)),
    # a float input of two images reaches oneDNN, which words it its own way
    lambda d: F.conv2d(torch.ones(2, 3, 5, 5, device=d),
                       torch.ones(2, 3, 3, 3, dtype=torch.float64, device=d)),
    # a kernel larger than the input is checked before the dtypes
    lambda d: F.conv2d(torch.ones(1, 3, 2, 2, dtype=torch.float64, device=d),
                       torch.ones(2, 3, 3, 3, device=d)),
])
def test_convolution_dtype_mismatch_raises_as_cpu(bad, eager_mode):
    raises_as_cpu(bad, RuntimeError)


@pytest.mark.parametrize("x_dtype", [torch.bool, torch.uint8, torch.int8, torch.int16,
                                     torch.int32, torch.int64])
@pytest.mark.parametrize("fn, nd, dilation", [
    (F.conv1d, 1, 1), (F.conv2d, 2, 1), (F.conv3d, 3, 1), (F.conv2d, 2, 2),
    (F.conv_transpose1d, 1, 1), (F.conv_transpose2d, 2, 1), (F.conv_transpose3d, 3, 1)])
def test_convolution_refuses_the_dtypes_cpus_kernels_lack(fn, nd, dilation, x_dtype):
    # CPU's kernel for each path: bool by all, every integer but int64 by the dilated and
    # transposed ones (tpu computed them); the weight's dtype is looked at after
    x = torch.ones((1, 2) + (4,) * nd, dtype=x_dtype)
    for w_dtype in (x_dtype, torch.float32):
        w = torch.ones((2, 2) + (2,) * nd, dtype=w_dtype)
        try:
            expected = fn(x, w, dilation=dilation)
        except RuntimeError:  # NotImplementedError is one
            raises_as_cpu(lambda d, w=w: fn(x.to(d), w.to(d), dilation=dilation))
        else:
            assert torch.equal(fn(x.to("tpu"), w.to("tpu"), dilation=dilation).cpu(), expected)


def test_convolution_of_an_empty_bool_batch_still_runs():
    # CPU sends empty inputs past its kernels
    x, w = torch.ones(0, 2, 4, dtype=torch.bool), torch.ones(3, 2, 2, dtype=torch.bool)
    assert F.conv1d(x.to("tpu"), w.to("tpu")).shape == F.conv1d(x, w).shape == (0, 3, 3)


def _convolution(x, w, *args, transposed=False, groups=1):
    stride, padding, dilation, output_padding = args or ([1], [0], [1], [0])
    return lambda d: _aten.convolution(torch.ones(x, device=d), torch.ones(w, device=d), None,
                                       stride, padding, dilation, transposed, output_padding,
                                       groups)


@pytest.mark.parametrize("bad", [
    # out channels that the groups do not divide (XLA's failure, or a reshape's)
    _convolution((2, 6, 5, 5), (5, 2, 2, 2), groups=3),
    _convolution((2, 5, 5), (5, 2, 2), transposed=True, groups=2),
    # a parameter per spatial dimension, or one for all (XLA's failure)
    _convolution((2, 4, 5, 5), (4, 4, 2, 2), [1, 1, 1], [0], [1], [0]),
    _convolution((2, 4, 5), (4, 4, 2), [1], [0, 0], [1], [0]),
    # the parameters before the shapes, padding before stride
    _convolution((2, 4, 5, 5), (4, 4, 2, 2), [0], [-1], [1], [0]),
    _convolution((2, 4, 5), (4, 4, 2, 2), [1, 1, 1], [0], [1], [0]),
    # an empty input but in its batch or channels (tpu convolved it)
    _convolution((2, 4, 0), (4, 4, 1), [1], [1], [1], [0]),
    _convolution((2, 4, 0, 3), (4, 4, 1, 1), [1], [1], [1], [0], transposed=True),
])
def test_convolution_arguments_are_checked_as_cpu(bad, eager_mode):
    raises_as_cpu(bad, RuntimeError)


@pytest.mark.parametrize("fn, nd", [(F.conv1d, 1), (F.conv2d, 2), (F.conv_transpose1d, 1),
                                    (F.conv_transpose3d, 3)])
@pytest.mark.parametrize("batch, dtype", [(1, torch.float32), (4, torch.float32),
                                          (4, torch.complex64), (1, torch.float64)])
def test_a_zero_dilation_is_worded_by_cpus_kernel(fn, nd, batch, dtype):
    # ATen refuses a negative dilation only: a zero one is refused by the kernel CPU picks,
    # oneDNN (a batch of four floats) or a slow one (the 1-d as 2-d); tpu gave ATen's words
    raises_as_cpu(lambda d: fn(torch.ones((batch, 1) + (5,) * nd, dtype=dtype, device=d),
                               torch.ones((1, 1) + (3,) * nd, dtype=dtype, device=d),
                               dilation=0))


@pytest.mark.parametrize("x_dtype, b_dtype, batch, transposed", [
    (torch.bfloat16, torch.float32, 1, False),  # oneDNN's words (tpu computed it)
    (torch.float32, torch.float64, 2, True),
    (torch.int64, torch.float32, 1, True),  # the slow transposed kernel adds it in place
])
def test_convolution_bias_of_another_dtype_is_refused_as_cpu(x_dtype, b_dtype, batch,
                                                             transposed):
    def bad(d):
        x, w = torch.ones(batch, 4, 5, 5, dtype=x_dtype), torch.ones(4, 4, 3, 3, dtype=x_dtype)
        return _aten.convolution(x.to(d), w.to(d), torch.ones(4, dtype=b_dtype, device=d),
                                 [1, 1], [0, 0], [1, 1], transposed, [0, 0], 1)
    if x_dtype == torch.bfloat16 and not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        # a host without oneDNN's bfloat16 (AVX2 only) convolves on the slow kernel, which
        # casts the bias: CPU computes it, and so does tpu
        assert_same(bad("tpu"), bad("cpu"))
        return
    raises_as_cpu(bad, RuntimeError)


def test_convolution_of_integers_casts_a_float_bias_first():
    x, w = torch.tensor([[[-3, 1, 2]]]), torch.tensor([[[1, 1]]])
    b = torch.tensor([0.5])
    args = ([1], [0], [1], False, [0], 1)  # (F.conv1d refuses it before)
    assert torch.equal(_aten.convolution(x.to("tpu"), w.to("tpu"), b.to("tpu"), *args).cpu(),
                       _aten.convolution(x, w, b, *args))


def test_valid_nn_arguments_still_compute():
    # mixed integer and float operands promote, as CPU's kernels take them
    x, y = torch.tensor([1, 2]), torch.tensor([1.5, 3.0])
    assert F.mse_loss(x.to("tpu"), y.to("tpu")).item() == F.mse_loss(x, y).item()
    assert F.smooth_l1_loss(y.to("tpu"), y.to("tpu") * 2, beta=0.0).item() == \
        F.smooth_l1_loss(y, y * 2, beta=0.0).item()


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "bilinear"])
def test_upsampling_an_empty_batch_gives_an_empty_result(mode):
    # PyTorch's meta kernel raises a TypeError of its own there; CPU's kernel runs
    x = torch.ones(0, 3, 4, 4, requires_grad=True)
    xt = x.detach().to("tpu").requires_grad_()
    out = F.interpolate(xt, scale_factor=2, mode=mode)
    assert out.shape == F.interpolate(x, scale_factor=2, mode=mode).shape == (0, 3, 8, 8)
    out.sum().backward()
    assert xt.grad.shape == x.shape


def _qkv(d, dtypes=(torch.float32,) * 3, shape=(1, 2, 4, 8)):
    return [torch.ones(shape, dtype=t, device=d) for t in dtypes]


@pytest.mark.parametrize("bad", [
    # a 0/1 mask of integers: CPU refuses it (added, it would shift the scores)
    lambda d: F.scaled_dot_product_attention(*_qkv(d), attn_mask=torch.ones(
        4, 4, dtype=torch.long, device=d)),
    lambda d: F.scaled_dot_product_attention(*_qkv(d), attn_mask=torch.ones(
        4, 4, dtype=torch.long, device=d), is_causal=True),
    lambda d: F.scaled_dot_product_attention(*_qkv(d, (torch.double,) * 3), attn_mask=torch.ones(
        4, 4, dtype=torch.int32, device=d)),
    lambda d: F.scaled_dot_product_attention(*_qkv(d), attn_mask=torch.ones(
        4, 4, dtype=torch.half, device=d)),
    lambda d: F.scaled_dot_product_attention(*_qkv(d, (torch.float, torch.double, torch.float))),
    lambda d: F.scaled_dot_product_attention(*_qkv(d, shape=(8,))),
])
def test_bad_attention_arguments_raise_as_cpu(bad, eager_mode):
    raises_as_cpu(bad, RuntimeError)


def _ctc(d, il, tl, targets=(2, 3), blank=0, shape=(10, 2, 5)):
    log_probs = torch.zeros(shape, device=d).log_softmax(-1)
    return F.ctc_loss(log_probs, torch.ones(targets, dtype=torch.long, device=d), il, tl,
                      blank=blank)


@pytest.mark.parametrize("bad", [
    lambda d: _ctc(d, torch.tensor([10, 10]), torch.tensor([3])),
    lambda d: _ctc(d, torch.tensor([10]), torch.tensor([3, 3])),
    lambda d: _ctc(d, torch.tensor([10, 11]), torch.tensor([3, 3])),
    lambda d: _ctc(d, [10, 11], [3, 3]),
    lambda d: _ctc(d, torch.tensor([10, -1]), torch.tensor([3, 3])),
    lambda d: _ctc(d, torch.tensor([10, 10]), torch.tensor([3, 4])),
    lambda d: _ctc(d, torch.tensor([11, 10]), torch.tensor([4, 3])),  # targets first
    lambda d: _ctc(d, torch.tensor([10, 10]), torch.tensor([3, -1])),
    lambda d: _ctc(d, torch.tensor([10, 10]), torch.tensor([3, 3]), targets=(5,)),
    lambda d: _ctc(d, torch.tensor([10, 10]), torch.tensor([3, 3]), targets=(7,)),
    lambda d: _ctc(d, torch.tensor([10, 10]), torch.tensor([3, 3]), targets=(3, 3)),
    lambda d: _ctc(d, torch.tensor([10, 10]), torch.tensor([3, 3]), targets=(2, 3, 1)),
    lambda d: _ctc(d, torch.tensor([10, 10]), torch.tensor([3, 3]), blank=5),
    lambda d: _ctc(d, torch.tensor([10., 10.]), torch.tensor([3, 3])),
    lambda d: _ctc(d, torch.tensor(11), torch.tensor(3), targets=(3,), shape=(10, 5)),
])
def test_bad_ctc_lengths_raise_as_cpu(bad, eager_mode):
    raises_as_cpu(bad, RuntimeError)


@pytest.mark.parametrize("lengths, targets", [
    (([10, 11], [3, 3]), (2, 3)), (([10, -1], [3, 3]), (2, 3)), (([10, 10], [3, 4]), (2, 3)),
    (([11, 10], [4, 3]), (2, 3)), (([10, 10], [3, -1]), (2, 3)), (([10, 10], [3, 3]), (5,)),
    (([10, 10], [3, 3]), (3, 3)),
])
def test_ctc_lengths_on_tpu_are_checked_in_fused_eager_at_the_sync_point(lengths, targets):
    # Fused eager does not wait to read tpu lengths: an invalid one gave a number (or inf).
    def bad(d):
        il, tl = (torch.tensor(v, device=d) for v in lengths)
        with torchtpu.set_eager_mode("fused"):
            return _ctc(d, il, tl, targets=targets).cpu()

    raises_as_cpu(bad, RuntimeError)


def test_ctc_lengths_within_bounds_still_compute():
    # concatenated targets and an input length of T: valid on CPU
    def loss(d):
        return _ctc(d, torch.tensor([10, 7]), torch.tensor([2, 1]), targets=(3,))

    assert torch.allclose(loss("tpu").cpu(), loss("cpu"), atol=1e-5)


def _bag(weight_shape, indices_shape, offsets_shape):
    return lambda d: torch._embedding_bag(torch.zeros(weight_shape, device=d),
                                          torch.zeros(indices_shape, dtype=torch.long, device=d),
                                          torch.zeros(offsets_shape, dtype=torch.long, device=d))


@pytest.mark.usefixtures("eager_mode")
@pytest.mark.parametrize("bad", [
    _bag((2, 6), (2, 0, 0, 6, 6), (2, 0, 0, 6, 6)), _bag((2, 2), (2,), (2, 0, 6)),
    _bag((2, 2, 2), (2,), (2,)),
    lambda d: F.embedding_bag(torch.zeros(2, 0, 6, dtype=torch.long, device=d),
                              torch.zeros(2, 6, device=d), torch.zeros(2, 0, dtype=torch.long,
                                                                       device=d)),
], ids=["input_rank", "offsets_rank", "weight_rank", "functional"])
def test_embedding_bag_ranks_raise_as_cpu(bad):
    raises_as_cpu(bad, (RuntimeError, ValueError))


@pytest.mark.usefixtures("eager_mode")
@pytest.mark.parametrize("weight_shape, dtype", [((10, 3), torch.float32), ((10, 3), torch.int16),
                                                 ((10, 3, 2), torch.float32), ((10,), torch.int64)],
                         ids=["float", "int16", "weight_rank_first", "weight_rank"])
def test_embedding_checks_raise_as_cpu(weight_shape, dtype):
    # the meta kernel prints the indices' dtype as Python does (torch.float32)
    raises_as_cpu(lambda d: F.embedding(torch.ones(2, dtype=dtype, device=d),
                                        torch.zeros(weight_shape, device=d)))


@pytest.mark.parametrize("dtype, mode, padding_idx", [
    (torch.float32, "sum", None), (torch.float64, "sum", None), (torch.float32, "max", None),
    (torch.float32, "mean", 0), (torch.bfloat16, "mean", None)])
@pytest.mark.parametrize("bad", [-1, 11])
def test_embedding_bag_index_outside_raises_as_cpu(dtype, mode, padding_idx, bad):
    # CPU's fast path (float rows, sum or mean, no padding_idx) and its generic kernel word
    # the error differently
    raises_as_cpu(lambda d: F.embedding_bag(
        torch.tensor([[bad, 1]], device=d), torch.randn(10, 2, dtype=dtype, device=d),
        padding_idx=padding_idx, mode=mode))


def _in_place_backward(forward):
    def bad(d):
        a = torch.tensor([-1.0, 1.0], device=d, requires_grad=True)
        forward(a.clone()).backward(torch.ones(2, device=d))
    return bad


@pytest.mark.usefixtures("eager_mode")
@pytest.mark.parametrize("bad", [
    lambda d: F.softshrink(torch.randn(5, device=d), -1),
    lambda d: F.softshrink(torch.randn(5, dtype=torch.float16, device=d), 1e10),
    lambda d: F.softshrink(torch.randn(5, dtype=torch.float64, device=d), -1.5),
    _in_place_backward(lambda x: F.leaky_relu_(x, -2)),
    _in_place_backward(lambda x: F.rrelu_(x, -5.0, 1.0)),
    lambda d: F.ctc_loss(torch.rand(0, 0, 4, device=d), *(torch.tensor(
        [], dtype=torch.long, device=d) for _ in range(3)), reduction="none"),
], ids=["softshrink_negative", "softshrink_past_half", "softshrink_double",
        "leaky_relu_in_place_negative_slope", "rrelu_in_place_negative_slope", "ctc_empty"])
def test_activation_and_ctc_arguments_raise_as_cpu(bad):
    raises_as_cpu(bad)
