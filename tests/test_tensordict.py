"""tensordict on "tpu": a TensorDict moved with ``.to("tpu")`` keeps CPU's values, dtypes,
batch sizes and nesting through its tensor ops (apply, stack / cat, indexing, in-place
updates, reshapes, names, arithmetic, which runs through ``torch._foreach_*``), tensorclass,
TensorDictModule / TensorDictSequential forward and backward (eager and compiled), consolidate()
and a memmap round trip (host memory mapped files written from tpu tensors).

The default test runs a few view and copy ops and the memmap round trip; the other views,
arithmetic, modules and fused eager are ``slow``."""

from __future__ import annotations

import pytest
import torch
from conftest import TPU, assert_same

import torchtpu

tensordict = pytest.importorskip("tensordict")
from tensordict import LazyStackedTensorDict, TensorDict, tensorclass  # noqa: E402
from tensordict.nn import TensorDictModule, TensorDictSequential  # noqa: E402


def _base():
    g = torch.Generator().manual_seed(0)
    return TensorDict({"a": torch.randn(4, 3, generator=g),
                       "b": {"c": torch.arange(8).view(4, 2),
                             "d": torch.tensor([True, False, True, True]),
                             "e": torch.rand(4, 2, generator=g, dtype=torch.float64)}},
                      batch_size=[4])


def _floats(td):
    return td.exclude(("b", "c"), ("b", "d"))


def _assert_same_td(actual, expected, **tol):
    assert actual.batch_size == expected.batch_size
    keys = sorted(expected.keys(True, True), key=str)
    assert sorted(actual.keys(True, True), key=str) == keys
    for key in keys:
        value = actual.get(key)
        assert value.device.type == "tpu", key
        assert_same(value, expected.get(key), **tol)


def _plus(td, n):
    return td.apply(lambda x: x + n if x.dtype != torch.bool else ~x)


def _memmap_round_trip(td, tmp_path):
    # written from tpu into host files, read back and moved to tpu again
    on_disk = _base().memmap_like(tmp_path / str(td.device))
    on_disk.update_(td)  # (torch._foreach_copy_ of host destinations from tpu sources)
    assert on_disk.device is None or on_disk.device.type == "cpu"
    return on_disk.to(td.device)


VIEWS_AND_COPIES = {
    "apply": lambda td, _: _plus(td, 2),
    "stack": lambda td, _: torch.stack([td, _plus(td, 1)], 0),
    "index_tensor": lambda td, _: td[torch.tensor([0, 2, 3], device=td.device)],
    "mask": lambda td, _: td[td["b", "d"]],
    "update_": lambda td, _: td.clone().update_(_plus(td, 3)),
    "reshape": lambda td, _: td.reshape(2, 2),
    "names": lambda td, _: td.refine_names("n").rename("m").rename(None),
    "consolidated_to": lambda td, _: _base().consolidate().to(td.device),
    "memmap": _memmap_round_trip,
}
MORE_VIEWS_AND_COPIES = {
    "lazy_stack": lambda td, _: LazyStackedTensorDict.lazy_stack([td, td], 0)[:, 1].contiguous(),
    "cat": lambda td, _: torch.cat([td, td], 0),
    "index": lambda td, _: td[1],
    "slice": lambda td, _: td[1:3],
    "masked_fill": lambda td, _: td.masked_fill(td["b", "d"], 0),
    "setitem": lambda td, _: (lambda c: (c.__setitem__(slice(1, 3), td[0:2]), c)[1])(td.clone()),
    "unsqueeze_permute": lambda td, _: td.reshape(2, 2).permute(1, 0).contiguous(),
    "split_unbind": lambda td, _: td.split(2)[1].unbind(0)[1],
    "expand": lambda td, _: td.expand(2, 4).contiguous(),
    "where": lambda td, _: torch.where(td["b", "d"], td, _plus(td, 5)),
    "flatten_keys": lambda td, _: td.flatten_keys(),
    "consolidate": lambda td, _: td.consolidate(),
}


