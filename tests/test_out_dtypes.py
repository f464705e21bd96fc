"""An out= tensor of another dtype than the result's: taken or refused, with CPU's words."""

from __future__ import annotations

import pytest
import torch
from conftest import assert_same, raises_as_cpu

f64, f32, i32, i64 = torch.float64, torch.float32, torch.int32, torch.int64


def _x(device, dtype=torch.float32):
    return (torch.arange(12, dtype=torch.float32).reshape(3, 4) / 5 - 1).to(dtype).to(device)


# (name, out dtype, op(device, out)); each runs on CPU and on tpu.
CASES = [
    # all operands of one dtype (TensorIterator): "Found dtype ... but expected ..."
    ("neg", f64, lambda d, o: torch.neg(_x(d), out=o)),
    ("neg int", i32, lambda d, o: torch.neg(_x(d, i64), out=o)),
    ("floor", f64, lambda d, o: torch.floor(_x(d), out=o)),
    ("ceil int", i32, lambda d, o: torch.ceil(_x(d, i64), out=o)),
    ("round decimals", f64, lambda d, o: torch.round(_x(d), decimals=2, out=o)),
    ("abs", f64, lambda d, o: torch.abs(_x(d), out=o)),
    ("sign", i64, lambda d, o: torch.sign(_x(d), out=o)),
    ("clamp", f64, lambda d, o: torch.clamp(_x(d), 0, 1, out=o)),
    ("silu", f64, lambda d, o: torch._C._nn.silu(_x(d), out=o)),
    ("bitwise_not", i32, lambda d, o: torch.bitwise_not(_x(d, i64), out=o)),
    # structured kernels: "Expected out tensor to have dtype ..."
    ("mm", f64, lambda d, o: torch.mm(_x(d), _x(d).T, out=o)),
    ("tril", i32, lambda d, o: torch.tril(_x(d, i64), out=o)),
    ("softmax", f64, lambda d, o: torch._softmax(_x(d), 0, False, out=o)),
    ("argmax", i32, lambda d, o: torch.argmax(_x(d), out=o)),
    ("isnan", f32, lambda d, o: torch.ops.aten.isnan.out(_x(d), out=o)),
    ("sort indices", None, lambda d, o: torch.sort(
        _x(d), out=(torch.empty(0, device=d), torch.empty(0, dtype=i32, device=d)))),
    ("max dim", None, lambda d, o: torch.max(
        _x(d), 0, out=(torch.empty(0, dtype=f64, device=d), torch.empty(0, dtype=i64, device=d)))),
    ("relu", f64, lambda d, o: torch.ops.aten.relu.out(_x(d), out=o)),
    # kernels with words of their own
    ("dot", f64, lambda d, o: torch.dot(_x(d)[0], _x(d)[1], out=o)),
    ("index_select", f64, lambda d, o: torch.index_select(
        _x(d), 0, torch.tensor([0, 2], device=d), out=o)),
    ("signbit", f32, lambda d, o: torch.signbit(_x(d), out=o)),
    ("where", f64, lambda d, o: torch.where(_x(d) > 0, _x(d), _x(d), out=o)),
    ("all", f32, lambda d, o: torch.all(_x(d), out=o)),
    ("all uint8", torch.uint8, lambda d, o: torch.all(_x(d, torch.uint8), out=o)),
    ("nan_to_num", f64, lambda d, o: torch.nan_to_num(_x(d), out=o)),
    ("searchsorted", f64, lambda d, o: torch.searchsorted(
        torch.arange(4.0, device=d), _x(d), out=o)),
    ("amax", f64, lambda d, o: torch.amax(_x(d), 0, out=o)),
    ("complex", f32, lambda d, o: torch.complex(_x(d), _x(d), out=o)),
    ("logsumexp int", i64, lambda d, o: torch.logsumexp(_x(d), 0, out=o)),
    ("take", f64, lambda d, o: torch.take(_x(d), torch.tensor([1], device=d), out=o)),
    # kernels that cast into any out the result casts to safely
    ("sin", f64, lambda d, o: torch.sin(_x(d), out=o)),
    ("add", f64, lambda d, o: torch.add(_x(d), 1, out=o)),
    ("add to int", i64, lambda d, o: torch.add(_x(d), 1, out=o)),
    ("eq", f32, lambda d, o: torch.eq(_x(d), 0, out=o)),
    ("sum over dims", f64, lambda d, o: torch.sum(_x(d), 0, out=o)),
    ("mean", f64, lambda d, o: torch.mean(_x(d), 0, out=o)),
    ("cumsum", f64, lambda d, o: torch.cumsum(_x(d), 0, out=o)),
    ("logsumexp", f64, lambda d, o: torch.logsumexp(_x(d), 0, out=o)),
    ("cat", f64, lambda d, o: torch.cat([_x(d), _x(d)], out=o)),
    ("floor_divide", f64, lambda d, o: torch.floor_divide(_x(d), 2, out=o)),
    ("mse_loss", f64, lambda d, o: torch._C._nn.mse_loss(_x(d), _x(d) * 2, out=o)),
    ("abs of complex", f64, lambda d, o: torch.abs(_x(d, torch.complex64), out=o)),
    ("arange", f64, lambda d, o: torch.arange(5, out=o)),
    # sums and products compute in their out's dtype (the input cast first)
    ("sum into integers", i64, lambda d, o: torch.sum(_x(d) * 3, 0, out=o)),
    ("prod of complex into floats", f32,
     lambda d, o: torch.prod(_x(d, torch.complex64), 1, out=o)),
    ("cumsum into integers", i32, lambda d, o: torch.cumsum(_x(d) * 3, 1, out=o)),
    ("cumprod of complex into floats", f32,
     lambda d, o: torch.cumprod(_x(d, torch.complex64), 0, out=o)),
    ("cumsum into bools", torch.bool, lambda d, o: torch.cumsum(_x(d), 0, out=o)),
    ("mean of complex into floats", f32, lambda d, o: torch.mean(_x(d, torch.complex64), 0, out=o)),
    ("mean into integers", i64, lambda d, o: torch.mean(_x(d), 0, out=o)),
    ("cat into integers", i64, lambda d, o: torch.cat([_x(d)], out=o)),
    ("_chunk_cat into integers", i64, lambda d, o: torch._chunk_cat([_x(d), _x(d)], 1, 2, out=o)),
    ("_chunk_cat", f64, lambda d, o: torch._chunk_cat([_x(d), _x(d)], 1, 2, out=o)),
    ("max into integers", i64, lambda d, o: torch.max(_x(d), out=o)),
    # bernoulli draws into an out of any dtype
    ("bernoulli into bools", torch.bool,
     lambda d, o: torch.bernoulli(torch.tensor([0.0, 1.0, 1.0], device=d), out=o)),
    # normal draws into its out: any floating or complex one, no integers
    ("normal into integers", i64,
     lambda d, o: torch.normal(_x(d), 1.0, out=o.resize_(_x(d).shape))),
    ("normal into bools", torch.bool, lambda d, o: torch.normal(_x(d), _x(d), out=o)),
    ("normal into halves", torch.float16, lambda d, o: torch.normal(_x(d), _x(d) * 0, out=o)),
    # the out's dtype is checked before the kernel's (which refuses these inputs)
    ("floor of bools", torch.uint8, lambda d, o: torch.floor(_x(d, torch.bool), out=o)),
    ("bitwise_not of halves", torch.bool,
     lambda d, o: torch.bitwise_not(_x(d, torch.float16), out=o)),
    ("atan2 of a complex", torch.bool,
     lambda d, o: torch.atan2(_x(d, torch.complex64), _x(d), out=o)),
    ("remainder of a complex", f32, lambda d, o: torch.remainder(_x(d), 1j, out=o)),
]


