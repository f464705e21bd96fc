"""Fused eager checks an op's index values (and BCE's probabilities, random ops' parameter
tensors, integer divisors, masked_scatter's source, searchsorted's sorter, max_unpool's
indices, histc's range, segment_reduce's lengths) at the sync point that runs it: CPU's
exception and message, where XLA alone would clamp the index (or give NaN, or a value) in
silence."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import TPU
from value_check_cases import CASES, cpu_error

import torchtpu


@pytest.fixture
def fused():
    with torchtpu.set_eager_mode("fused"):
        yield


# multinomial draws on the host's values (it synchronises): its checks run then, as strict's
_AT_ONCE = {name for name in CASES if name.startswith("multinomial")}


@pytest.mark.parametrize("name", CASES)
def test_an_invalid_value_raises_cpus_error_at_the_sync_point(fused, name):
    fn, x, index = CASES[name]
    error, message = cpu_error(fn, x, index)
    with pytest.raises(error) as caught:
        result = fn(x.to(TPU), index.to(TPU))  # recorded: nothing has run yet
        assert name not in _AT_ONCE
        result.item()
    assert str(caught.value) == message
    # raised once; the device goes on
    assert torch.ones(2).to(TPU).sum().item() == 2


def test_a_draw_read_by_itself_raises_its_check():
    # (its check was recorded after the draw, which had run: only a later sync raised it)
    with torchtpu.set_eager_mode("fused"), pytest.raises(RuntimeError, match="element < 0"):
        torch.multinomial(torch.tensor([-1.0, 2.0]).to(TPU), 1).cpu()


@pytest.mark.parametrize("classes, message", [
    ([1, 3], "Class values must be smaller than num_classes."),
    ([3, -1], "Class values must be non-negative.")])
def test_one_hot_classes_out_of_range_raise_at_the_sync_point(fused, classes, message):
    hot = F.one_hot(torch.tensor(classes).to(TPU), 3)
    with pytest.raises(RuntimeError, match=f"^{message}$"):
        hot.cpu()
    assert F.one_hot(torch.tensor([2, 0]).to(TPU), 3).tolist() == [[0, 0, 1], [1, 0, 0]]


def test_indices_in_range_masks_and_ignored_targets_raise_nothing(fused):
    x = torch.arange(6.0).reshape(2, 3)
    assert x.to(TPU)[torch.tensor([-1, 0]).to(TPU)].sum().item() == 15  # -1: the last row
    with pytest.warns(UserWarning, match="uint8"):
        assert x.to(TPU)[torch.tensor([1, 0], dtype=torch.uint8).to(TPU)].sum().item() == 3
    logits, target = torch.randn(3, 5), torch.tensor([1, -100, 4])
    assert F.cross_entropy(logits.to(TPU), target.to(TPU)).item() == pytest.approx(
        F.cross_entropy(logits, target).item(), rel=1e-5)


def test_the_error_names_the_op_and_the_users_line(fused):
    # the sync point's traceback shows where the value was read; a note says where the op ran
    weight = torch.randn(10, 4).to(TPU)

    def lookup(ids):
        return F.embedding(ids, weight).sum()

    total = lookup(torch.tensor([3, 12]).to(TPU))
    with pytest.raises(IndexError, match="^index out of range in self$") as caught:
        total.item()
    line = lookup.__code__.co_firstlineno + 1
    assert str(caught.value.__cause__) == (
        f"aten.embedding.default, called at {__file__}:{line} (in lookup) "
        "(fused eager checks values when a sync point runs the op)")


def test_a_check_outside_the_forced_value_is_raised_by_synchronize(fused):
    weight = torch.randn(10, 4).to(TPU)
    bad = F.embedding(torch.tensor([11]).to(TPU), weight)
    with pytest.raises(IndexError, match="index out of range in self"):
        torch.tpu.synchronize()
    del bad
    torch.tpu.synchronize()  # reported once
    # In the part of the trace a forced value does not need (run after it, without
    # waiting): that sync point reports it if its program has finished, else the next.
    total = weight.sum()
    rest = F.embedding(torch.tensor([5]).to(TPU) + 6, weight)  # (an index `total` never reads)
    for _ in range(80):
        rest = rest * 1.5
    raised = 0
    for sync in (total.item, torch.tpu.synchronize):
        try:
            sync()
        except IndexError:
            raised += 1
    assert raised == 1


def test_a_training_loop_with_checks_compiles_one_program_per_step_shape(fused):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(50, 8), torch.nn.Linear(8, 50)).to(TPU)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(4):
        ids = torch.randint(0, 50, (4, 6), generator=gen).to(TPU)
        loss = F.cross_entropy(model(ids).flatten(0, 1), ids.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
        if len(losses) == 2:
            torchtpu.reset_metrics()
    assert torchtpu.metrics()["cache_hit"].get("fused_program", 0) >= 2
    assert "fused_program" not in torchtpu.metrics()["compile"]


def test_a_division_by_the_number_zero_raises_at_once(fused):
    # no value to wait for: the op refuses as it records, as CPU's does
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.tensor([5, 7]).to(TPU) // 0
    assert (torch.tensor([5.0]).to(TPU) // 0).item() == float("inf")  # a float division


def test_a_value_cpu_checks_before_the_outs_dtype_is_reported_first(fused):
    mean, std = torch.zeros(3), torch.tensor([1.0, -1.0, 1.0])
    error, message = cpu_error(
        lambda: torch.normal(mean, std, out=torch.empty(3, dtype=torch.bool)))
    with pytest.raises(error) as caught:
        torch.normal(mean.to(TPU), std.to(TPU), out=torch.empty(3, dtype=torch.bool).to(TPU))
    assert str(caught.value) == message == "normal expects all elements of std >= 0.0"
    with pytest.raises(NotImplementedError, match="not implemented for 'Bool'"):  # valid std
        torch.normal(mean.to(TPU), std.abs().to(TPU), out=torch.empty(3, dtype=torch.bool).to(TPU))