def _run(cases, tmp_path):
    for name, op in cases.items():
        expected = op(_base(), tmp_path)
        actual = op(_base().to(TPU), tmp_path)
        try:
            _assert_same_td(actual, expected)
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from e


def test_views_copies_and_memmap(tmp_path):
    _run(VIEWS_AND_COPIES, tmp_path)


ARITHMETIC = {
    "add": lambda td, _: _floats(td) + _floats(td) * 2,
    "mul_": lambda td, _: _floats(td).mul_(3),
    "add_alpha": lambda td, _: _floats(td).add_(_floats(td), alpha=2),
    "lerp_": lambda td, _: _floats(td).lerp_(_floats(td) * 2, 0.3),
    "addcmul_": lambda td, _: _floats(td).addcmul_(_floats(td), _floats(td), value=0.5),
    "pow_sqrt": lambda td, _: _floats(td).abs().sqrt() ** 3,
    "maximum_clamp": lambda td, _: _floats(td).maximum(_floats(td) * 0).clamp(-0.5, 0.5),
    "reductions": lambda td, _: torch.stack([_floats(td).mean(dim=0), _floats(td).std(dim=0),
                                             _floats(td).amax(dim=0)], 0),
    "to_dtype": lambda td, _: td.to(torch.float16),
    "int_apply": lambda td, _: td.select(("b", "c")).apply(lambda x: x * 2 - 1),
}


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_arithmetic_and_modes(mode, tmp_path):
    with torchtpu.set_eager_mode(mode):
        _run({**ARITHMETIC, **VIEWS_AND_COPIES, **MORE_VIEWS_AND_COPIES}, tmp_path)


@tensorclass
class _Observation:
    x: torch.Tensor
    y: torch.Tensor


@pytest.mark.slow
def test_tensorclass():
    def run(device):
        base = _base()
        obs = _Observation(x=base["a"], y=base["b", "e"], batch_size=[4]).to(device)
        both = torch.stack([obs, obs * 2], 0)
        return both[:, 1:3].to_tensordict()

    _assert_same_td(run(TPU), run("cpu"))


@pytest.mark.slow
def test_modules_forward_and_backward():
    def run(device):
        torch.manual_seed(0)
        first, last = torch.nn.Linear(3, 5), torch.nn.Linear(5, 2)
        seq = TensorDictSequential(
            TensorDictModule(first, in_keys=["a"], out_keys=["h"]),
            TensorDictModule(torch.relu, in_keys=["h"], out_keys=["h2"]),
            TensorDictModule(last, in_keys=["h2"], out_keys=[("out", "y")])).to(device)
        td = seq(_base().to(device))
        td["out", "y"].square().sum().backward()
        grads = TensorDict({"w": first.weight.grad, "b": last.bias.grad}, batch_size=[])
        params = TensorDict.from_module(seq).apply(lambda p: p * 2)
        with params.to_module(seq):  # (functional call with other parameters)
            doubled = seq(_base().to(device)).select(("out", "y"))
        return td, grads, doubled

    for actual, expected in zip(run(TPU), run("cpu"), strict=True):
        _assert_same_td(actual, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_compiled_module():
    def run(device):
        torch.manual_seed(0)
        linear = torch.nn.Linear(3, 4)
        seq = TensorDictSequential(TensorDictModule(linear, in_keys=["a"], out_keys=["h"]),
                                   TensorDictModule(torch.tanh, in_keys=["h"], out_keys=["y"]))
        compiled = torch.compile(seq.to(device), backend="tpu" if device == TPU else "eager")
        out = compiled(_base().to(device))
        out["y"].sum().backward()
        return TensorDict({"y": out["y"].detach(), "w": linear.weight.grad[None]}, batch_size=[])

    _assert_same_td(run(TPU), run("cpu"), rtol=1e-5, atol=1e-6)