@pytest.mark.parametrize("name, dtype, op", CASES, ids=[c[0] for c in CASES])
def test_an_out_of_another_dtype_as_cpu(name, dtype, op):
    def run(device):
        out = torch.empty(0, dtype=dtype, device=device) if dtype is not None else None
        try:
            return op(device, out), None
        except (RuntimeError, TypeError) as e:
            return None, f"{type(e).__name__}: {e}"

    (expected, cpu_error), (actual, tpu_error) = run("cpu"), run("tpu")
    assert tpu_error == cpu_error
    if cpu_error is None:
        assert_same(actual, expected)


def test_an_out_on_the_cpu_is_refused_after_its_dtype():
    # as the accelerators' nonzero kernels: dtype first, then "on the same device"
    x = _x("tpu")
    with pytest.raises(RuntimeError, match="Expected out tensor to have scalar type Long"):
        torch.nonzero(x, out=torch.empty(0))
    with pytest.raises(RuntimeError, match="self and out to be on the same device"):
        torch.nonzero(x, out=torch.empty(0, dtype=i64))
    with pytest.raises(RuntimeError, match="Expected out tensor to have device tpu:0, but got cpu"):
        torch.neg(x, out=torch.empty(0))


@pytest.mark.parametrize("op", [
    lambda d, o: torch.mode(_x(d), 1, out=(o(f32), o(torch.int8))),
    lambda d, o: torch.kthvalue(_x(d), 1, out=(o(f32), o(i32))),
    lambda d, o: torch.median(_x(d), 1, out=(o(f32), o(i32))),
    lambda d, o: torch.nanmedian(_x(d), 1, out=(o(f64), o(i64))),
    lambda d, o: torch.cummax(_x(d), 1, out=(o(f32), o(i32))),
    lambda d, o: torch.frexp(_x(d), out=(o(f32), o(i64))),
], ids=["mode", "kthvalue", "median", "nanmedian values", "cummax", "frexp"])
def test_an_index_out_of_another_dtype_is_refused_as_cpu(op):
    raises_as_cpu(lambda d: op(d, lambda dtype: torch.empty(0, dtype=dtype, device=d)))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool, torch.complex64])
def test_nansum_of_floats_into_a_non_floating_out_is_not_implemented_as_on_cpu(dtype):
    # CPU's nansum runs in the out's dtype, and its kernel takes floating dtypes only.
    raises_as_cpu(lambda d: torch.nansum(torch.ones(3, device=d),
                                         out=torch.empty(0, dtype=dtype, device=d)),
                  NotImplementedError)
