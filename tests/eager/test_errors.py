"""Bad input: PyTorch's exception types, ops without rules, the CPU fallback."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from conftest import assert_same, raises_as_cpu

import torchtpu


@pytest.mark.parametrize(
    "bad, exc",
    [
        (lambda d: torch.ones(3, device=d) + torch.ones(4, device=d), RuntimeError),
        (lambda d: torch.ones(2, 3, device=d) @ torch.ones(2, 3, device=d), RuntimeError),
        (lambda d: torch.ones(2, 3, device=d).view(4), RuntimeError),
        (lambda d: torch.ones(2, 3, device=d)[3], IndexError),
        (lambda d: torch.ones(2, 3, device=d).sum(dim=5), IndexError),
        (lambda d: torch.cat([torch.ones(2, 3, device=d), torch.ones(2, 4, device=d)]),
         RuntimeError),
        (lambda d: torch.ones(3, dtype=torch.int64, device=d).mean(), RuntimeError),
        (lambda d: torch.ones(3, device=d).add_(torch.ones(2, 3, device=d)), RuntimeError),
        (lambda d: torch.nn.functional.linear(torch.ones(2, 3, device=d),
                                              torch.ones(4, 5, device=d)), RuntimeError),
        (lambda d: torch.ones(3, device=d).reshape(2, 2), RuntimeError),
        (lambda d: torch.ones(2, 3, device=d) * torch.ones(4, 3, device=d), RuntimeError),
        (lambda d: torch.where(torch.ones(2, 1, dtype=torch.bool, device=d),
                               torch.ones(2, 3, device=d), torch.ones(5, device=d)), RuntimeError),
        (lambda d: torch.ones(2, 3, 4, device=d) @ torch.ones(5, 2, device=d), RuntimeError),
        (lambda d: torch.nn.functional.conv2d(torch.ones(1, 1, 4, 4, device=d),
                                              torch.ones(1, 1, 2, 2, device=d), stride=-1),
         RuntimeError),
        (lambda d: torch.nn.functional.conv2d(torch.ones(1, 2, 4, 4, device=d),
                                              torch.ones(2, 2, 2, 2, device=d), groups=3),
         RuntimeError),
        (lambda d: torch.amax(torch.ones(3, 4, device=d), 0,
                              out=torch.empty(4, dtype=torch.float64, device=d)), RuntimeError),
        (lambda d: torch.gather(torch.ones(3, 4, device=d), 0,
                                torch.zeros(1, 4, dtype=torch.long, device=d),
                                out=torch.empty(1, 4, dtype=torch.float64, device=d)),
         RuntimeError),
        (lambda d: torch.ones(3, device=d).permute(1, 0), RuntimeError),
        (lambda d: torch.ones(3, dtype=torch.half, device=d).masked_fill_(
            torch.ones(3, dtype=torch.bool, device=d), -1e9), RuntimeError),
        (lambda d: torch.ones(3, dtype=torch.int8, device=d).fill_(300), RuntimeError),
        (lambda d: torch.mv(torch.ones(3, 4, device=d), torch.ones(5, device=d)), RuntimeError),
        (lambda d: torch.dot(torch.ones(3, device=d), torch.ones(4, device=d)), RuntimeError),
        # matrix products multiply like dtypes only (PyTorch's meta kernels would promote)
        (lambda d: torch.ones(2, 3, device=d) @ torch.ones(3, 2, dtype=torch.double, device=d),
         RuntimeError),
        (lambda d: torch.nn.functional.linear(torch.ones(2, 3, device=d),
                                              torch.ones(2, 3, device=d),
                                              torch.ones(2, dtype=torch.float64, device=d)),
         RuntimeError),
        (lambda d: torch.mv(torch.ones(2, 3, device=d), torch.ones(3, dtype=torch.bfloat16,
                                                                   device=d)), RuntimeError),
        (lambda d: torch.mm(torch.ones(2, 3, dtype=torch.bool, device=d),
                            torch.ones(3, 2, dtype=torch.bool, device=d)), NotImplementedError),
        # dtypes CPU's kernels refuse, and numbers they check by value
        (lambda d: torch.tensor([True], device=d) - 1, RuntimeError),
        (lambda d: 1 - torch.tensor([True], device=d), RuntimeError),
        (lambda d: torch.tensor([True, False], device=d).argmax(), RuntimeError),
        (lambda d: torch.softmax(torch.tensor([[1, 2]], device=d), 0), NotImplementedError),
        (lambda d: torch.log_softmax(torch.tensor([1, 2], device=d), 0), NotImplementedError),
        (lambda d: torch.tensor([True], device=d).abs(), NotImplementedError),
        (lambda d: torch.tensor([2, 3], device=d) ** -1, RuntimeError),
        (lambda d: torch.tensor([2, 3], device=d).pow_(-2), RuntimeError),
        (lambda d: torch.full((2,), float("nan"), dtype=torch.int64, device=d), RuntimeError),
        (lambda d: torch.zeros(2, dtype=torch.int32, device=d).fill_(float("inf")), RuntimeError),
        (lambda d: torch.full((2,), -256, dtype=torch.uint8, device=d), RuntimeError),
        # lerp's dtype checks name a dtype as c10 does
        (lambda d: torch.lerp(torch.ones(2, dtype=torch.cfloat, device=d),
                              torch.ones(2, dtype=torch.cfloat, device=d),
                              torch.ones(2, device=d)), RuntimeError),
        (lambda d: torch.ones(2, dtype=torch.half, device=d).lerp(torch.ones(2, device=d), 0.5),
         RuntimeError),
        # the dtypes' match before the kernel's dtypes (bools and integers, refused), as CPU
        (lambda d: torch.ones(2, dtype=torch.bool, device=d).lerp(
            torch.ones(2, dtype=torch.uint8, device=d), 0.5), RuntimeError),
        (lambda d: torch.mm(torch.ones(2, 2, dtype=torch.bool, device=d),
                            torch.ones(2, 2, dtype=torch.uint8, device=d)), RuntimeError),
        (lambda d: torch.mv(torch.ones(2, 2, dtype=torch.bool, device=d),
                            torch.ones(2, dtype=torch.uint8, device=d)), RuntimeError),
    ],
)
def test_same_exception_as_cpu(bad, exc, eager_mode):
    with pytest.raises(exc) as on_cpu:
        bad("cpu")
    with pytest.raises(exc) as on_tpu:
        bad("tpu")
    assert str(on_tpu.value).splitlines()[0] == str(on_cpu.value).splitlines()[0]


_BATCHED_PRODUCTS = {
    "bmm": lambda s, x, y: torch.bmm(x[None], y[None]),
    "baddbmm": lambda s, x, y: torch.baddbmm(s[None], x[None], y[None]),
    "addbmm": lambda s, x, y: torch.addbmm(s, x[None], y[None]),
    "dot": lambda s, x, y: torch.dot(x[0], y[0]),
    "vdot": lambda s, x, y: torch.vdot(x[0], y[0]),
}


@pytest.mark.parametrize("op", _BATCHED_PRODUCTS)
@pytest.mark.parametrize("dtypes", ["ffd", "dff", "dfd", "fdf", "ddf", "bbb", "fbb"])
def test_products_of_mixed_dtypes_refuse_as_cpu(op, dtypes):
    # CPU checks which operands match in a fixed order (addbmm computed a mixed product).
    types = {"f": torch.float32, "d": torch.float64, "b": torch.bool}

    def product(device):
        return _BATCHED_PRODUCTS[op](
            *[torch.ones(2, 2, dtype=types[c], device=device) for c in dtypes])

    try:
        expected = product("cpu")
    except Exception:
        raises_as_cpu(product, Exception)
    else:
        assert_same(product("tpu"), expected)


def test_mixing_devices_is_an_error():
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(3, device="tpu") + torch.ones(3)
    # Which argument of which op, as cuda's message says.
    with pytest.raises(RuntimeError, match=r"tpu:0 and cpu! \(when checking argument for "
                                           r"argument mat1 in method aten.addmm.default\)$"):
        torch.nn.Linear(3, 4).to("tpu")(torch.ones(2, 3))
    # A CPU scalar tensor may mix, as with cuda.
    assert (torch.ones(3, device="tpu") * torch.tensor(2.0)).device.type == "tpu"


_NO_RULE = "aten._cholesky_solve_helper.default"


def _no_rule_op():
    # An obscure op no rule, decomposition or composite covers (cholesky_solve's kernel,
    # which its rule never calls), called with one tensor as both operands.
    from torchtpu.ops.decomps import DECOMPOSITIONS
    from torchtpu.ops.registry import LOWERINGS

    op = torch.ops.aten._cholesky_solve_helper.default
    assert op not in LOWERINGS and op not in DECOMPOSITIONS
    return lambda x: op(x, x, False)


def test_missing_op_names_overload_and_inputs(monkeypatch):
    monkeypatch.delenv("TORCHTPU_CPU_FALLBACK", raising=False)
    x = torch.ones(3, 3, device="tpu")
    with pytest.raises(NotImplementedError) as info:
        _no_rule_op()(x)
    text = str(info.value)
    assert _NO_RULE in text
    assert "float32[3, 3]" in text and "TORCHTPU_CPU_FALLBACK" in text


def test_cpu_fallback_runs_counts_and_reports(monkeypatch):
    monkeypatch.setenv("TORCHTPU_CPU_FALLBACK", "1")
    torchtpu.reset_metrics()
    a = torch.randn(4, 4)
    out = _no_rule_op()(a.to("tpu"))
    assert out.device.type == "tpu"
    torch.testing.assert_close(out.cpu(), _no_rule_op()(a))
    _no_rule_op()(a.to("tpu"))
    assert torchtpu.metrics()["fallback"][_NO_RULE] == 2
    assert f"{_NO_RULE}: 2" in torchtpu.debug.report()


def test_debug_mode_names_op_and_user_line():
    x = torch.ones(3, device="tpu")
    before = torchtpu.get_eager_mode()  # (strict, or TORCHTPU_EAGER_MODE's)
    with torchtpu.set_eager_mode("debug"):
        with pytest.raises(RuntimeError) as info:
            x + torch.ones(4, device="tpu")  # THIS LINE
    text = str(info.value)
    assert "aten.add.Tensor" in text
    assert "test_errors.py" in text and "test_debug_mode_names_op_and_user_line" in text
    assert torchtpu.get_eager_mode() == before


def test_debug_mode_reports_errors_inside_backward():
    class Bad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g @ torch.ones(7, 7, device=g.device)  # wrong shape on purpose

    x = torch.ones(3, device="tpu", requires_grad=True)
    with torchtpu.set_eager_mode("debug"):
        with pytest.raises(Exception) as info:
            Bad.apply(x).sum().backward()
    from torchtpu.eager import debug

    message = str(info.value) + str(debug.last_error)
    assert "aten.mm" in message or "aten.matmul" in message or "aten.mv" in message


def test_mode_switch_validates_and_env_default(monkeypatch):
    before = torchtpu.get_eager_mode()
    with pytest.raises(ValueError, match="strict"):
        torchtpu.set_eager_mode("fast")
    torchtpu.set_eager_mode("debug")
    assert torchtpu.get_eager_mode() == "debug"
    torchtpu.set_eager_mode("strict")
    assert torch.tpu.get_eager_mode() == "strict"
    torchtpu.set_eager_mode(before)


_F = torch.nn.functional
OUT_OF_RANGE = {  # (x of shape (3, 4), i = [0, 7] or [0, -5]) -> op
    "index": lambda x, i: x[i],
    "index_dim1": lambda x, i: x[:, i],
    "index_put": lambda x, i: x.index_put((i,), torch.zeros(2, 4, device=x.device)),
    "setitem": lambda x, i: x.clone().__setitem__(i, 1.0),
    "index_select": lambda x, i: x.index_select(0, i),
    "index_select_dim1": lambda x, i: x.index_select(1, i),  # CPU's fast path, its own words
    "embedding": lambda x, i: _F.embedding(i, x),
    "embedding_bag": lambda x, i: _F.embedding_bag(i[None], x),
    "gather": lambda x, i: x.gather(0, i[:, None].expand(2, 4)),
    "scatter": lambda x, i: x.scatter(0, i[:, None].expand(2, 4), 1.0),
    "scatter_add": lambda x, i: x.scatter_add(0, i[:, None].expand(2, 4), x[:2]),
    "index_add": lambda x, i: x.index_add(0, i, x[:2]),
    "index_copy": lambda x, i: x.index_copy(0, i, x[:2]),
    "index_fill": lambda x, i: x.index_fill(0, i, 1.0),
    "take": lambda x, i: x.take(i * 3),
    "cross_entropy": lambda x, i: _F.cross_entropy(x[:2], i),
}


@pytest.mark.parametrize("mode", ["strict", "debug"])
@pytest.mark.parametrize("bad", [7, -5, -1], ids=["past_end", "before_start", "last"])
@pytest.mark.parametrize("op", OUT_OF_RANGE)
def test_out_of_range_index_raises_cpus_error(op, bad, mode):
    x, i = torch.zeros(3, 4), torch.tensor([0, bad])
    try:
        expected = OUT_OF_RANGE[op](x, i)
    except (IndexError, RuntimeError) as e:
        expected = e
    with torchtpu.set_eager_mode(mode):
        if isinstance(expected, Exception):
            with pytest.raises(type(expected)) as info:
                OUT_OF_RANGE[op](x.to("tpu"), i.to("tpu"))
            assert str(info.value).splitlines()[0] == str(expected)
        else:  # a negative index some ops take, counted from the end
            assert_same(OUT_OF_RANGE[op](x.to("tpu"), i.to("tpu")), expected)


@pytest.mark.parametrize("bad", [1, -1, 5])
@pytest.mark.parametrize("op", ["index_copy", "index_fill", "index_select", "gather",
                                "index_reduce", "scatter", "index_add"])
def test_a_0d_self_takes_index_0_only_as_cpu(op, bad):
    # CPU indexes a 0-d self as one element (index_fill takes -1 too)
    def run(d):
        x, i, one = torch.zeros((), device=d), torch.tensor([bad], device=d), torch.ones(())
        return {"index_copy": lambda: x.index_copy(0, i, one.to(d)),
                "index_fill": lambda: x.index_fill(0, i, 2.0),
                "index_select": lambda: x.index_select(0, i),
                "gather": lambda: x.gather(0, i[0]),
                "index_reduce": lambda: x.index_reduce(0, i, one.to(d), "prod"),
                "scatter": lambda: x.scatter(0, i[0], 2.0),
                "index_add": lambda: x.index_add(0, i, one.to(d))}[op]()

    try:
        expected = run("cpu")
    except (IndexError, RuntimeError):
        return raises_as_cpu(run, (IndexError, RuntimeError))
    assert_same(run("tpu"), expected)


def test_ignored_target_is_not_out_of_range():
    x = torch.randn(3, 4)
    for target, ignore in (([0, -100, 2], -100), ([0, 9, 2], 9)):
        target = torch.tensor(target)
        assert_same(_F.cross_entropy(x.to("tpu"), target.to("tpu"), ignore_index=ignore),
                    _F.cross_entropy(x, target, ignore_index=ignore))


@pytest.mark.parametrize("op", [
    torch.bitwise_and, torch.bitwise_xor, torch.bitwise_left_shift, torch.gcd, torch.lcm,
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_integer_ops_refuse_floats_as_cpu(op, dtype):
    x = torch.ones(3, dtype=dtype)
    raises_as_cpu(lambda d: op(x.to(d), x.to(d)), NotImplementedError, tpu_kernels=True)


@pytest.mark.parametrize("shift", [
    lambda d: torch.ones(2, device=d) << 1,
    lambda d: torch.ones(2, dtype=torch.int64, device=d) >> torch.ones(2, device=d),
    lambda d: torch.bitwise_left_shift(torch.ones(2, dtype=torch.bool, device=d), True),
], ids=["float", "by_float", "bool"])
def test_shifts_refuse_what_cpu_refuses(shift):
    raises_as_cpu(shift, NotImplementedError, tpu_kernels=True)


def _cat_into_own_input(d):
    x, y = torch.ones(4, 6, device=d), torch.ones(4, 6, device=d)
    torch.cat([x, y], out=y[:2])


def _gather_into_own_input(d):
    x = torch.ones(4, 4, device=d)
    torch.gather(x, 0, torch.zeros(2, 4, dtype=torch.long, device=d), out=x[:2])


def _complex_into_another_dtype(d):
    r = torch.ones(3, dtype=torch.float64, device=d)
    torch.complex(r, r, out=torch.empty(3, dtype=torch.complex64, device=d))


@pytest.mark.parametrize("bad", [_cat_into_own_input, _gather_into_own_input,
                                 _complex_into_another_dtype])
def test_out_checks_as_cpu(bad):
    raises_as_cpu(bad)


@pytest.mark.parametrize("bad", [
    # CPU's kernel for a self of at most one dimension: no negative index, an IndexError
    lambda d: torch.zeros(3, device=d).index_add(0, torch.tensor([5], device=d),
                                                  torch.ones(1, device=d)),
    lambda d: torch.zeros(3, device=d).index_add(0, torch.tensor([-1], device=d),
                                                  torch.ones(1, device=d)),
    lambda d: torch.zeros((), device=d).index_add(0, torch.tensor(2, device=d),
                                                   torch.ones((), device=d)),
    lambda d: torch.zeros(3, 2, device=d).index_add(0, torch.tensor([-1], device=d),
                                                     torch.ones(1, 2, device=d)),
    # copy_: sizes that do not broadcast, a broadcast shape larger than the destination
    lambda d: torch.empty(2, 3, device=d).copy_(torch.ones(4)),
    lambda d: torch.empty(3, device=d).copy_(torch.ones(1, 3)),
    # addmm: self against mat2 first, then mat1 against mat2 (a float64 input to a Linear)
    lambda d: torch.addmm(torch.zeros(4, 8, device=d), torch.ones(4, 16, device=d).double(),
                          torch.ones(16, 8, device=d)),
    lambda d: torch.addmm(torch.zeros(4, 8, device=d).double(),
                          torch.ones(4, 16, device=d).double(), torch.ones(16, 8, device=d)),
], ids=["index_add_1d", "index_add_negative", "index_add_0d", "index_add_2d_negative",
        "copy_sizes", "copy_larger", "addmm_mat1", "addmm_self"])
def test_errors_of_cpus_own_kernels(bad):
    raises_as_cpu(bad, Exception)


@pytest.mark.parametrize("mode", ["strict", "fused"])
@pytest.mark.parametrize("op", [
    lambda a, out: torch.add(a, a, out=out(3)),
    lambda a, out: torch.exp(a, out=out(3)),
    lambda a, out: torch.mm(a[:, None], a[None], out=out(3, 3)),
    lambda a, out: torch.cat([a, a], out=out(6)),
    lambda a, out: torch.max(a, 0, out=(out(), out(dtype=torch.long))),
], ids=["add", "exp", "mm", "cat", "max"])
def test_out_on_another_device_is_refused_as_on_cuda(op, mode):
    with torchtpu.set_eager_mode(mode):
        with pytest.raises(RuntimeError, match="^Expected out tensor to have device tpu:0, "
                                               "but got cpu instead$"):
            op(torch.randn(3, device="tpu"), lambda *shape, **kw: torch.empty(shape, **kw))


def test_out_may_be_an_elementwise_ops_own_input():
    x = torch.arange(4.0)
    t = x.to("tpu")
    torch.add(t, 1, out=t)  # exactly an input: allowed, as on CPU
    assert_same(t, torch.add(x, 1, out=x))


def test_an_unsigned_tensor_takes_a_negative_number_it_can_wrap():
    # c10's checked conversion: -1 into uint8 is 255, as on CPU.
    x = torch.full((2,), -1, dtype=torch.uint8, device="tpu")
    x[1] = -255
    assert x.tolist() == [255, 1]


LINALG_FAILURES = {
    "cholesky of a matrix that is not positive-definite":
        lambda d: torch.linalg.cholesky(-torch.eye(3, device=d)),
    "cholesky, one bad matrix in a batch":
        lambda d: torch.linalg.cholesky(torch.stack([torch.eye(3), -torch.eye(3)]).to(d)),
    "solve with a singular matrix": lambda d: torch.linalg.solve(torch.zeros(2, 2, device=d),
                                                                 torch.ones(2, device=d)),
    "inv of a singular matrix": lambda d: torch.linalg.inv(torch.tensor([[1.0, 2.0], [2.0, 4.0]],
                                                                        device=d)),
    "lu_factor of a singular matrix": lambda d: torch.linalg.lu_factor(torch.zeros(2, 2, device=d)),
}


@pytest.mark.parametrize("case", sorted(LINALG_FAILURES))
def test_linalg_failures_raise_as_on_cpu(case):
    # LinAlgError (a RuntimeError) with CPU's message; the _ex forms report LAPACK's info.
    with pytest.raises(RuntimeError) as cpu:
        LINALG_FAILURES[case]("cpu")
    with pytest.raises(RuntimeError) as tpu:
        LINALG_FAILURES[case]("tpu")
    assert tpu.type is cpu.type and str(tpu.value) == str(cpu.value)


def test_linalg_ex_forms_report_lapacks_info():
    singular = torch.tensor([[1.0, 2.0], [2.0, 4.0]])
    for device in ("cpu", "tpu"):
        m = singular.to(device)
        got = [torch.linalg.cholesky_ex(-torch.eye(3, device=device)).info.item(),
               torch.linalg.inv_ex(m).info.item(), torch.linalg.lu_factor_ex(m).info.item(),
               torch.linalg.solve_ex(torch.zeros(2, 2, device=device),
                                     torch.ones(2, device=device)).info.item()]
        assert got == [1, 2, 2, 1]


def test_linalg_ex_forms_of_empty_matrices_succeed():
    for device in ("cpu", "tpu"):
        empty = torch.empty(2, 0, 0, device=device)
        assert torch.linalg.cholesky_ex(empty).info.tolist() == [0, 0]
        assert torch.linalg.inv_ex(empty).info.tolist() == [0, 0]


@pytest.mark.parametrize("shape, pad, mode", [
    ((1, 1, 4), (5, 5), "reflect"), ((1, 1, 4), (4, 0), "reflect"),
    ((1, 1, 4, 4), (1, 1, 4, 1), "reflect"), ((1, 1, 4, 4, 4), (0, 0, 0, 0, 4, 0), "reflect"),
    ((1, 2, 0), (1, 1), "reflect"), ((1, 2, 0), (1, 1), "replicate"),
])
def test_padding_past_the_input_raises_cpus_error(shape, pad, mode):
    # PyTorch's decompositions would read past the input (reflecting too far) or fail
    # inside; its meta kernels check first, worded as CPU's.
    raises_as_cpu(lambda d: torch.nn.functional.pad(torch.zeros(shape, device=d), pad,
                                                     mode=mode))


@pytest.mark.parametrize("bad", [
    lambda d: torch.nn.functional.adaptive_avg_pool2d(torch.zeros(1, 3, 0, 4, device=d), 2),
    lambda d: torch.nn.functional.adaptive_avg_pool1d(torch.zeros(1, 3, 0, device=d), 2),
    lambda d: torch.nn.functional.adaptive_avg_pool3d(torch.zeros(1, 3, 4, 0, 4, device=d), 2),
    lambda d: torch.nn.functional.adaptive_max_pool2d(torch.zeros(1, 3, 0, 4, device=d), 2),
    lambda d: torch.nn.functional.nll_loss(torch.zeros(2, 3, device=d),
                                           torch.zeros(2, dtype=torch.long, device=d),
                                           weight=torch.ones(4, device=d)),
    lambda d: torch.nn.functional.pixel_shuffle(torch.zeros(2, 6, 3, 4, device=d), 2),
    lambda d: torch.nn.functional.pixel_shuffle(torch.zeros(6, 4, device=d), 2),
    lambda d: torch.nn.functional.pixel_unshuffle(torch.zeros(2, 6, 3, 4, device=d), 2),
    lambda d: torch.nn.functional.pixel_unshuffle(torch.zeros(2, 6, 4, 5, device=d), 2),
    lambda d: torch.nn.functional.grid_sample(torch.zeros(1, 1, 3, 3, device=d),
                                              torch.zeros(1, 3, 3, 3, device=d)),
    lambda d: torch.nn.functional.grid_sample(torch.zeros(2, 1, 3, 3, device=d),
                                              torch.zeros(1, 3, 3, 2, device=d)),
    lambda d: torch.nn.functional.grid_sample(torch.zeros(1, 1, 0, 3, device=d),
                                              torch.zeros(1, 3, 3, 2, device=d)),
    lambda d: torch.nn.functional.grid_sample(
        torch.zeros(1, 1, 3, 3, device=d), torch.zeros(1, 3, 3, 2, dtype=torch.float64,
                                                       device=d)),
], ids=["adaptive_avg2d_empty", "adaptive_avg1d_empty", "adaptive_avg3d_empty",
        "adaptive_max2d_empty", "nll_weight", "pixel_shuffle_channels", "pixel_shuffle_2d",
        "pixel_unshuffle_height", "pixel_unshuffle_width", "grid_last_dim", "grid_batch",
        "grid_empty_input", "grid_dtype"])
def test_cpus_message_where_meta_words_it_otherwise(bad):
    # Python meta kernels assert (AssertionError), print torch.Size, or check nothing.
    raises_as_cpu(bad)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("target", [torch.int64, torch.bool])
@pytest.mark.parametrize("loss", ["bce", "bce_with_logits"])
def test_binary_cross_entropy_refuses_targets_of_another_dtype(loss, target, reduction):
    # Multi-hot labels made with randint (Hugging Face's multi_label_classification): CPU
    # refuses them; PyTorch's decompositions took them (an int64 loss, with reduction none).
    x = torch.linspace(-2, 2, 8).reshape(2, 4)
    labels = torch.tensor([[0, 1, 1, 0], [1, 0, 0, 1]], dtype=target)
    if loss == "bce":
        raises_as_cpu(lambda d: torch.nn.functional.binary_cross_entropy(
            torch.sigmoid(x).to(d), labels.to(d), reduction=reduction))
    else:
        raises_as_cpu(lambda d: torch.nn.functional.binary_cross_entropy_with_logits(
            x.to(d), labels.to(d), reduction=reduction))


def _ints(d):
    return torch.zeros(4, dtype=torch.int32, device=d), torch.tensor([0, 2], device=d)


@pytest.mark.parametrize("bad", [
    lambda d: _ints(d)[0].__setitem__(_ints(d)[1], torch.tensor([1.5, 2.5], device=d)),
    lambda d: _ints(d)[0].__setitem__(_ints(d)[1], torch.tensor(2.5, device=d)),
    lambda d: _ints(d)[0].index_put_((_ints(d)[1],), torch.tensor([1, 2], device=d), True),
    lambda d: _ints(d)[0].index_add_(0, _ints(d)[1], torch.tensor([1.5, 2.5], device=d)),
    lambda d: _ints(d)[0].index_copy_(0, _ints(d)[1], torch.tensor([1.5, 2.5], device=d)),
    lambda d: torch.tensor([1, 2, 3], device=d).std(),
    lambda d: torch.tensor([1, 2, 3], device=d).var(0),
    lambda d: torch.var_mean(torch.tensor([True, False], device=d)),
], ids=["setitem_float", "setitem_0d_float", "index_put_long", "index_add", "index_copy",
        "std_int", "var_int", "var_mean_bool"])
def test_dtype_checks_cpu_makes(bad):
    # x_int[idx] = float values truncated silently; var/std of integers returned integers.
    raises_as_cpu(bad)


@pytest.mark.parametrize("bad", [
    lambda d: torch.nn.functional.cross_entropy(torch.zeros(2, 3, device=d),
                                                torch.zeros(2, dtype=torch.int32, device=d)),
    lambda d: torch.nn.functional.cross_entropy(
        torch.zeros(2, 3, 4, 4, device=d), torch.zeros(2, 4, 4, dtype=torch.uint8, device=d)),
], ids=["int32", "uint8_2d"])
def test_nll_loss_targets_are_long_or_byte_as_on_cpu(bad):
    raises_as_cpu(bad)


def test_nll_loss_takes_byte_targets():
    x, target = torch.linspace(-1, 1, 6).reshape(2, 3), torch.tensor([0, 2], dtype=torch.uint8)
    on_tpu = x.to("tpu").requires_grad_()
    loss = torch.nn.functional.cross_entropy(on_tpu, target.to("tpu"))
    loss.backward()
    cpu = x.clone().requires_grad_()
    expected = torch.nn.functional.cross_entropy(cpu, target)
    expected.backward()
    assert_same(loss, expected)
    assert_same(on_tpu.grad, cpu.grad)


@pytest.mark.parametrize("bad", [
    lambda d: torch.tensor([10, -5], dtype=torch.int8, device=d).clamp(max=1000),
    lambda d: torch.tensor([10, 250], dtype=torch.uint8, device=d).clamp(0, 300),
    lambda d: torch.clamp_min(torch.tensor([1], dtype=torch.int16, device=d), -2**20),
    lambda d: torch.full_like(torch.zeros(2, dtype=torch.int8, device=d), 300),
    lambda d: torch.full_like(torch.zeros(2, device=d), 300, dtype=torch.int8),
    lambda d: torch.full_like(torch.zeros(2, dtype=torch.float16, device=d), 1e6),
    lambda d: torch.zeros(2, dtype=torch.uint8, device=d).new_full((3,), 256),
    lambda d: torch.tensor([2], dtype=torch.int8, device=d) ** 2**40,
    lambda d: torch.tensor([2], dtype=torch.uint8, device=d).pow(300),
], ids=["clamp_int8_max", "clamp_uint8_both", "clamp_int16_min", "full_like_int8",
        "full_like_dtype", "full_like_half", "new_full_uint8", "pow_int8", "pow_uint8"])
def test_a_number_out_of_an_integer_tensors_range(bad):
    # The number converts to the tensor's dtype, checked (it wrapped: clamp(max=1000) of
    # [10, -5] gave -24, full_like(int8, 300) 44, 2 ** 2**40 1).
    raises_as_cpu(bad)


def test_numbers_in_range_or_floats_for_integer_tensors():
    x = torch.tensor([10, -5, 100], dtype=torch.int8)
    for op in (lambda t: t.clamp(-3, 3), lambda t: t.clamp(max=1.5),
               lambda t: t.to(torch.uint8).clamp(min=-1),
               lambda t: torch.full_like(t, 300, dtype=torch.float32),
               lambda t: torch.full_like(t.to(torch.uint8), -1), lambda t: t.pow(True),
               lambda t: t.to(torch.uint8) ** 255, lambda t: t.new_full((2,), 2.5)):
        assert_same(op(x.to("tpu")), op(x))


def test_a_bool_mask_takes_a_number_of_another_dtype():
    x = torch.zeros(4, dtype=torch.int32)
    mask = torch.tensor([True, False, True, False])
    on_tpu = x.to("tpu")
    on_tpu[mask.to("tpu")] = torch.tensor(2.5, device="tpu")
    x[mask] = torch.tensor(2.5)
    assert_same(on_tpu, x)


@pytest.mark.parametrize("target", [[0, 5], [0, -1]])
def test_multi_margin_loss_target_out_of_range(target):
    with pytest.raises(RuntimeError, match="^target out of range$"):
        torch.nn.functional.multi_margin_loss(torch.zeros(2, 3, device="tpu"),
                                              torch.tensor(target, device="tpu"))


def _t(*shape, dtype=torch.float32, device="cpu"):
    return torch.linspace(0.5, 2.0, math.prod(shape), dtype=dtype).reshape(shape).to(device)


@pytest.mark.parametrize("bad", [
    lambda d: torch.nn.BatchNorm1d(3).to(d)(_t(4, 3, dtype=torch.float64, device=d)),
    lambda d: torch.nn.BatchNorm1d(3).to(d).eval()(_t(4, 3, dtype=torch.float64, device=d)),
    lambda d: F.layer_norm(_t(4, 3, dtype=torch.float64, device=d), (3,), _t(3, device=d)),
    lambda d: F.layer_norm(_t(4, 3, device=d), (3,), _t(3, dtype=torch.float64, device=d)),
    lambda d: F.layer_norm(_t(4, 3, device=d), (3,), _t(3, device=d),
                           _t(3, dtype=torch.bfloat16, device=d)),
    lambda d: F.group_norm(_t(2, 4, dtype=torch.float64, device=d), 2, _t(4, device=d)),
    lambda d: F.batch_norm(_t(4, 3, dtype=torch.float16, device=d), _t(3, device=d),
                           _t(3, device=d), _t(3, dtype=torch.float16, device=d),
                           training=True),
], ids=["batch_norm_double_input", "batch_norm_eval", "layer_norm_double_input",
        "layer_norm_double_weight", "layer_norm_bias_unlike_weight", "group_norm",
        "batch_norm_stats_unlike_weight"])
def test_norms_refuse_mixed_dtypes_as_cpu(bad):
    # A float64 batch (numpy features) into float32 norms ran in float64 to the next Linear.
    raises_as_cpu(bad)


def test_norms_take_float32_parameters_for_half_inputs():
    # AMP's and "BatchNorm kept in float32" recipes: CPU's one mixed case.
    for dtype in (torch.bfloat16, torch.float16):
        for norm in (lambda x, d: F.batch_norm(x, _t(3, device=d), _t(3, device=d),
                                               _t(3, device=d), _t(3, device=d), True),
                     lambda x, d: F.layer_norm(x, (3,), _t(3, device=d), _t(3, device=d))):
            x = _t(4, 3, dtype=dtype)
            assert_same(norm(x.to("tpu"), "tpu"), norm(x, "cpu"))


@pytest.mark.parametrize("bad", [
    lambda d: torch.ones(2, 3, device=d).softmax(2),
    lambda d: F.softmax(torch.ones(2, 3, device=d), dim=-3),
    lambda d: torch.tensor(1.0, device=d).softmax(1),
    lambda d: torch.ones(2, 3, device=d).sort(dim=2),
    lambda d: torch.ones(2, 3, device=d).argsort(dim=-3, stable=True),
    lambda d: torch.ones(2, 3, device=d).index_select(2, torch.tensor([0], device=d)),
    lambda d: torch.ones(2, 3, device=d).index_select(0, torch.tensor([[0]], device=d)),
], ids=["softmax", "softmax_negative", "softmax_0d", "sort", "argsort_stable", "index_select",
        "index_select_matrix"])
def test_a_dim_out_of_rangeraises_as_cpu(bad):
    # These took any dim modulo the rank: softmax(dim=2) of a matrix ran over dim 0.
    raises_as_cpu(bad, IndexError)


def test_dims_left_to_their_defaults_or_given_by_keyword():
    # The dim check read a dim the call had left out (sort's: an IndexError).
    x = torch.tensor([[3, 1, 2], [0, 5, 4]])
    for op in (torch.sort, torch.argsort, lambda t: torch.sort(t, dim=0),
               lambda t: torch.sort(t, stable=True), lambda t: t.argmax(), lambda t: t.max(),
               lambda t: torch.unique(t), lambda t: t.float().softmax(-1)):
        assert_same(op(x.to("tpu")), op(x))


def test_histc_of_integers_as_on_cuda():
    # CPU refuses them; transformers' MoE layers count experts so on any other device.
    experts = torch.tensor([0, 2, 2, 1, 3, 0], dtype=torch.int32)
    assert_same(torch.histc(experts.to("tpu"), bins=4, min=0, max=3),
                torch.histc(experts.float(), bins=4, min=0, max=3).int())


def test_stack_names_both_sizes():
    raises_as_cpu(lambda d: torch.stack([torch.zeros(3, device=d), torch.zeros(3, device=d),
                                          torch.zeros(5, device=d)]))


@pytest.mark.parametrize("bad", [
    lambda d: torch.nn.ConvTranspose2d(3, 4, 3).to(d)(_t(1, 2, 5, 5, device=d)),
    lambda d: F.conv_transpose2d(_t(1, 3, 5, 5, device=d), _t(4, 2, 3, 3, device=d), groups=2),
    lambda d: F.conv2d(_t(1, 3, 5, 5, device=d), _t(4, 3, 3, 3, device=d), _t(3, device=d)),
    lambda d: F.conv2d(_t(1, 3, 5, 5, device=d), _t(4, 3, 3, 3, device=d), _t(4, 1, device=d)),
    lambda d: F.conv_transpose2d(_t(1, 4, 5, 5, device=d), _t(4, 2, 3, 3, device=d),
                                 _t(2, device=d), groups=2),
    lambda d: F.conv_transpose2d(_t(1, 1, 5, 5, device=d), _t(1, 1, 3, 3, device=d),
                                 output_padding=1),
    lambda d: F.conv_transpose1d(_t(1, 1, 5, device=d), _t(1, 1, 3, device=d), stride=2,
                                 output_padding=2),
    lambda d: F.conv_transpose3d(_t(1, 1, 4, 4, 4, device=d), _t(1, 1, 3, 3, 3, device=d),
                                 stride=2, output_padding=(0, 2, 0)),
], ids=["transposed_channels", "transposed_groups_channels", "bias_size", "bias_2d",
        "transposed_bias", "output_padding", "output_padding_1d", "output_padding_3d"])
def test_convolution_checks_as_cpu(bad):
    # These reached XLA (its own wording) or ran: a bias of shape (4, 1), an output_padding
    # as large as the stride.
    raises_as_cpu(bad)


@pytest.mark.parametrize("inputs, targets, which", [
    ([2.0, -1.0], [1.0, 0.0], "input"), ([float("nan"), 0.5], [1.0, 0.0], "input"),
    ([0.5, 0.5], [1.5, 0.0], "target")])
def test_bce_refuses_probabilities_outside_0_1(inputs, targets, which):
    # Logits into BCELoss gave NaN; CPU raises (cuda asserts).
    def loss(device):
        return torch.nn.BCELoss()(torch.tensor(inputs, device=device),
                                  torch.tensor(targets, device=device))

    for device in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match=f"all elements of {which} should be between 0"):
            loss(device)


def test_variance_without_degrees_of_freedom_warns_as_cpu():
    # (a shape no other test reduces: the warning comes when the op is first compiled)
    x = torch.linspace(0, 1, 15).reshape(5, 1, 3)
    for name, op in (("std", lambda t: t.std(1)), ("var", lambda t: t.var(1, correction=3)),
                     ("var_mean", lambda t: torch.var_mean(t, (0, 2), correction=15)[0]),
                     ("std_mean", lambda t: torch.std_mean(t, 1, correction=2)[0])):
        for device in ("cpu", "tpu"):
            with pytest.warns(UserWarning, match=rf"^{name}\(\): degrees of freedom is <= 0"):
                out = op(x.to(device))
        assert_same(out, op(x))


@pytest.mark.parametrize("case", ["key_padding_mask", "embed_dim"])
def test_attention_fast_path_checks_as_cpu(case):
    # In inference the fast path's own checks speak (tpu gave a view's or a matmul's error).
    def bad(device):
        torch.manual_seed(0)
        mha = torch.nn.MultiheadAttention(8, 2, batch_first=True).to(device).eval()
        x = _t(2, 4, 8 if case == "key_padding_mask" else 6, device=device)
        mask = torch.zeros(2, 5, dtype=torch.bool, device=device)
        with torch.no_grad():
            mha(x, x, x, key_padding_mask=mask if case == "key_padding_mask" else None)

    raises_as_cpu(bad)


_INT = torch.int64


@pytest.mark.parametrize("bad", [
    lambda d: torch.ones(3, 4, device=d).masked_select(torch.tensor([True, False], device=d)),
    lambda d: torch.unique(torch.tensor([1, 2], device=d), dim=1),
    lambda d: torch.ones(3, device=d).clamp(),
    lambda d: torch.ones(0, device=d).max(),
    lambda d: torch.ones(0, 3, device=d).min(0),
    lambda d: torch.ones(0, 3, device=d).argmax(0),
    lambda d: torch.ones(3, dtype=torch.bool, device=d).floor(),
    lambda d: torch.ones(3, dtype=_INT, device=d).round(decimals=1),
    lambda d: torch.ones(3, dtype=_INT, device=d).lerp(torch.ones(3, dtype=_INT, device=d), 0.5),
    lambda d: torch.randn(3, dtype=_INT, device=d),
    lambda d: torch.rand_like(torch.ones(3, dtype=_INT, device=d)),
    lambda d: torch.ones(3, dtype=torch.int32, device=d).exponential_(),
    lambda d: F.dropout(torch.ones(3, dtype=_INT, device=d), 0.5),
    lambda d: torch.median(torch.zeros(3, 0, device=d), -1),
    lambda d: torch.nanmedian(torch.zeros(3, 0, dtype=torch.bool, device=d), 1),
    lambda d: torch.median(torch.tensor([True, False], device=d)),
    lambda d: torch.nanmedian(torch.tensor([True, False], device=d), 0),
    lambda d: torch.tensor([True, False], device=d).kthvalue(1),
    lambda d: torch.tensor([True, False], device=d).topk(1),
    lambda d: torch.ones(2, dtype=torch.bool, device=d) // torch.ones(2, dtype=torch.bool,
                                                                       device=d),
    lambda d: torch.div(torch.ones(2, dtype=torch.bool, device=d), True, rounding_mode="trunc"),
    lambda d: torch.zeros(2, dtype=torch.bool, device=d) % torch.zeros(2, dtype=torch.bool,
                                                                       device=d),
    lambda d: torch.fmod(torch.zeros(2, dtype=torch.bool, device=d), False),
    lambda d: torch.tensor([1 + 2j, 3 - 1j], device=d).clamp(-1, 1),
    lambda d: torch.tensor([1 + 2j], device=d).clamp_min(0),
    lambda d: torch.maximum(torch.tensor([1j], device=d), torch.tensor([1j], device=d)),
    lambda d: torch.tensor([1j, 2], device=d).max(),
    lambda d: torch.tensor([1j, 2], device=d).amax(),
    lambda d: torch.tensor([1j, 2], device=d).max(0),
    lambda d: torch.tensor([1j, 2], device=d).argmax(),
    lambda d: torch.tensor([1j, 2], device=d).sort(),
    lambda d: torch.tensor([1j, 2], device=d).topk(1),
    lambda d: torch.tensor([1j, 2], device=d).cummax(0),
    lambda d: torch.tensor([1j, 2], device=d) > 1,
    lambda d: torch.tensor([1j, 2], device=d).median(),
    lambda d: torch.std_mean(torch.ones(3, dtype=_INT, device=d)),
], ids=["masked_select_shapes", "unique_dim", "clamp_without_bounds", "max_of_nothing",
        "min_over_empty_dim", "argmax_over_empty_dim", "floor_bool", "round_decimals_int",
        "lerp_int", "randn_int", "rand_like_int", "exponential_int",
        "dropout_int", "median_over_empty_dim", "nanmedian_empty_before_bool", "median_bool",
        "nanmedian_dim_bool", "kthvalue_bool", "topk_bool", "floor_divide_bool",
        "trunc_divide_bool", "remainder_bool_by_zero", "fmod_bool_by_zero", "clamp_complex",
        "clamp_min_complex", "maximum_complex",
        "max_complex", "amax_complex", "max_dim_complex", "argmax_complex", "sort_complex",
        "topk_complex", "cummax_complex", "gt_complex", "median_complex", "std_mean_int"])
def test_what_cpu_refuses_is_refused_with_its_error(bad):
    # Each of these computed something (or raised JAX's or numpy's error) on tpu.
    raises_as_cpu(bad, Exception)


def test_adaptive_pool_to_an_empty_size():
    x = _t(1, 2, 4, 4)
    assert_same(F.adaptive_avg_pool2d(x.to("tpu"), (0, 2)), F.adaptive_avg_pool2d(x, (0, 2)))


@pytest.mark.parametrize("in_place", [False, True])
def test_masked_scatter_needs_a_source_element_for_each_selected_one(in_place):
    # (tpu repeated the last source value; transformers' image-token merges use it)
    def scatter(device, n):
        x = torch.zeros(2, 3, device=device)
        mask = torch.tensor([True, False, True], device=device)
        source = torch.arange(float(n), device=device)
        return x.masked_scatter_(mask, source) if in_place else x.masked_scatter(mask, source)

    raises_as_cpu(lambda d: scatter(d, 3))
    assert_same(scatter("tpu", 4), scatter("cpu", 4))


def test_a_meta_kernels_message_in_parts_reads_as_one():
    # addcdiv's meta kernel gives its message as a tuple of strings: it printed as a tuple.
    ints = torch.ones(3, dtype=torch.int64, device="tpu")
    with pytest.raises(RuntimeError) as info:
        torch.addcdiv(ints, ints, ints)
    assert str(info.value).startswith("Integer division with addcdiv is no longer supported")


def test_deterministic_mode_takes_cpus_deterministic_kernels():
    # Their meta kernels raise cuda's determinism alerts: CPU's kernels have none to raise.
    x = torch.tensor([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]])
    ops = [lambda t: torch.median(t, 1), lambda t: torch.nanmedian(t, 1),
           lambda t: torch.mode(t, 1), lambda t: torch.histc(t, bins=3)]
    torch.use_deterministic_algorithms(True)
    try:
        for op in ops:
            assert_same(op(x.to("tpu")), op(x))
        assert torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(False)


@pytest.mark.parametrize("bad", [
    lambda d: torch.tensor([True], device=d) - torch.tensor([True], device=d),
    lambda d: torch.tensor([True], device=d) - True,
    lambda d: torch.tensor([1.0], device=d) - True,
    lambda d: torch.rsub(torch.tensor([True], device=d), torch.tensor([True], device=d)),
    lambda d: torch.where(torch.tensor([1, 0], device=d), 1.0, 0.0),
    lambda d: torch.where(torch.tensor([1.0, 0.0], device=d), torch.ones(3, device=d), 0.0),
    lambda d: torch.topk(torch.tensor([1.0, 2.0], device=d), 3),
    lambda d: torch.topk(torch.tensor([True], device=d), 3),
], ids=["bools", "bool_number", "a_bool_number", "rsub", "where_long", "where_float",
        "topk_k", "topk_k_first"])
def test_checks_worded_and_ordered_as_cpus(bad):
    raises_as_cpu(bad)
