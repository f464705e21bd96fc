"""The 'tpu' device behaves as 'cuda' does: device module, movement, factories."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TPU, assert_same


def test_device_module_api():
    assert torch.tpu.is_available()
    assert torch.tpu.device_count() == 1
    assert torch.tpu.current_device() == 0
    torch.tpu.set_device(0)
    assert isinstance(torch.tpu.get_device_name(), str) and torch.tpu.get_device_name()
    props = torch.tpu.get_device_properties(0)
    assert props.total_memory > 0
    torch.tpu.synchronize()
    with pytest.raises(RuntimeError, match="invalid device index 3"):
        torch.tpu.set_device(3)


@pytest.mark.parametrize("make", [
    lambda d: torch.ones(3, device=d),
    lambda d: torch.randn(3, device=d),
    lambda d: torch.tensor([1.0, 2.0], device=d),
    lambda d: torch.arange(3, device=d),
    lambda d: torch.tril_indices(3, 3, device=d),
    lambda d: torch.ones(3).to(d),
    lambda d: torch.ones(3, device="tpu").to(d),
    lambda d: torch.zeros_like(torch.ones(3, device="tpu"), device=d),
    lambda d: torch.nn.Linear(2, 2).to(d).weight,
], ids=["ones", "randn", "tensor", "arange", "tril_indices", "cpu_to", "tpu_to", "zeros_like",
        "module_to"])
def test_a_device_index_this_process_does_not_drive_is_refused(make):
    # As CUDA refuses an invalid ordinal: nothing lands on tpu:0 unasked.
    with pytest.raises(RuntimeError, match="invalid device index 1"):
        make("tpu:1")
    assert make(torch.device("tpu", 0)).device == torch.device("tpu", 0)


def test_under_torchrun_the_local_rank_names_the_process_device(monkeypatch):
    # Each process sees the node's devices, as with cuda, and uses cuda:{local_rank}.
    monkeypatch.setenv("LOCAL_RANK", "2")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "3")
    assert torch.tpu.device_count() == 3
    torch.tpu.set_device(2)
    x = torch.ones(3, device="tpu:2") + torch.ones(3).to("tpu:2")
    assert x.device == torch.device("tpu", 0) and x.sum().item() == 6
    with pytest.raises(RuntimeError, match="invalid device index 3"):
        torch.ones(3, device="tpu:3")


def test_torch_tpu_has_cudas_submodules_and_initialisers():
    from torch.tpu.amp import GradScaler, autocast  # noqa: F401 (torch.cuda.amp's form)
    from torch.tpu.random import get_rng_state_all, set_rng_state_all

    torch.tpu.init()
    torch.tpu._lazy_init()
    torch.tpu.manual_seed(3)
    states = get_rng_state_all()  # the Trainer's checkpoint of a device's RNG
    first = torch.rand(3, device="tpu").cpu()
    set_rng_state_all(states)
    assert torch.equal(torch.rand(3, device="tpu").cpu(), first)
    torch.tpu.seed_all()
    assert not torch.equal(torch.rand(3, device="tpu").cpu(), first)


def test_tensor_movement_round_trip():
    c = torch.randn(3, 4)
    for target in ("tpu", "tpu:0", torch.device("tpu"), torch.device("tpu", 0)):
        t = c.to(target)
        assert t.device == torch.device(TPU)
        assert t.is_tpu and not c.is_tpu
        assert_same(t.cpu(), c)
        assert_same(t.to("cpu"), c)
    assert c.tpu().device.type == "tpu"


def test_numpy_needs_cpu_first_as_for_cuda():
    t = torch.ones(2, device="tpu")
    with pytest.raises(TypeError, match="cpu"):
        t.numpy()
    np.testing.assert_array_equal(t.cpu().numpy(), np.ones(2, np.float32))


def test_module_to_keeps_parameter_objects():
    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    m[1].weight = torch.nn.Parameter(torch.randn(2, 4))
    params = list(m.parameters())
    m.to("tpu")
    assert all(a is b for a, b in zip(params, m.parameters(), strict=False))
    assert all(p.device.type == "tpu" and isinstance(p, torch.nn.Parameter) for p in params)
    m.tpu()
    assert m[0].weight.device.type == "tpu"


@pytest.mark.parametrize("device", ["cpu", "tpu"])
def test_load_state_dict_copies_into_parameters_a_view_holds(device):
    # Importing torchtpu must not make load_state_dict swap tensors (for CPU modules too):
    # a swap refuses a parameter a live view holds, where PyTorch copies into it.
    m = torch.nn.Linear(3, 4).to(device)
    weight, row = m.weight, m.weight[0]
    new = torch.nn.Linear(3, 4).state_dict()
    m.load_state_dict(new)
    assert m.weight is weight
    assert torch.equal(row.cpu(), new["weight"][0])
    assert not torch.__future__.get_swap_module_params_on_conversion()


def test_tied_weights_stay_tied():
    emb = torch.nn.Embedding(5, 3)
    head = torch.nn.Linear(3, 5, bias=False)
    head.weight = emb.weight
    m = torch.nn.ModuleDict({"emb": emb, "head": head}).to("tpu")
    assert m["emb"].weight is m["head"].weight


@pytest.mark.parametrize(
    "make",
    [
        lambda d: torch.zeros(2, 3, device=d),
        lambda d: torch.ones(2, 3, device=d, dtype=torch.int64),
        lambda d: torch.full((2, 2), 7.5, device=d),
        lambda d: torch.full((2,), 3, device=d),
        lambda d: torch.arange(10, device=d),
        lambda d: torch.arange(1, 4, 0.5, device=d),
        lambda d: torch.arange(2, 12, 3, device=d, dtype=torch.float32),
        lambda d: torch.linspace(0, 1, 7, device=d),
        lambda d: torch.eye(3, device=d),
        lambda d: torch.eye(2, 4, device=d),
        lambda d: torch.tensor([[1, 2], [3, 4]], device=d),
        lambda d: torch.tensor(3.5, device=d),
        lambda d: torch.zeros_like(torch.ones(2, 2, device=d)),
        lambda d: torch.ones_like(torch.ones(2, 2, device=d), dtype=torch.float64),
        lambda d: torch.full_like(torch.ones(3, device=d), 2.0),
        lambda d: torch.ones(2, device=d).new_zeros(4),
        lambda d: torch.ones(2, device=d).new_full((2,), 5),
        lambda d: torch.empty(2, 3, device=d).shape,
        lambda d: torch.empty_like(torch.ones(4, device=d)).shape,
    ],
)
def test_factories(make):
    expected, actual = make("cpu"), make("tpu")
    if isinstance(actual, torch.Tensor):
        assert actual.device.type == "tpu"
    assert_same(actual, expected)


def test_random_factories_shapes_and_ranges():
    torch.manual_seed(0)
    r = torch.rand(1000, device="tpu")
    assert r.device.type == "tpu" and r.dtype == torch.float32
    assert 0 <= r.min().item() and r.max().item() < 1
    n = torch.randn(4000, device="tpu")
    assert abs(n.mean().item()) < 0.1 and abs(n.std().item() - 1) < 0.1
    i = torch.randint(3, 9, (500,), device="tpu")
    assert i.dtype == torch.int64 and i.min().item() >= 3 and i.max().item() <= 8
    p = torch.randperm(50, device="tpu")
    assert sorted(p.cpu().tolist()) == list(range(50))


def test_default_device_context():
    with torch.device("tpu"):
        x = torch.ones(3)
        y = torch.arange(3)
    assert x.device.type == "tpu" and y.device.type == "tpu"
    assert_same(x + y, torch.ones(3) + torch.arange(3))


def test_printing_shows_the_device_where_cuda_does():
    # PyTorch's order: the device, then size and dtype, then the autograd state
    assert repr(torch.tensor([1.0, 2.0], device="tpu")) == "tensor([1., 2.], device='tpu:0')"
    assert (repr(torch.ones(2, dtype=torch.float64, device="tpu"))
            == "tensor([1., 1.], device='tpu:0', dtype=torch.float64)")
    assert (repr(torch.empty(0, 3, dtype=torch.int64, device="tpu"))
            == "tensor([], device='tpu:0', size=(0, 3), dtype=torch.int64)")
    assert (repr(torch.ones(2, device="tpu", requires_grad=True))
            == "tensor([1., 1.], device='tpu:0', requires_grad=True)")
    x = torch.ones(2, 4, dtype=torch.float64, device="tpu", requires_grad=True)
    assert repr(x.sum() * 2) == (
        "tensor(16., device='tpu:0', dtype=torch.float64, grad_fn=<MulBackward0>)")
    assert repr(x * 123456.5) == (  # wrapped where PyTorch wraps
        "tensor([[123456.5000, 123456.5000, 123456.5000, 123456.5000],\n"
        "        [123456.5000, 123456.5000, 123456.5000, 123456.5000]], device='tpu:0',\n"
        "       dtype=torch.float64, grad_fn=<MulBackward0>)")
    assert repr(torch.ones(2, dtype=torch.float64)) == "tensor([1., 1.], dtype=torch.float64)"


def test_printing_a_captured_tensor_inside_transforms_and_modes_as_on_cpu():
    # A tensor captured by a torch.func transform prints as itself, not as the transform's
    # wrapper, and printing runs no op an active dispatch mode would see.
    from torch.utils._python_dispatch import TorchDispatchMode

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    for device in ("cpu", "tpu"):
        x, seen, printed = torch.tensor([1.0, 2.0], device=device), [], []

        def f(y, x=x, printed=printed):
            printed.append(repr(x))
            return y

        torch.func.vjp(f, torch.ones(2, device=device))
        torch.func.vmap(f)(torch.ones(3, 2, device=device))
        with Record():
            printed.append(repr(x))
        assert printed == [repr(x)] * 3 and seen == []


def test_save_and_load_round_trip(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    expected = {k: v.clone() for k, v in model.state_dict().items()}
    model.to("tpu")
    leaf = torch.arange(6.0, device="tpu").reshape(2, 3).requires_grad_()
    torch.save({"state": model.state_dict(), "leaf": leaf, "bf16": leaf.detach().bfloat16()},
               tmp_path / "t.pt")
    loaded = torch.load(tmp_path / "t.pt")  # weights_only=True, PyTorch's default
    for k, v in loaded["state"].items():
        assert v.device.type == "tpu"
        assert_same(v, expected[k])
    assert loaded["leaf"].requires_grad and loaded["leaf"].device.type == "tpu"
    assert loaded["bf16"].dtype == torch.bfloat16
    on_cpu = torch.load(tmp_path / "t.pt", map_location="cpu")
    assert on_cpu["leaf"].device.type == "cpu"
    assert_same(on_cpu["state"]["weight"], expected["weight"])


@pytest.mark.parametrize("where", ["tpu", "tpu:0", torch.device("tpu"), {"cpu": "tpu"}],
                         ids=["tpu", "tpu:0", "device", "dict"])
def test_load_with_map_location_tpu(tmp_path, where):
    torch.save({"cpu": torch.arange(3.0), "u16": torch.tensor([0, 1, 2], dtype=torch.uint16)},
               tmp_path / "cpu.pt")
    torch.save({"tpu": torch.arange(3.0, device="tpu")}, tmp_path / "tpu.pt")
    from_cpu = torch.load(tmp_path / "cpu.pt", map_location=where)
    from_tpu = torch.load(tmp_path / "tpu.pt", map_location=where)["tpu"]
    assert from_cpu["cpu"].device.type == from_cpu["u16"].device.type == "tpu"
    assert_same(from_cpu["cpu"], torch.arange(3.0))
    assert_same(from_cpu["u16"], torch.tensor([0, 1, 2], dtype=torch.uint16))
    assert from_tpu.device.type == "tpu"
    assert_same(from_tpu, torch.arange(3.0))


def test_a_model_built_on_meta_takes_a_cpu_checkpoint_onto_tpu(tmp_path):
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 10, bias=False))
    cpu[1].weight = cpu[0].weight  # tied
    torch.save(cpu.state_dict(), tmp_path / "m.pt")
    with torch.device("meta"):
        model = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 10, bias=False))
    model.load_state_dict(torch.load(tmp_path / "m.pt", map_location="tpu"), assign=True)
    assert model[0].weight.device.type == model[1].weight.device.type == "tpu"
    x = torch.tensor([[1, 2, 3]])
    assert_same(model(x.to("tpu")), cpu(x))
    with torch.no_grad():
        model[0].weight.add_(1)  # still tied, as the storage they share on CPU ties them
    assert_same(model[1].weight, cpu[0].weight + 1)


@pytest.mark.parametrize("saved_on", ["cpu", "tpu"])
def test_tensors_sharing_a_storage_are_saved_once_and_load_sharing_it(tmp_path, saved_on):
    x = torch.arange(10.0, device=saved_on)
    torch.save([x, x[2:], x.view(2, 5), x.double()], tmp_path / "s.pt")
    size = (tmp_path / "s.pt").stat().st_size
    torch.save([x, x.double()], tmp_path / "one.pt")
    assert size < (tmp_path / "one.pt").stat().st_size + 200  # the views add no bytes
    loaded = torch.load(tmp_path / "s.pt", map_location="tpu")
    loaded[0].mul_(2)  # through the first: seen by the other two, as on CPU
    assert_same(loaded[1], torch.arange(2.0, 10.0, device="tpu") * 2)
    assert_same(loaded[2], torch.arange(10.0, device="tpu").view(2, 5) * 2)
    assert_same(loaded[3], torch.arange(10.0, dtype=torch.float64, device="tpu"))


def test_pin_memory_and_pinned_data_loader():
    x = torch.randn(8, 3)
    assert_same(x.pin_memory(), x)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x), batch_size=4,
                                         pin_memory=True)
    batches = [b.to("tpu") for (b,) in loader]
    assert_same(torch.cat(batches), x)
    # activations offloaded to pinned host memory (HF's offloaded checkpointing asks so)
    w = x.to("tpu").requires_grad_()
    with torch.autograd.graph.save_on_cpu(pin_memory=True, device_type="tpu"):
        loss = (w * w).sum()
    loss.backward()
    assert_same(w.grad, 2 * x)


def test_module_to_while_a_cpu_graph_holds_the_parameters():
    emb = torch.nn.Embedding(5, 3)
    head = torch.nn.Linear(3, 5, bias=False)
    head.weight = emb.weight
    model = torch.nn.Sequential(emb, torch.nn.Linear(3, 3), head)
    out = model(torch.tensor([1, 2]))  # keeps a CPU autograd graph that saved the weights
    model.to("tpu")
    assert all(p.device.type == "tpu" for p in model.parameters())
    assert model[0].weight is model[2].weight  # still tied
    out.sum().backward()  # the CPU graph still works
    assert_same(model(torch.tensor([1, 2], device="tpu")), out)


@pytest.mark.parametrize("fmt,shape", [(torch.channels_last, (2, 3, 4, 5)),
                                       (torch.channels_last_3d, (2, 3, 2, 4, 5))])
def test_dense_layouts_survive_transfers_and_copies(fmt, shape):
    # As between cpu and cuda: .to/.cpu/clone preserve a dense layout, contiguous() undoes it.
    c = torch.randn(shape).to(memory_format=fmt)
    t = c.to("tpu")
    assert t.stride() == c.stride() and t.is_contiguous(memory_format=fmt)
    back = t.cpu()
    assert back.stride() == c.stride() and torch.equal(back, c)
    assert t.clone().stride() == c.stride()
    assert t.contiguous().stride() == c.contiguous().stride()
    assert torch.equal(t.contiguous().cpu(), c)
    u = torch.randn(shape).to("tpu").contiguous(memory_format=fmt)
    assert u.is_contiguous(memory_format=fmt)
    assert torch.empty(shape, device="tpu", memory_format=fmt).stride() == c.stride()
    for like in (torch.empty_like, torch.zeros_like, torch.ones_like, torch.randn_like):
        assert like(t).stride() == like(c).stride()
    assert torch.equal(torch.ones_like(t).cpu(), torch.ones_like(c))
    t.mul_(2).add_(1)  # writes land in the layout's memory order
    assert torch.equal(t.cpu(), c * 2 + 1) and t.stride() == c.stride()
    perm = (0, *range(2, len(shape)), 1)
    assert t.permute(perm).is_contiguous()
    assert torch.equal(t.permute(perm).cpu(), (c * 2 + 1).permute(perm))


def test_channels_last_model_matches_cpu():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Conv2d(4, 2, 1))
    model = model.to(memory_format=torch.channels_last)
    x = torch.randn(2, 3, 6, 6).to(memory_format=torch.channels_last)
    tpu = copy.deepcopy(model).to("tpu")
    assert tpu[0].weight.is_contiguous(memory_format=torch.channels_last)
    model(x).square().sum().backward()
    tpu(x.to("tpu")).square().sum().backward()
    for p, q in zip(model.parameters(), tpu.parameters(), strict=True):
        if p.ndim == 4:  # a grad takes its parameter's layout
            assert q.grad.is_contiguous(memory_format=torch.channels_last)
        torch.testing.assert_close(q.grad.cpu(), p.grad, rtol=1e-5, atol=1e-5)


@pytest.mark.usefixtures("eager_mode")
@pytest.mark.parametrize("weight_cl", [False, True])
@pytest.mark.parametrize("input_cl", [False, True])
def test_results_take_cpus_memory_format(input_cl, weight_cl):
    # Conv, batch norm, elementwise and pooling results (and gradients) of channels_last
    # inputs are channels_last on CPU; so they are here, with CPU's values.
    def run(device):
        torch.manual_seed(0)
        conv, bn = torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4)
        if weight_cl:
            conv = conv.to(memory_format=torch.channels_last)
        conv, bn = conv.to(device), bn.to(device)
        x = torch.randn(2, 3, 8, 8)
        x = x.to(memory_format=torch.channels_last if input_cl else torch.contiguous_format)
        x = x.to(device).requires_grad_()
        y = torch.relu(bn(conv(x)))
        z = torch.nn.functional.adaptive_avg_pool2d(torch.nn.functional.max_pool2d(y, 2) + 1, 1)
        z.sum().backward()
        flat = y.permute(0, 2, 3, 1).view(-1, 4) if y.permute(0, 2, 3, 1).is_contiguous() else None
        return [y, z, x.grad, conv.weight.grad, flat]

    cpu, tpu = run("cpu"), run("tpu")
    assert [t.stride() for t in tpu[:4]] == [t.stride() for t in cpu[:4]]
    assert (tpu[4] is None) == (cpu[4] is None)  # NHWC .view works where it does on CPU
    for t, c in zip(tpu, cpu, strict=True):
        if c is not None:
            torch.testing.assert_close(t.cpu(), c, rtol=1e-4, atol=1e-5)


@pytest.mark.usefixtures("eager_mode")
@pytest.mark.parametrize("join", [lambda xs: torch.cat(xs, 1), lambda xs: torch.cat(xs, 0),
                                  lambda xs: torch.stack(xs),
                                  lambda xs: torch.cat([xs[0].contiguous(), xs[1]], 1)],
                         ids=["cat_channels", "cat_batch", "stack", "cat_mixed"])
def test_joined_channels_last_tensors_stay_channels_last(join):
    x = torch.arange(96.0).reshape(2, 3, 4, 4).contiguous(memory_format=torch.channels_last)
    cpu, tpu = join([x, x + 1]), join([x.to("tpu"), x.to("tpu") + 1])
    assert tpu.stride() == cpu.stride()
    assert_same(tpu, cpu)


@pytest.mark.usefixtures("eager_mode")
@pytest.mark.parametrize("op", [
    lambda x: x + 1, lambda x: x * x, torch.relu, lambda x: torch.where(x > 0, x, 0.0),
    lambda x: x + x.contiguous(),
], ids=["add_scalar", "mul_self", "relu", "where", "add_contiguous"])
@pytest.mark.parametrize("permute", [lambda x: x.mT, lambda x: x.permute(2, 0, 1)],
                         ids=["transpose", "permute"])
def test_an_elementwise_result_keeps_a_permuted_inputs_order(op, permute):
    # TensorIterator follows the input's order: `(x.t() + 1).t()` is contiguous and views.
    x = torch.randn(2, 3, 4)
    cpu, tpu = op(permute(x)), op(permute(x.to("tpu")))
    assert tpu.stride() == cpu.stride()
    assert_same(tpu, cpu)
    in_memory = sorted(range(3), key=lambda d: -cpu.stride()[d])
    assert_same(tpu.permute(in_memory).view(-1), cpu.permute(in_memory).view(-1))


@pytest.mark.usefixtures("eager_mode")
@pytest.mark.parametrize("op", [
    lambda x, s: torch.slice_scatter(x, s[:2], 0, 0, 2),
    lambda x, s: torch.select_scatter(x, s[0], 0, 1),
    lambda x, s: torch.diagonal_scatter(x, s[0, :4]),
    lambda x, s: torch.ops.aten.copy(x, s),
    lambda x, s: torch.as_strided_scatter(x, s.reshape(-1)[:5], (5,), (1,), 2),
    lambda x, s: torch.as_strided_scatter(x, s[:2, :3], (2, 3), (1, 6), 1),
], ids=["slice", "select", "diagonal", "copy", "as_strided", "as_strided_2d"])
def test_scatters_into_a_permuted_input_are_laid_out_as_it(op):
    # CPU clones the input (keeping its order), then writes: as_strided_scatter's window is
    # in that clone's memory, so a transposed input changes which elements it writes.
    x, src = torch.randn(4, 6).t(), torch.randn(6, 4)
    cpu, tpu = op(x, src), op(x.to("tpu"), src.to("tpu"))
    assert tpu.stride() == cpu.stride()
    assert_same(tpu, cpu)


def test_tensor_queries_answer_as_on_cpu():
    x = torch.randn(3, 4)
    t = x.to("tpu")
    loss = t.square().mean()
    # f-strings format a 0-d tensor as its number (training loops' logs), as on CPU and cuda
    assert f"{loss:.4f}" == f"{x.square().mean():.4f}"
    assert f"{t[0, 1]:+.2e}" == f"{x[0, 1]:+.2e}"
    assert f"{loss}" == f"{loss.item()}"
    # torch.tensor of 0-d device tensors reads each (with Python dispatch off): a CPU tensor
    pair = torch.tensor([loss, loss * 2])
    assert pair.device.type == "cpu" and pair.tolist() == [loss.item(), 2 * loss.item()]
    assert t.is_pinned() is False
    assert t.is_set_to(t) and t.detach().is_set_to(t)
    assert not t.is_set_to(t.clone()) and not t.is_set_to(t.view(4, 3)) and not t[0].is_set_to(t)


def test_array_libraries_infer_torch_as_a_tpu_tensors_backend():
    # opt_einsum (tensorly, neuraloperator's factorized spectral convolutions) and autoray name
    # an array's backend by the top package of its class; 'torchtpu' made opt_einsum fall back
    # to numpy, which refuses a device tensor
    x, y = torch.randn(2, 3), torch.randn(3, 4)
    assert type(x.to(TPU)).__module__.split(".")[0] == "torch"
    opt_einsum = pytest.importorskip("opt_einsum")
    assert_same(opt_einsum.contract("ij,jk->ik", x.to(TPU), y.to(TPU)),
                opt_einsum.contract("ij,jk->ik", x, y))


def test_lazy_modules_materialize_on_tpu():
    # Their uninitialized parameters hold no data: moved to tpu they stay uninitialized and
    # are created there, at their first call (as on cuda).
    m = torch.nn.Sequential(torch.nn.LazyConv2d(3, 2), torch.nn.LazyBatchNorm2d(),
                            torch.nn.Flatten(), torch.nn.LazyLinear(2)).to(TPU)
    x = torch.randn(2, 4, 5, 5)
    y = m(x.to(TPU))
    assert y.shape == (2, 2) and m[0].weight.shape == (3, 4, 2, 2)
    assert all(p.device.type == "tpu" for p in m.parameters())
    assert m[1].running_mean.device.type == "tpu"
    y.sum().backward()
    assert m[3].weight.grad.shape == (2, 48)
    # The same values as CPU once materialized: copied over, the module computes CPU's result.
    cpu = copy.deepcopy(m).to("cpu")
    assert_same(m(x.to(TPU)), cpu(x), rtol=1e-5)
    assert torch.nn.LazyLinear(3).to(TPU).to("cpu")(torch.randn(2, 4)).device.type == "cpu"


def test_lazy_modules_made_for_tpu():
    # device="tpu" or a device context: PyTorch made each placeholder a subclass instance of
    # an empty tpu tensor, which refuses (it is a TpuTensor already).
    lazy = torch.nn.LazyLinear(2, device=TPU)
    assert lazy(torch.randn(3, 5, device=TPU)).shape == (3, 2)
    with torch.device(TPU):
        m = torch.nn.Sequential(torch.nn.LazyConv2d(4, 3), torch.nn.LazyBatchNorm2d())
    assert m(torch.randn(2, 3, 8, 8, device=TPU)).shape == (2, 4, 6, 6)
    lazy_type = torch.nn.parameter.UninitializedTensorMixin
    for t in (lazy.weight, m[0].weight, m[1].running_mean):
        assert t.device.type == "tpu" and not isinstance(t, lazy_type)
    assert isinstance(lazy.weight, torch.nn.Parameter)
    cpu_made = torch.nn.LazyLinear(2)
    cpu_made.weight.materialize((2, 3), device=TPU)
    assert cpu_made.weight.device.type == "tpu" and isinstance(cpu_made.weight, torch.nn.Parameter)


def test_a_lazy_module_aimed_at_tpu_refuses_and_converts_as_on_cpu():
    # Its placeholders wait on the CPU: share_memory and to_empty refused them only there, and
    # a dtype conversion was remembered but not shown.
    for device in ("cpu", TPU):
        m = torch.nn.LazyLinear(5, device=device)
        with pytest.raises(RuntimeError, match="share memory on an uninitialized"):
            m.share_memory()
        with pytest.raises(ValueError, match="uninitialized parameter"):
            m.to_empty(device=device)
        assert isinstance(m.weight, torch.nn.parameter.UninitializedParameter)
        assert m.half().weight.dtype == torch.float16
        y = m(torch.ones(2, 3, dtype=torch.float16, device=device))
        assert m.weight.device == y.device == torch.device(device) and y.dtype == torch.float16


@pytest.mark.parametrize("convert,device", [
    (lambda m: m.to(torch.float64), "cpu"), (lambda m: m.double(), "cpu"),
    (lambda m: m.to("cpu", torch.float64), "cpu"), (lambda m: m.to(TPU).double(), TPU),
    (lambda m: m.to(TPU).cpu().double(), "cpu"),
], ids=["to(float64)", "double()", "to(cpu, float64)", "tpu then double", "tpu, cpu, double"])
def test_a_lazy_modules_dtype_conversion_keeps_it_lazy(convert, device):
    # Importing torchtpu must not change a CPU module: its uninitialized parameters take the
    # dtype (and stay aimed at tpu when they were) and are created at the first call.
    m = convert(torch.nn.LazyLinear(5))
    assert isinstance(m.weight, torch.nn.parameter.UninitializedParameter)
    y = m(torch.randn(2, 3, dtype=torch.float64, device=device))
    assert m.weight.shape == (5, 3) and m.weight.dtype == torch.float64
    assert y.dtype == torch.float64 and y.device == torch.device(device)


def test_meta_and_host_targets_from_tpu_tensors():
    # t.to("meta") and factories templated on a tpu tensor but asked for another device make
    # their result there (they had come back on tpu).
    t = torch.ones(2, 3, device=TPU)
    for made in (t.to("meta"), torch.empty_like(t, device="meta"), t.new_empty(2, device="meta")):
        assert made.device.type == "meta"
    assert t.to("meta", torch.float16).dtype == torch.float16
    assert_same(torch.zeros_like(t, device="cpu"), torch.zeros(2, 3))
    assert_same(t.new_full((2,), 3.0, device="cpu"), torch.full((2,), 3.0))
    assert t.new_ones(2).device.type == "tpu"
    m = torch.nn.Linear(3, 2).to(TPU).to("meta")
    assert m.weight.device.type == "meta"
    m.to_empty(device=TPU)
    assert m.weight.device.type == "tpu"


def test_parameters_print_pickle_and_save_as_parameters(tmp_path):
    import pickle

    p = torch.nn.Parameter(torch.ones(2, device=TPU))
    assert repr(p).startswith("Parameter containing:\ntensor([1., 1.], device='tpu:0'")
    back = pickle.loads(pickle.dumps(p))
    assert isinstance(back, torch.nn.Parameter) and back.requires_grad and back.device == p.device
    layer = torch.nn.Linear(2, 2).to(TPU)
    torch.save(layer, tmp_path / "m.pt")
    loaded = torch.load(tmp_path / "m.pt", weights_only=False)
    assert all(isinstance(q, torch.nn.Parameter) for q in loaded.parameters())


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpoint_replays_the_tpu_rng_for_dropout(reentrant):
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 50), torch.nn.Dropout(0.5),
                              torch.nn.Linear(50, 1)).to(TPU)
    x = torch.randn(8, 3, device=TPU, requires_grad=True)
    torch.manual_seed(1)
    net(x).sum().backward()
    expected = net[0].weight.grad.clone()
    net.zero_grad()
    torch.manual_seed(1)
    checkpoint(net, x, use_reentrant=reentrant).sum().backward()
    assert_same(net[0].weight.grad, expected)


def test_load_with_a_callable_map_location(tmp_path):
    torch.save({"w": torch.ones(2, device=TPU)}, tmp_path / "c.pt")
    kept = torch.load(tmp_path / "c.pt", map_location=lambda storage, loc: storage)
    assert kept["w"].device.type == "cpu"  # cuda's idiom for "load onto the CPU"
    default = torch.load(tmp_path / "c.pt", map_location=lambda storage, loc: None)
    assert default["w"].device.type == "tpu"


def test_safetensors_and_save_pretrained_find_shared_tensors(tmp_path):
    safetensors = pytest.importorskip("safetensors.torch")
    layer = torch.nn.Linear(3, 2).to(TPU)
    safetensors.save_model(layer, tmp_path / "m.safetensors")
    back = safetensors.load_file(tmp_path / "m.safetensors")
    assert_same(back["weight"], layer.weight)
    for device in ("tpu", "tpu:0", torch.device("tpu")):  # cuda's idiom, device="cuda"
        onto = safetensors.load_file(tmp_path / "m.safetensors", device=device)
        assert onto["weight"].device.type == "tpu"
        assert_same(onto["weight"], layer.weight)
        with safetensors.safe_open(tmp_path / "m.safetensors", "pt", device=device) as f:
            assert sorted(f.keys()) == ["bias", "weight"]
            assert_same(f.get_tensor("bias"), layer.bias)
            assert_same(f.get_slice("weight")[1:, :2], layer.weight[1:, :2])
            assert f.get_slice("weight").get_shape() == [2, 3]
    w = torch.ones(2, device=TPU)
    assert w.untyped_storage().data_ptr() == w.untyped_storage().data_ptr() != 0
    assert w.untyped_storage().data_ptr() != w.clone().untyped_storage().data_ptr()
    with pytest.raises(RuntimeError, match="share memory"):  # tied, as safetensors says on cuda
        safetensors.save_file({"a": w, "b": w}, tmp_path / "tied.safetensors")
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=50,
                                     n_positions=8)
    model = transformers.GPT2LMHeadModel(config).to(TPU)  # lm_head tied to the embedding
    model.save_pretrained(tmp_path / "gpt2")
    loaded = transformers.GPT2LMHeadModel.from_pretrained(tmp_path / "gpt2")
    assert_same(loaded.lm_head.weight, model.lm_head.weight)


def test_indexing_a_cpu_tensor_with_tpu_indices_as_cuda_does():
    # ATen's index refuses indices on another device than cpu or the tensor's; index_put_
    # moves them to the tensor's device
    x = torch.arange(5.0).reshape(5, 1)
    for index in ((torch.tensor([1, 3], device=TPU),),
                  (torch.tensor([1, 3]), torch.tensor([0, 0], device=TPU))):
        with pytest.raises(RuntimeError, match=r"indices should be either on cpu or on the same "
                           r"device as the indexed tensor \(cpu\)"):
            x[index]
    x = torch.arange(5.0)
    x[torch.tensor([True, False, False, False, True], device=TPU)] = 9.0
    assert x.tolist() == [9.0, 1.0, 2.0, 3.0, 9.0]


@pytest.mark.parametrize("seed", [0, 2**32 + 7, 2**63 + 1, 2**64 - 1])
def test_rng_state_round_trips_any_64_bit_seed(seed):
    # torch.seed() gives seeds of 2**63 and more; checkpoint saves and replays the state.
    torch.manual_seed(seed)
    assert torch.tpu.initial_seed() == seed
    state = torch.tpu.get_rng_state()
    first = torch.rand(4, device="tpu").cpu()
    torch.tpu.set_rng_state(state)
    assert torch.equal(torch.rand(4, device="tpu").cpu(), first)
    states = torch.tpu.get_rng_state_all()
    second = torch.rand(4, device="tpu").cpu()
    torch.tpu.set_rng_state_all(states)
    assert torch.equal(torch.rand(4, device="tpu").cpu(), second)
    x = torch.ones(8, device="tpu", requires_grad=True)
    torch.utils.checkpoint.checkpoint(
        lambda t: torch.nn.functional.dropout(t, 0.5), x, use_reentrant=False).sum().backward()
    assert set(x.grad.cpu().tolist()) <= {0.0, 2.0}


def test_seeds_are_all_64_bits_and_seed_is_random():
    draws = []
    for seed in (1, 1 + 2**32):
        torch.manual_seed(seed)
        draws.append(torch.rand(4, device="tpu").cpu())
    assert not torch.equal(*draws)
    torch.manual_seed(0)
    seeds = set()
    for _ in range(2):
        torch.tpu.seed()
        seeds.add(torch.tpu.initial_seed())
    assert len(seeds) == 2


def test_device_context_managers_as_cudas():
    with torch.tpu.device(None), torch.tpu.device(-1):  # a CPU tensor's get_device()
        pass
    assert torch.tpu.device(0).idx == 0 and torch.tpu.device("tpu:0").idx == 0
    with torch.tpu.device_of(torch.ones(1)) as on_cpu:
        assert on_cpu.idx == -1
    with torch.tpu.device_of(torch.ones(1, device="tpu")) as on_tpu:
        assert on_tpu.idx == 0
    with pytest.raises(RuntimeError, match="invalid device index 1"):
        torch.tpu.device(1)


def test_device_module_amp_as_cuda_amp():
    model = torch.nn.Linear(4, 2).to("tpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.tpu.amp.GradScaler()
    with torch.tpu.amp.autocast():
        out = model(torch.randn(3, 4, device="tpu"))
    assert out.dtype == torch.get_autocast_dtype("tpu")
    scaler.scale(out.float().sum()).backward()
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 2.0**16
    assert torch.tpu.OutOfMemoryError is torch.OutOfMemoryError


def test_tolist_with_dispatch_off():
    # Inductor reads small constants this way (AOTInductor on a tpu ExportedProgram).
    from torch.utils._mode_utils import no_dispatch

    x = torch.arange(3.0, device="tpu")
    with no_dispatch():
        assert x.tolist() == [0.0, 1.0, 2.0]


def test_ops_defined_with_torch_library_run_their_python_body():
    # As on cuda: a custom op without device-specific kernels (CompositeExplicitAutograd)
    # runs its body, whose ops run on tpu; with its autograd formula, and under compile.
    @torch.library.custom_op("torchtpu_test::scaled_sin", mutates_args=())
    def scaled_sin(x: torch.Tensor, k: float) -> torch.Tensor:
        return x.sin() * k

    scaled_sin.register_fake(lambda x, k: torch.empty_like(x))
    scaled_sin.register_autograd(
        lambda ctx, g: (g * ctx.k * ctx.saved_tensors[0].cos(), None),
        setup_context=lambda ctx, inputs, output: (ctx.save_for_backward(inputs[0]),
                                                   setattr(ctx, "k", inputs[1])))
    x = torch.linspace(-1, 1, 5)
    t = x.to("tpu").requires_grad_()
    out = scaled_sin(t, 3.0)
    assert out.device.type == "tpu"
    assert_same(out, x.sin() * 3)
    out.sum().backward()
    assert_same(t.grad, x.cos() * 3)
    compiled = torch.compile(lambda v: scaled_sin(v, 2.0) + 1, backend="tpu")
    assert_same(compiled(x.to("tpu")), x.sin() * 2 + 1)


@pytest.mark.parametrize("share", [
    lambda t: torch.utils.dlpack.to_dlpack(t), lambda t: torch.from_dlpack(t),
    lambda t: np.from_dlpack(t), lambda t: t.__dlpack_device__(),
], ids=["to_dlpack", "from_dlpack", "numpy", "device"])
def test_dlpack_refuses_a_tpu_tensor_as_a_meta_one(share):
    # PyTorch's own export handed out a capsule with a null data pointer
    with pytest.raises(BufferError, match="Cannot pack tensors on tpu"):
        share(torch.ones(2, device="tpu"))
    assert torch.equal(torch.from_dlpack(torch.utils.dlpack.to_dlpack(torch.ones(2))),
                       torch.ones(2))


def test_matmul_precision_follows_torch_after_import():
    # Read once at start-up: a later torch.set_float32_matmul_precision("high") was ignored.
    import jax

    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")
        assert jax.config.jax_default_matmul_precision == "tensorfloat32"
        torch.set_float32_matmul_precision("medium")
        assert jax.config.jax_default_matmul_precision == "bfloat16"
    finally:
        torch.set_float32_matmul_precision(before)
    assert jax.config.jax_default_matmul_precision == {
        "highest": "highest", "high": "tensorfloat32", "medium": "bfloat16"}[before]


def test_pytorchs_device_generic_tests_imported_before_torchtpu_run_on_tpu(tmp_path):
    # isort puts `from torch.testing._internal...` above `import torchtpu`: those modules then
    # noted the device types before tpu existed, and instantiated no tpu tests.
    ops_tests = Path(__file__).parent / "ops"
    (tmp_path / "test_generic.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ops_tests)!r})\n"
        "import pytorch_test_db  # noqa: F401  (PyTorch's test modules, without expecttest)\n"
        "import torch\n"
        "from torch.testing._internal.common_device_type import (\n"
        "    instantiate_device_type_tests, onlyNativeDeviceTypes)\n"
        "from torch.testing._internal.common_utils import TestCase\n\n"
        "import torchtpu  # noqa: F401\n\n\n"
        "class TestGeneric(TestCase):\n"
        "    @onlyNativeDeviceTypes\n"
        "    def test_sum(self, device):\n"
        "        self.assertEqual(torch.ones(3, device=device).sum().item(), 3)\n\n\n"
        "instantiate_device_type_tests(TestGeneric, globals(), only_for='tpu')\n")
    root = str(Path(__file__).parents[1])  # torchtpu, whether installed or on the path
    path = os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "TORCHTPU_CACHE_DIR": "", "PYTHONPATH": path}
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-rA", str(tmp_path / "test_generic.py")],
                         capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert "PASSED test_generic.py::TestGenericPRIVATEUSE1::test_sum_tpu" in out.stdout, out.stdout
