"""tpu tensors mixed with CPU tensors and Python numbers: what cuda allows, refuses and
returns (PyTorch's device-generic rules), and CPU's checks of numbers."""

from __future__ import annotations

import pytest
import torch
from conftest import TPU

_MIXED = "Expected all tensors to be on the same device, but found at least two devices"


@pytest.mark.parametrize("write", [
    lambda cpu, s: cpu.add_(s), lambda cpu, s: cpu.clamp_(min=s),
    lambda cpu, s: torch._foreach_add_([cpu], [s]),
], ids=["add_", "clamp_", "foreach_add_"])
def test_a_cpu_scalar_is_read_never_written(write):
    # A CPU 0-d tensor may be an operand of a tpu op, not its output (cuda's TensorIterator
    # rule); writing one failed inside torchtpu with an AttributeError.
    total = torch.arange(4.0).to(TPU).sum()
    with pytest.raises(RuntimeError, match=f"{_MIXED}, tpu:0 and cpu!"):
        write(torch.tensor(1.0), total)


@pytest.mark.parametrize("space", [torch.linspace, torch.logspace])
def test_ranges_of_tensor_ends_are_made_on_the_default_device(space):
    # ATen reads the ends and makes the range where device= says: the ends' device does not
    # count (it had come back on tpu).
    start = torch.arange(4.0).to(TPU).sum()
    assert space(start, start + 1, 3).device.type == "cpu"
    assert space(start, 7.0, 3, device=TPU).device.type == "tpu"
    torch.testing.assert_close(space(start, start + 1, 3), space(6.0, 7.0, 3))
    with pytest.raises(RuntimeError, match="only supports 0-dimensional start and end"):
        space(torch.ones(2, device=TPU), start, 3)


@pytest.mark.parametrize("fill", [
    lambda d: torch.zeros(2, dtype=torch.int32, device=d).fill_(2j),
    lambda d: torch.full((2,), 2j, dtype=torch.float32, device=d),
    lambda d: torch.full((2,), 2 + 0j, dtype=torch.float32, device=d),
    lambda d: torch.full((2,), 2j, dtype=torch.bool, device=d),
    lambda d: torch.zeros(2, dtype=torch.bool, device=d).fill_(0j),
    lambda d: torch.zeros(2, device=d).masked_fill(torch.tensor([True, False], device=d), 1j),
], ids=["int_fill", "float_full", "real_complex", "bool_full", "bool_zero", "masked_fill"])
def test_complex_numbers_into_real_tensors_as_cpu(fill):
    # c10's checked_convert refuses losing an imaginary part; a bool takes "not zero". tpu
    # kept the real part silently.
    try:
        expected = fill("cpu")
    except RuntimeError as e:
        with pytest.raises(RuntimeError, match=str(e)):
            fill(TPU)
        return
    assert fill(TPU).tolist() == expected.tolist()


@pytest.mark.parametrize("power", [
    lambda t: t ** True, lambda t: t ** False, lambda t: t ** 2, lambda t: t ** -1,
    lambda t: t ** t, lambda t: True ** t,
], ids=["by_true", "by_false", "by_int", "by_negative_int", "by_bool_tensor", "true_by"])
def test_powers_of_bools_as_cpu(power):
    # By True or False CPU copies or fills (bool results; tpu gave int32); by an int it is an
    # int64 power (negative refused); two bools have no kernel.
    def run(device):
        try:
            r = power(torch.tensor([True, False], device=device))
            return r.dtype, r.tolist()
        except (RuntimeError, NotImplementedError) as e:
            return type(e), str(e)

    assert run(TPU) == run("cpu")


def test_the_device_error_names_the_argument_on_the_cpu():
    # CPU indices are allowed: the values are what is on the wrong device.
    x = torch.arange(12.0).view(3, 4).to(TPU)
    with pytest.raises(RuntimeError, match="for argument values in method aten.index_put_"):
        x[torch.tensor([0])] = torch.ones(4)


