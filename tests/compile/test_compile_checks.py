"""torch.compile(backend="tpu") checks the values CPU's kernels check (an index out of range,
BCE's probabilities, random ops' parameter tensors, integer divisors, ...) inside the graph's
program, and the first sync point after it raises CPU's exception and message, where XLA
alone would clamp the index (or give NaN, or a value) in silence."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from compile_testlib import count, fresh_dynamo  # noqa: F401  (autouse fixture)
from conftest import TPU
from value_check_cases import CASES, cpu_error

from torchtpu.eager import deferred_checks

# Decomposed by AOTAutograd before the graph reaches the backend, as for inductor (whose BCE
# gives NaN too): their graphs hold no node to check.
_DECOMPOSED = {"binary_cross_entropy of logits", "max_unpool2d index outside the output",
               "multilabel_margin_loss target past the classes",
               "multilabel_margin_loss target below -1"}


@pytest.mark.parametrize("name", [name for name in CASES if name not in _DECOMPOSED])
def test_an_invalid_value_raises_cpus_error_at_the_next_sync_point(name):
    fn, x, index = CASES[name]
    error, message = cpu_error(fn, x, index)
    compiled = torch.compile(fn, backend="tpu")
    with pytest.raises(error) as caught:
        compiled(x.to(TPU), index.to(TPU)).item()
    assert str(caught.value) == message
    assert torch.ones(2).to(TPU).sum().item() == 2  # raised once; the device goes on


def test_a_compiled_training_step_reports_a_bad_target_at_loss_item():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(50, 8), torch.nn.Linear(8, 50)).to(TPU)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    @torch.compile(backend="tpu")
    def loss_of(ids, targets):
        return F.cross_entropy(model(ids).flatten(0, 1), targets.flatten())

    ids = torch.randint(0, 50, (4, 6))
    for targets in (ids, ids):
        loss = loss_of(ids.to(TPU), targets.to(TPU))
        loss.backward()
        opt.step()
        opt.zero_grad()
        loss.item()
    assert count("compile", "graph:forward") == 1  # the checks add no recompile
    bad = ids.clone()
    bad[2, 3] = 50
    loss = loss_of(ids.to(TPU), bad.to(TPU))
    with pytest.raises(IndexError, match="^Target 50 is out of bounds.$") as caught:
        loss.item()
    line = loss_of.__wrapped__.__code__.co_firstlineno + 2  # (the decorator's line is first)
    assert str(caught.value.__cause__) == (
        f"aten.nll_loss_forward.default in a torch.compile graph, called at {__file__}:{line} "
        "(in loss_of) (checked at the first sync point after the graph ran)")


def test_valid_values_raise_nothing_and_give_cpus_results():
    def f(w, i, t):
        return F.cross_entropy(F.embedding(i, w), t, ignore_index=-100) + w[-1].sum()

    w, i, t = torch.randn(10, 5), torch.tensor([0, 9, 3]), torch.tensor([4, -100, 0])
    out = torch.compile(f, backend="tpu")(w.to(TPU), i.to(TPU), t.to(TPU))
    torch.tpu.synchronize()
    assert out.item() == pytest.approx(f(w, i, t).item(), rel=1e-6)


def test_a_check_the_caller_reads_nothing_of_is_raised_by_synchronize():
    @torch.compile(backend="tpu")
    def pick(x, i):
        return x[i] * 2

    out = pick(torch.arange(4.0).to(TPU), torch.tensor([1, 4]).to(TPU))
    with pytest.raises(IndexError, match="index 4 is out of bounds for dimension 0 with size 4"):
        torch.tpu.synchronize()
    del out
    torch.tpu.synchronize()  # reported once


def test_dynamic_shapes_check_each_shapes_program():
    pick = torch.compile(lambda x, i: x[i], backend="tpu", dynamic=True)
    x = torch.randn(6)
    assert torch.equal(pick(x.to(TPU), torch.tensor([1, 2]).to(TPU)).cpu(), x[[1, 2]])
    assert torch.equal(pick(x.to(TPU), torch.tensor([1, 2, 3]).to(TPU)).cpu(), x[[1, 2, 3]])
    with pytest.raises(IndexError, match="index 9 is out of bounds for dimension 0 with size 6"):
        pick(x.to(TPU), torch.tensor([1, 9, 3]).to(TPU)).cpu()


def test_checks_off_read_nothing(monkeypatch):
    monkeypatch.setenv("TORCHTPU_CHECK_INDICES", "0")
    out = torch.compile(lambda w, i: F.embedding(i, w), backend="tpu")(
        torch.randn(3, 2).to(TPU), torch.tensor([5]).to(TPU))
    assert out.cpu().isnan().all()  # XLA's fill value for a row out of range


def test_a_loop_that_never_syncs_still_reports_and_keeps_no_backlog():
    pick = torch.compile(lambda x, i: x[i] + 1, backend="tpu")
    x = torch.arange(4.0).to(TPU)
    out = pick(x, torch.tensor([7]).to(TPU))
    with pytest.raises(IndexError, match="index 7 is out of bounds"):
        for _ in range(200):
            out = pick(out, torch.tensor([0]).to(TPU))
    for _ in range(200):
        out = pick(out, torch.tensor([0]).to(TPU))
    assert len(deferred_checks._running) <= deferred_checks._MAX_UNREAD


def test_an_integer_division_by_the_number_zero_raises_as_it_compiles():
    with pytest.raises(RuntimeError, match="^ZeroDivisionError"):  # (jax's note follows)
        torch.compile(lambda a: a // 0, backend="tpu")(torch.tensor([3, 4]).to(TPU))


@pytest.mark.parametrize("value", [-3, 0])
def test_an_integer_division_by_a_captured_cpu_tensor_is_checked_in_the_program(value):
    # a 0-d CPU constant: its value is the program's (reading it while tracing failed)
    divisor = torch.tensor(value)
    fmod = torch.compile(lambda a: torch.fmod(a, divisor), backend="tpu")
    a = torch.tensor([5, 7])
    if value:
        assert torch.equal(fmod(a.to(TPU)).cpu(), torch.fmod(a, divisor))
    else:
        with pytest.raises(RuntimeError, match="^ZeroDivisionError"):
            fmod(a.to(TPU)).cpu()


@pytest.mark.parametrize("classes", [[0, 3], [-1, 1]])
def test_one_hot_classes_out_of_range_raise_inductors_error(classes):
    def f(x):
        return F.one_hot(x, 3) * 2

    with pytest.raises(RuntimeError) as on_cpu:
        torch.compile(f, backend="inductor")(torch.tensor(classes))
    compiled = torch.compile(f, backend="tpu")
    assert torch.equal(compiled(torch.tensor([2, 0]).to(TPU)).cpu(), f(torch.tensor([2, 0])))
    with pytest.raises(RuntimeError) as on_tpu:
        compiled(torch.tensor(classes).to(TPU)).cpu()
    assert str(on_tpu.value) == str(on_cpu.value)


def test_a_graphs_own_assert_raises_its_message_at_the_next_sync_point():
    @torch.compile(backend="tpu")
    def f(x):
        torch._assert_async(x.sum() > 0, "the sum must be positive")
        return x + 1

    assert torch.equal(f(torch.ones(2).to(TPU)).cpu(), torch.full((2,), 2.0))
    with pytest.raises(RuntimeError, match="^the sum must be positive$"):
        f(-torch.ones(2).to(TPU)).cpu()


def test_a_functional_assert_returns_its_token_and_raises_at_the_next_sync_point():
    @torch.compile(backend="tpu")
    def f(x):
        token = torch.ops.aten._make_dep_token(device=x.device)
        token = torch.ops.aten._functional_assert_async.msg(x.min() > 0, "x must be positive",
                                                           token)
        return x + 1, token  # (an unused token lets AOTAutograd drop the assert, as aot_eager)

    out, token = f(torch.ones(2).to(TPU))
    assert torch.equal(out.cpu(), torch.full((2,), 2.0)) and token.shape == ()
    with pytest.raises(RuntimeError, match="^x must be positive$"):
        f(-torch.ones(2).to(TPU))[0].cpu()
