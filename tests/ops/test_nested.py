"""Jagged nested tensors over tpu values: PyTorch's NestedTensor runs its ops on ours."""

from __future__ import annotations

import warnings

import pytest
import torch
from conftest import TPU, assert_same

pytestmark = pytest.mark.usefixtures("eager_mode")


def _rows(device, requires_grad=False):
    torch.manual_seed(0)
    rows = [torch.randn(2, 3), torch.randn(4, 3)]
    return [r.to(device).requires_grad_(requires_grad) for r in rows]


def _model(rows):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the prototype API's warning
        nt = torch.nested.as_nested_tensor(rows, layout=torch.jagged)  # (keeps their autograd)
    w = torch.linspace(-1, 1, 15, device=rows[0].device).view(3, 5)
    out = torch.softmax(torch.relu(nt @ w) * 2 + 1, dim=-1)
    return out, out.mean(dim=1), torch.nested.to_padded_tensor(out, -1.0)


def test_jagged_nested_tensor_ops_and_gradients_as_cpu():
    # Building one from tpu values reached our view handler, which read its nested sizes:
    # AttributeError 'NestedIntNode' object has no attribute 'neg'.
    on_tpu, on_cpu = _rows(TPU, True), _rows("cpu", True)
    (out, mean, padded), (e_out, e_mean, e_padded) = _model(on_tpu), _model(on_cpu)
    assert out.device.type == "tpu" and out.is_nested
    assert_same(list(out.unbind()), list(e_out.unbind()))
    assert_same(mean, e_mean)
    assert_same(padded, e_padded)
    # (CPU cannot differentiate the mean over the ragged dimension: left out)
    (padded * torch.arange(5.0, device=TPU)).sum().backward()
    (e_padded * torch.arange(5.0)).sum().backward()
    for a, e in zip(on_tpu, on_cpu, strict=True):
        assert_same(a.grad, e.grad)


@pytest.mark.parametrize("requires_grad", [False, True])
def test_strided_nested_tensor_of_tpu_values_is_refused(requires_grad):
    # PyTorch's C++ built a strided one over tpu buffers that no op could run on (not even
    # repr or .cpu()); with a component that requires grad, its autograd node read the nested
    # sizes and the process aborted (terminate called after c10::NotImplementedError).
    rows = _rows(TPU, requires_grad)
    with pytest.raises(NotImplementedError, match="layout=torch.jagged"):
        torch.nested.as_nested_tensor(rows)
    with pytest.raises(NotImplementedError, match="layout=torch.jagged"):
        torch.nested.as_nested_tensor(torch.randn(2, 3, 4, device=TPU))
    # (the jagged layout, which tpu has, over the same values)
    assert torch.nested.as_nested_tensor(rows, layout=torch.jagged).is_nested


@pytest.mark.parametrize("factory", [
    lambda size, device: torch.empty(size, device=device),
    lambda size, device: torch.empty_strided(size, (1, 1), device=device),
    lambda size, device: torch.zeros(size, device=device),
])
def test_factory_of_a_nested_int_size_raises_cpus_error(factory):
    # A jagged tensor's ragged size is a nested int. Autograd builds such a zero gradient for
    # a dense input broadcast against a jagged one (nextafter's backward): our meta step did
    # arithmetic on it, AttributeError 'NestedIntNode' object has no attribute 'add'.
    for device in ("cpu", TPU):
        size = [3, torch.nested.as_nested_tensor(_rows(device), layout=torch.jagged).shape[1]]
        with pytest.raises(RuntimeError, match="SymIntArrayRef expected to contain only "
                                               "concrete integers"):
            factory(size, device)


def _attention(device, cross: bool):
    g = torch.Generator().manual_seed(0)
    queries = [torch.randn(n, 2, 8, generator=g) for n in (3, 5, 1)]
    keys = [torch.randn(n, 2, 8, generator=g) for n in (4, 2, 6)] if cross else queries
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the prototype API's warning
        q, k = (torch.nested.nested_tensor([t.to(device) for t in ts], layout=torch.jagged,
                                           requires_grad=True) for ts in (queries, keys))
    out = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), k.transpose(1, 2), scale=0.3).transpose(1, 2)
    (out.values() ** 2).sum().backward()
    return [*out.detach().unbind(), *q.grad.unbind(), *k.grad.unbind()], out._ragged_idx


@pytest.mark.parametrize("cross", [pytest.param(False, marks=pytest.mark.slow), True])
def test_jagged_scaled_dot_product_attention_as_cpu(cross):
    # PyTorch's math backend for jagged SDPA builds a strided nested tensor, which tpu does
    # not have: it failed with "If inputs are nested tensors they must be contiguous".
    (actual, ragged), (expected, e_ragged) = _attention(TPU, cross), _attention("cpu", cross)
    assert ragged == e_ragged
    assert_same(actual, expected)
    with pytest.raises(RuntimeError, match="No viable backend"):
        q = torch.nested.nested_tensor([torch.ones(2, 1, 4, device=TPU)], layout=torch.jagged)
        torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), q.transpose(1, 2),
                                                         q.transpose(1, 2), is_causal=True)