def test_a_cpu_tensor_filled_with_a_tpu_scalar_reads_it():
    # ATen's fill_ and index_fill_ read a 0-d value of another device as a number (cuda too).
    total = torch.arange(4.0).to(TPU).sum()
    assert torch.zeros(3).fill_(total).tolist() == [6.0, 6.0, 6.0]
    filled = torch.zeros(3).index_fill_(0, torch.tensor([1]), total)
    assert filled.device.type == "cpu" and filled.tolist() == [0.0, 6.0, 0.0]
    # the functional forms too (their composites call the in-place kernels)
    filled = torch.zeros(3).index_fill(0, torch.tensor([2]), total)
    assert filled.device.type == "cpu" and filled.tolist() == [0.0, 0.0, 6.0]
    assert torch.fill(torch.zeros(2), total).tolist() == [6.0, 6.0]
    with pytest.raises(RuntimeError, match="same device"):
        torch.zeros(3).index_fill(0, torch.tensor([2]), torch.ones(1, device=TPU))


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
def test_embedding_checks_its_indices_before_the_weights_device(mode):
    # cuda's embedding is a composite: its dtype check runs before index_select's device
    # check, and in CPU's words (nn.Embedding(10, 3)(cuda_float_indices) names the dtype).
    import torchtpu

    indices = torch.tensor([1.5, 2.5])
    with pytest.raises(RuntimeError) as on_cpu:
        torch.nn.functional.embedding(indices, torch.zeros(10, 3))
    with torchtpu.set_eager_mode(mode), pytest.raises(RuntimeError) as mixed:
        torch.nn.functional.embedding(indices.to(TPU), torch.zeros(10, 3))
    assert str(mixed.value).split("\n[torchtpu debug]")[0] == str(on_cpu.value)
    with pytest.raises(RuntimeError, match=f"^{_MIXED}.*argument weight in method aten.embedding"):
        torch.nn.functional.embedding(indices.long().to(TPU), torch.zeros(10, 3))


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_foreach_copy_copies_pair_by_pair_across_devices(mode):
    # cuda's _foreach_copy_ takes its slow path, a copy_ per pair, where the lists mix
    # devices (tensordict's update_ of a memmapped TensorDict from a tpu one); it had raised.
    import torchtpu

    with torchtpu.set_eager_mode(mode):
        host = [torch.zeros(3), torch.zeros(2, dtype=torch.float64)]
        torch._foreach_copy_(host, [torch.arange(3.0).to(TPU), torch.ones(2).to(TPU)])
        assert [t.device.type for t in host] == ["cpu", "cpu"]
        assert host[0].tolist() == [0.0, 1.0, 2.0] and host[1].dtype == torch.float64
        on_tpu = [torch.zeros(3, device=TPU), torch.zeros(2, device=TPU)]
        row = on_tpu[0][1:]
        torch._foreach_copy_(on_tpu, [torch.arange(3.0), torch.ones(2, device=TPU)])
        assert row.tolist() == [1.0, 2.0] and on_tpu[1].tolist() == [1.0, 1.0]
        with pytest.raises(RuntimeError, match="^Tensor lists must have the same number"):
            torch._foreach_copy_([torch.zeros(3)], [torch.ones(3, device=TPU)] * 2)


def test_functional_copy_across_devices_lands_on_self_device():
    # aten.copy (functionalization's copy_) clones self and copies into it, on self's device,
    # as on cuda; it had raised the device error.
    on_tpu = torch.ones(3).to(TPU)
    out = torch.ops.aten.copy(torch.zeros(3), on_tpu * 2)
    assert out.device.type == "cpu" and out.tolist() == [2.0, 2.0, 2.0]
    out = torch.ops.aten.copy(torch.zeros(2, 3, dtype=torch.float64, device=TPU),
                              torch.arange(3))
    assert out.device.type == "tpu" and out.dtype == torch.float64
    assert out.tolist() == [[0.0, 1.0, 2.0]] * 2

    def write(host, value):
        host.copy_(value + 1)
        return host

    host = torch.zeros(3)
    torch.func.functionalize(write)(host, on_tpu)
    assert host.tolist() == [2.0, 2.0, 2.0]
