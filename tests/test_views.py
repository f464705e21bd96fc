"""Views alias their base: a write through any view is seen by the base and every view."""

from __future__ import annotations

import pytest
import torch
from conftest import TPU, assert_same, raises_as_cpu

import torchtpu

# Every case runs in every eager mode (strict, debug, fused).
pytestmark = pytest.mark.usefixtures("eager_mode")


def _both(fn):
    base = torch.arange(24.0).reshape(4, 6)
    expected = fn(base.clone())
    actual = fn(base.to("tpu"))
    assert_same(actual, expected)


@pytest.mark.parametrize(
    "write",
    [
        lambda x: x[1].add_(100),
        lambda x: x.t()[2].mul_(-1),
        lambda x: x.view(24)[5:10].fill_(7),
        lambda x: x.view(2, 12)[1, ::3].zero_(),
        lambda x: x.narrow(1, 2, 3).sub_(1),
        lambda x: x[:, 1:5][1:3, ::2].copy_(torch.full((2, 2), -5.0, device=x.device)),
        lambda x: x.transpose(0, 1)[::2].mul_(2),
        lambda x: x.unsqueeze(0)[0, 3].fill_(9),
        lambda x: x.diagonal().add_(1000),
        lambda x: x.select(1, 4).copy_(torch.arange(4.0, device=x.device)),
        lambda x: x[::2, 1::2].neg_(),
        lambda x: x.view(4, 2, 3).permute(2, 0, 1)[1].add_(0.5),
        lambda x: x.unbind(0)[2].mul_(3),
        lambda x: x.split(2, dim=1)[1].add_(1),
        lambda x: x.chunk(2)[1].clamp_(max=15),
    ],
)
def test_write_through_view_reaches_base(write):
    def fn(x):
        write(x)
        return x

    _both(fn)


def test_every_other_view_sees_the_write():
    def fn(x):
        row = x[1]
        col = x[:, 2]
        flat = x.view(-1)
        t = x.t()
        row.add_(10)  # (1, 2) is in both row and col
        return [x, row, col, flat, t, t[2]]

    _both(fn)


def test_chained_views_and_base_writes():
    def fn(x):
        v = x[1:3].t()[1:4]
        w = v[0]
        x.mul_(2)  # a write through the base is seen by all views
        w.add_(1)
        return [x, v, w]

    _both(fn)


def test_view_metadata_matches_pytorch():
    c = torch.zeros(4, 6)
    t = c.to("tpu")
    for f in (lambda x: x.t(), lambda x: x[1:3, ::2], lambda x: x[2], lambda x: x.view(3, 8),
              lambda x: x.expand(2, 4, 6), lambda x: x.unsqueeze(1).transpose(0, 2)):
        a, e = f(t), f(c)
        assert a.shape == e.shape
        assert a.stride() == e.stride()
        assert a.storage_offset() == e.storage_offset()
        assert a.is_contiguous() == e.is_contiguous()
        assert a._base is t or a._base is None and e._base is None


def test_invalid_view_raises_pytorch_error():
    t = torch.zeros(4, 6, device="tpu")
    with pytest.raises(RuntimeError, match="invalid for input of size 24"):
        t.view(5, 5)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        t.t().view(24)


def test_contiguous_and_reshape_of_transposed():
    def fn(x):
        y = x.t().contiguous()
        z = x.t().reshape(24)
        y.add_(1)  # a copy: must not reach the base
        return [x, y, z]

    _both(fn)


def test_detach_shares_storage():
    def fn(x):
        d = x.detach()
        d[0, 0] = 42.0
        return x

    _both(fn)


def test_inplace_on_view_with_autograd():
    def fn(x):
        x = x.clone().requires_grad_(True)
        y = x * 2
        y[1].mul_(3)
        y.sum().backward()
        return [y, x.grad]

    _both(fn)


@pytest.mark.parametrize("op", [
    lambda t: t.transpose_(0, 1), lambda t: t.t_(), lambda t: t.unsqueeze_(1),
    lambda t: t.squeeze_(), lambda t: t.as_strided_((2, 2), (1, 3), 1),
    lambda t: t.swapdims_(0, 1),
])
def test_inplace_view_ops_change_geometry_not_data(op):
    a = torch.arange(6.0).reshape(1, 2, 3).squeeze(0)
    c, t = a.clone(), a.to(TPU)
    assert op(t) is t
    op(c)
    assert t.shape == c.shape and t.stride() == c.stride()
    assert_same(t, c)
    t.mul_(10)
    c.mul_(10)
    assert_same(t, c)


def test_inplace_view_op_on_a_view_writes_through_to_its_base():
    a = torch.arange(12.0).reshape(3, 4)
    c, t = a.clone(), a.to(TPU)
    vc, vt = c[1:, ::2], t[1:, ::2]
    vc.t_()
    vt.t_()
    vc.add_(100)
    vt.add_(100)
    assert_same(vt, vc)
    assert_same(t, c)


def test_resize_keeps_elements_and_grows_storage():
    a = torch.arange(6.0).reshape(2, 3)
    c, t = a.clone(), a.to(TPU)
    for size in [(4,), (2, 3), (1, 6)]:
        c.resize_(size)
        t.resize_(size)
        assert_same(t, c)
    t.resize_(3, 4)  # grows: the first 6 elements stay, the rest is new memory
    assert t.shape == (3, 4)
    assert_same(t.flatten()[:6], a.flatten())
    t.fill_(1.0)
    assert t.sum().item() == 12


@pytest.mark.parametrize("size", [[8, 8, 2**29, 2**29], [2, 4, 2**29, 2**29], [-1], [2, -3]])
def test_resize_refuses_sizes_in_cpus_order(size):
    # The element count overflows (a negative size counts as huge) before the byte count.
    raises_as_cpu(lambda d: torch.empty((), device=d).resize_(size))


def test_out_argument_of_another_shape_is_resized():
    a = torch.randn(2, 3)
    out = torch.empty(0, device=TPU)
    torch.add(a.to(TPU), 1, out=out)
    assert_same(out, a + 1)
    out = torch.empty(5, device=TPU)
    with pytest.warns(UserWarning, match="resized"):
        torch.mul(a.to(TPU), 2, out=out)
    assert_same(out, a * 2)


def test_conj_and_neg_bit_views_carry_their_values():
    # PyTorch marks these with a bit on a view; here they are copies with the values applied
    # (before, the view read its base's values and the conjugation was lost: hfft, ihfft).
    z = torch.randn(5, dtype=torch.complex64)
    t = z.to("tpu")
    assert torch.equal(torch.ops.aten._conj(t).cpu(), z.conj().resolve_conj())
    assert torch.equal(torch.ops.aten._neg_view(t).cpu(), -z)
    torch.testing.assert_close(torch.fft.hfft(t).cpu(), torch.fft.hfft(z))
    x = torch.randn(6)
    torch.testing.assert_close(torch.fft.ihfft(x.to("tpu")).cpu(), torch.fft.ihfft(x))


def test_dtype_views_of_the_same_size_alias_their_base():
    # x.view(torch.int32) reads and writes x's bits, as on CPU (bit tricks, quantisation code).
    x = torch.randn(4, 3)
    t = x.to("tpu")
    y, yc = t.view(torch.int32), x.view(torch.int32)
    assert torch.equal(y.cpu(), yc)
    y.add_(1)
    yc.add_(1)
    # 1.5's bits: XLA:CPU flushes denormals (7's bits as a float) to zero where CPU does not
    y[1:, 1].fill_(0x3FC00000)
    yc[1:, 1].fill_(0x3FC00000)
    y.view(torch.float32).mul_(2)
    yc.view(torch.float32).mul_(2)
    assert torch.equal(t.cpu(), x)
    t.add_(1)
    x.add_(1)
    assert torch.equal(y.cpu(), yc)
    b = torch.randn(5).to(torch.bfloat16)
    bt = b.to("tpu")
    bt.view(torch.int16).bitwise_xor_(1)
    b.view(torch.int16).bitwise_xor_(1)
    assert torch.equal(bt.cpu(), b)


def test_views_of_another_element_size_alias_their_base():
    # view_as_real / view_as_complex and x.view(dtype) of another size read and write the
    # base's bytes (torch.optim updates a complex parameter through view_as_real).
    def run(device):
        z = torch.arange(12, dtype=torch.float32).view(6, 2).to(device)
        c = torch.view_as_complex(z)
        r = torch.view_as_real(c[1:4])
        r[:, 1].mul_(-2)
        c[5] = 7 + 8j
        b = z.view(torch.uint8)
        b[0, 0:4] = 0
        h = z[3].view(torch.float16)
        h[1] = 1.5
        w = z.view(torch.int64)
        w[4].add_(1)
        return z, c, torch.view_as_real(c), b[2], h, w

    assert_same(run("tpu"), run("cpu"))


def test_as_strided_of_a_real_view_of_complex_reads_its_reals():
    # as_strided of x.real counts float elements of the complex storage (stft frames x.real
    # so, and ffts the frames)
    def run(device):
        z = torch.complex(torch.arange(6.0), -torch.arange(6.0)).to(device)
        return z.imag.as_strided((2, 3), (2, 1), 1), z.real.as_strided((3,), (4,))

    assert_same(run("tpu"), run("cpu"))


@pytest.mark.parametrize(
    "dtype", [torch.int16, torch.float64, torch.uint8, torch.complex64, torch.bool])
def test_dtype_views_of_an_empty_tensor_scale_the_last_dimension(dtype):
    def run(device):
        v = torch.zeros(0, 5, 64, device=device).view(dtype)
        return v.shape, v.stride(), v.dtype

    assert run("tpu") == run("cpu")


def test_a_bool_view_writes_only_its_bytes():
    def run(device):
        x = torch.tensor([0, 1, 2, 3], dtype=torch.uint8).to(device)
        x.view(torch.bool)[0] = True
        return x

    assert_same(run("tpu"), run("cpu"))


def test_a_view_with_its_bases_geometry_runs_nothing(monkeypatch):
    # detach, alias and a view to the same shape take the base's value: no program (a
    # jitted identity would copy it; torch.compile's backward detaches every gradient).
    from torchtpu.runtime.execute import Executable

    x = torch.randn(4, 4, device=TPU)
    ran = []
    call = Executable.__call__
    monkeypatch.setattr(Executable, "__call__", lambda self, *a, **k: (
        ran.append(self.name), call(self, *a, **k))[1])
    views = [x.detach(), torch.ops.aten.alias(x), x.view(4, 4), x[:]]
    assert ran == []
    monkeypatch.undo()
    for y in views:
        assert y._storage is x._storage
    views[0].add_(1)  # still a view: the base sees the write
    assert_same(x, views[1].cpu())
    c = torch.randn(3, dtype=torch.complex64, device=TPU)
    assert_same(c.conj().resolve_conj(), c.cpu().conj())  # same geometry, conj bit set


def test_assigning_data_replaces_values_shape_and_dtype():
    p = torch.zeros(3, device=TPU)
    p.data = torch.ones(3, device=TPU)
    assert_same(p, torch.ones(3))
    b = torch.zeros(2, 3, device=TPU)
    b.data = torch.arange(4, device=TPU)[1:]  # another shape, dtype and a view
    assert_same(b, torch.arange(4)[1:])
    layer = torch.nn.Linear(3, 2).to(TPU)
    vec = torch.nn.utils.parameters_to_vector(layer.parameters())
    torch.nn.utils.vector_to_parameters(2 * vec, layer.parameters())
    assert_same(torch.nn.utils.parameters_to_vector(layer.parameters()), 2 * vec)


def test_assigning_data_across_cpu_and_tpu_moves_parameters_in_place():
    # The old idiom `p.data = p.data.to(device)`: PyTorch's C++ refused it ("incompatible
    # tensor type"); the parameter objects (the optimizer's, a tag on one) must stay.
    torch.manual_seed(0)
    cpu, layer = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    layer.load_state_dict(cpu.state_dict())
    weight = layer.weight
    weight.note = "kept"
    opt = torch.optim.SGD(layer.parameters(), lr=0.1)
    for p in layer.parameters():
        p.data = p.data.to(TPU)
    assert layer.weight is weight and weight.device.type == "tpu" and weight.note == "kept"
    assert isinstance(weight, torch.nn.Parameter) and weight.requires_grad
    x = torch.randn(4, 3)
    for model, optimizer, inputs in ((cpu, torch.optim.SGD(cpu.parameters(), lr=0.1), x),
                                     (layer, opt, x.to(TPU))):
        model(inputs).square().sum().backward()
        optimizer.step()
    assert_same(layer.weight, cpu.weight)
    for p in layer.parameters():
        p.data = p.data.cpu()
    assert type(weight) is torch.nn.Parameter and weight.device.type == "cpu"
    assert_same(layer(x), cpu(x))


def test_assigning_data_across_cpu_and_tpu_moves_a_buffer_in_place():
    # `b.data = b.data.to(device)` for a module's buffers (a plain tensor), as on cuda.
    bn = torch.nn.BatchNorm1d(3)
    buffer = bn.running_mean
    buffer.data = buffer.data.to(TPU) + 1
    assert bn.running_mean is buffer and buffer.device.type == "tpu"
    assert_same(buffer, torch.ones(3))
    plain = torch.zeros(2)
    plain.data = torch.ones(3)  # a CPU value: PyTorch's own setter
    assert_same(plain, torch.ones(3))
    with pytest.raises(TypeError, match="Variable data has to be a tensor"):
        plain.data = 3


def test_deepcopy_of_views_copies_their_storage_once():
    import copy

    x = torch.arange(6.0, device=TPU)
    base, view, t = copy.deepcopy([x, x[1:3], x.view(2, 3).t()])
    assert_same(view, torch.tensor([1.0, 2.0]))
    assert_same(base, torch.arange(6.0))
    view.add_(10)  # as on CPU: the copies share one copied storage
    assert_same(base, torch.tensor([0.0, 11.0, 12.0, 3.0, 4.0, 5.0]))
    assert_same(t, torch.tensor([[0.0, 3.0], [11.0, 4.0], [12.0, 5.0]]))
    assert (view.storage_offset(), t.stride()) == (1, (1, 3))
    assert_same(x, torch.arange(6.0))  # the copy is its own
    alone = copy.deepcopy(x[2:])  # a view alone: its whole storage, its offset
    assert alone.storage_offset() == 2 and alone.untyped_storage().nbytes() == 24
    assert_same(alone, torch.arange(2.0, 6.0))
    t = torch.ones(2, device=TPU, requires_grad=True)
    t.grad = torch.full((2,), 3.0, device=TPU)
    t.note = "kept"
    t2 = copy.deepcopy(t)
    assert t2.requires_grad and t2.note == "kept"
    assert_same(t2.grad, torch.full((2,), 3.0))


@pytest.mark.parametrize("device", ["cpu", TPU])
def test_deepcopy_of_views_as_another_dtype_shares_the_copied_storage(device):
    import copy

    x = torch.arange(4.0, device=device)
    v = x.view(torch.int32)
    base, same, tail = copy.deepcopy([x, v, v[1:]])
    base[1] = 7.0  # seen through the int32 views of the copy, as on CPU
    assert same.tolist()[:2] == [0, 1088421888] and tail.tolist()[0] == 1088421888
    z = copy.deepcopy(torch.view_as_real(torch.tensor([1 + 2j, 3 + 4j], device=device))[1:])
    assert z.tolist() == [[3.0, 4.0]] and z.storage_offset() == 2 and x.tolist()[1] == 1.0


@pytest.mark.parametrize("device", ["cpu", TPU])
def test_deepcopy_of_a_parameter_leaves_its_grad_behind(device):
    # As Parameter.__deepcopy__ does: a copied model (an EMA's, a snapshot) has no grads, and
    # an optimizer over it does not step with the original's.
    import copy

    w = torch.nn.Parameter(torch.ones(2, device=device))
    w.grad = torch.full((2,), 3.0, device=device)
    w.note = "dropped"
    w2, w3 = copy.deepcopy([w, w])
    assert isinstance(w2, torch.nn.Parameter) and w2.requires_grad and w2 is w3
    assert w2.grad is None and not hasattr(w2, "note") and w2.device == w.device
    assert_same(w2, torch.ones(2))


@pytest.mark.parametrize("op", ["pow_", "floor_divide_", "float_power_"])
@pytest.mark.parametrize("other", ["tensor", "number"])
def test_in_place_ops_whose_functional_overload_is_named_otherwise(op, other):
    # pow_.Tensor is pow.Tensor_Tensor, floor_divide_.Tensor floor_divide.default.
    dtype = torch.float64 if op == "float_power_" else torch.float32

    def run(device):
        x = torch.tensor([5.0, 7.0, -3.0], dtype=dtype, device=device)
        arg = torch.tensor([2.0, 3.0, 2.0], dtype=dtype, device=device) if other == "tensor" else 2
        getattr(x, op)(arg)
        n = torch.tensor([5, 7, -3], device=device)
        n //= 2
        return x, n

    assert_same(run(TPU), run("cpu"))


@pytest.mark.parametrize("op", ["add_", "mul_", "relu_", "copy_", "uniform_", "clamp_", "fill_",
                                "zero_", "masked_fill_", "tril_", "unsqueeze_", "threshold_"])
def test_writing_through_an_expanded_tensor_as_cpu(op):
    # CPU refuses most in-place ops on a tensor whose elements repeat; a few it allows.
    args = {"add_": (1,), "mul_": (2,), "copy_": (torch.ones(4, 3),), "clamp_": (0, 1),
            "fill_": (1.0,), "masked_fill_": (torch.ones(4, 3, dtype=torch.bool), 1.0),
            "unsqueeze_": (0,), "threshold_": (0.5, 9.0)}.get(op, ())
    outcomes = []
    for device in ("cpu", TPU):
        x = torch.arange(3.0, device=device).expand(4, 3)
        try:
            fn = torch.threshold_ if op == "threshold_" else getattr(torch.Tensor, op)
            fn(x, *(a.to(device) if isinstance(a, torch.Tensor) else a for a in args))
            outcomes.append("ran")
        except RuntimeError as e:
            assert "more than one element of the written-to tensor" in str(e)
            outcomes.append("refused")
    assert outcomes[1] == outcomes[0]


_PARTIAL_MASK = [[False, False, True, False], [False] * 4, [True, False, False, False]]


@pytest.mark.parametrize("write", [
    lambda x, i: x.reshape(3, 1).expand(3, 4).index_fill_(1, i, 9.0),
    lambda x, i: x.reshape(3, 1).expand(3, 4).masked_fill_(
        torch.tensor(_PARTIAL_MASK, device=x.device), -1.0),
    lambda x, i: x.reshape(3, 1).expand(3, 4).index_put_((i, i),
                                                         torch.tensor(5.0, device=x.device)),
    lambda x, i: x.unfold(0, 2, 1).index_fill_(1, i, 7.0),
], ids=["index_fill", "masked_fill", "index_put", "unfold"])
def test_writing_some_elements_of_an_overlapping_view_as_cpu(write):
    # CPU writes only the elements the op writes: the view's other elements, which share
    # their memory, must not write the old values back.
    def run(device):
        x = torch.arange(3.0, device=device)
        write(x, torch.tensor([1], device=device))
        return x

    assert_same(run(TPU), run("cpu"))


@pytest.mark.parametrize("make", [
    lambda d: torch.empty_strided((2, 0), (12, 1), device=d),
    lambda d: torch.empty_strided((0, 3), (1, 5), device=d),
    lambda d: torch.empty_strided((2, 0), (0, 0), device=d),
])
def test_copies_of_an_empty_tensor_keep_its_strides(make):
    # c10 counts every empty layout as dense, so preserve_format copies keep it
    def strides(device):
        x = make(device)
        copies = [x.clone(), torch.empty_like(x), x.to(torch.float64), torch.zeros_like(x),
                  x.clone(memory_format=torch.contiguous_format)]
        return [c.stride() for c in copies]

    assert strides(TPU) == strides("cpu")


@pytest.mark.parametrize("case", [
    "shifted_copy", "shifted_setitem", "add_out", "add_partial", "add_full", "add_disjoint",
    "transposed_copy", "addcmul_partial", "sigmoid_out", "masked_fill_partial_mask"])
def test_reading_memory_the_op_writes_as_cpu(case):
    # CPU refuses an input that shares some, not all, of the memory an op writes (it would
    # read elements already overwritten); exactly the written tensor is fine.
    ops = {
        "shifted_copy": lambda x: x[1:].copy_(x[:-1]),
        "shifted_setitem": lambda x: x.__setitem__(slice(1, None), x[:-1]),
        "add_out": lambda x: torch.add(x[:3], 1, out=x[1:4]),
        "add_partial": lambda x: x[:3].add_(x[1:4]),
        "add_full": lambda x: x[:3].add_(x[:3]),
        "add_disjoint": lambda x: x[:3].add_(x[3:6]),
        "transposed_copy": lambda x: x[:9].view(3, 3).copy_(x[:9].view(3, 3).t()),
        "addcmul_partial": lambda x: x[:3].addcmul_(x[2:5], x[3:6]),
        "sigmoid_out": lambda x: torch.sigmoid(x[:4], out=x[2:6]),
        "masked_fill_partial_mask": lambda x: x[:3].masked_fill_(x[1:4] > 2, 0),
    }
    outcomes = []
    for device in ("cpu", TPU):
        x = torch.arange(9.0, device=device)
        try:
            ops[case](x)
            outcomes.append(x.cpu())
        except RuntimeError as e:
            assert "some elements of the input tensor and the written-to tensor" in str(e)
            outcomes.append("refused")
    if isinstance(outcomes[0], str):
        assert outcomes[1] == "refused"
    else:
        assert_same(outcomes[1], outcomes[0])


def test_set_to_another_tensor_takes_its_storage_and_geometry():
    def run(device):
        a = torch.zeros(2, device=device)
        b = torch.arange(6.0, device=device).view(2, 3).t()
        a.set_(b)
        geometry = (a.shape, a.stride(), a.storage_offset(), a.is_set_to(b))
        a.add_(1)  # writes through to b
        c = torch.zeros(1, device=device)
        c.set_(torch.arange(10.0, device=device)[3:7])
        return geometry, b, c, c.storage_offset()

    assert_same(run(TPU), run("cpu"))
    with pytest.raises(RuntimeError, match="Could not set tensor of type double to a tensor "
                                           "of type float"):
        torch.zeros(2, device=TPU).set_(torch.ones(3, dtype=torch.float64, device=TPU))


@pytest.mark.parametrize("fn", [
    lambda x, out: torch.pow(x, 2, out=out),
    lambda x, out: torch.pow(2, x, out=out),
    lambda x, out: torch.remainder(x, 2, out=out),
    lambda x, out: torch.fmod(x, 2, out=out),
    lambda x, out: torch.xlogy(x, 3, out=out),
    lambda x, out: torch.special.xlog1py(x, 3, out=out),
], ids=["pow", "pow_number_base", "remainder", "fmod", "xlogy", "xlog1py"])
def test_out_forms_taking_a_number(fn):
    # pow.Tensor_Scalar_out computes pow.Tensor_Scalar: overloads are told apart by type too.
    def run(device):
        out = torch.empty(5, device=device)
        fn(torch.arange(5.0, device=device), out)
        return out

    assert_same(run(TPU), run("cpu"))


def test_views_of_normal_tensors_under_inference_mode():
    # Meta's Llama generates under inference_mode, writing its KV cache (made before) through
    # slices; nanoGPT slices its causal-mask buffer. A view of a normal tensor is normal.
    def run(device):
        weight = torch.nn.Parameter(torch.arange(16.0, device=device).reshape(4, 4))
        cache = torch.zeros(2, 6, 3, device=device)
        with torch.inference_mode():
            cache[:, 1:3] = torch.ones(2, 2, 3, device=device)
            rows = weight[:2]
            parts = weight.split(2)
            made_inside = torch.ones(3, device=device)[:2]
            flags = (rows.is_inference(), parts[1].is_inference(), made_inside.is_inference())
            out = weight.t() @ rows.t()
        return flags, cache, out, (rows * 2).sum()

    flags, *values = run(TPU)
    expected_flags, *expected = run("cpu")
    assert flags == expected_flags == (False, False, True)
    assert_same(values, expected)


def test_views_of_inference_tensors_are_inference_tensors():
    # Outside inference mode too: an in-place write through one is refused, as on CPU.
    def run(device):
        with torch.inference_mode():
            x = torch.zeros(3, device=device)
        view = x[1:]
        assert view.is_inference()
        view.add_(1)

    raises_as_cpu(run)


@pytest.mark.parametrize("bad", [
    lambda d: torch.arange(4.0, device=d).as_strided((3, 3), (2, 1)),
    lambda d: torch.arange(6.0, device=d)[2:].as_strided((2, 2), (2, 1), 3),
    lambda d: torch.arange(6.0, device=d)[:2].as_strided_((4,), (1,), 3),
])
def test_as_strided_past_the_storage_is_refused(bad):
    raises_as_cpu(bad)


def test_a_view_reaches_its_whole_storage():
    def run(device):
        x = torch.arange(24.0, device=device).reshape(4, 6)
        sizes = [v.untyped_storage().nbytes() for v in (x[1], x[:, 2], x.diagonal())]
        tail = x.view(24)[:2].as_strided_((4,), (1,), 20)  # past the view, inside its base
        return sizes, tail

    assert_same(run(TPU), run("cpu"))


def test_a_view_written_twice_over_reads_back_its_storage():
    # as_strided((3, 3), (1, 1)) reaches element 2 three times: one write stays, and the
    # view reads what its storage holds.
    def run(device):
        x = torch.arange(8.0, device=device)
        v = x.as_strided((3, 3), (1, 1))
        v.copy_(torch.arange(9.0).reshape(3, 3).to(device))
        return v.clone(), x

    assert_same(run(TPU), run("cpu"))


def test_conj_and_neg_views_alias_their_base():
    # z.conj() is a view with PyTorch's conj bit: writes through it reach z (conjugated
    # back), and it sees later writes to z; .imag of it is a neg view.
    def run(device):
        z = torch.tensor([1 + 2j, 3 - 1j, -2 + 0.5j], device=device)
        c = z.conj()
        bits = (c.is_conj(), c.imag.is_neg(), c.conj().is_conj(), c.resolve_conj().is_conj())
        c.mul_(2j)
        c[1] = 5 + 5j
        c.imag[2] = 7.0
        z.add_(1j)
        m = z.reshape(1, 3).expand(2, 3).clone()
        m.mH[0, 1] = 0
        x = torch.arange(3.0, device=device)
        n = torch._neg_view(x)
        x[0] = 10.0
        return bits, z, c.clone(), m, m.mH.stride(), n.clone(), n.is_neg()

    assert_same(run(TPU), run("cpu"))


def test_view_as_real_of_an_unresolved_conj_is_refused():
    raises_as_cpu(lambda d: torch.view_as_real(torch.ones(2, dtype=torch.complex64,
                                                          device=d).conj()))


def test_view_as_complex_of_halves_names_the_missing_complex32():
    # CPU pairs halves into a complex32 tensor; tpu has no complex32 (XLA lacks it) and says
    # so as it does for torch.zeros(..., dtype=torch.complex32), not with lax.complex's
    # TypeError about float16 (torch_dct.idct of a half tensor met it)
    halves = torch.ones(3, 2, dtype=torch.float16, device=TPU)
    with pytest.raises(RuntimeError,
                       match=r"^torchtpu: dtype torch.complex32 is not supported on tpu"):
        torch.view_as_complex(halves).cpu()


def test_a_view_repeated_on_bases_of_other_geometries_is_each_bases_own():
    # The same view call (op and arguments) on 4x4 bases that differ in strides, offset,
    # storage size or math bits: each answers as on CPU, the second time round as the first.
    def bases(device):
        wide = torch.arange(24.0, device=device).reshape(4, 6)
        square = torch.arange(16.0, device=device).reshape(4, 4)
        z = torch.arange(8.0, device=device).view(torch.complex64)
        short = torch.arange(22.0, device=device).as_strided((4, 4), (6, 1))  # as wide[:, :4]
        return [square, wide[:, :4], wide[:, 2:], square.t(), short], [z, z.conj()]

    def run(device):
        out = []
        for _ in range(2):
            reals, complexes = bases(device)
            for v in reals:
                out += [(tuple(w.shape), w.stride(), w.storage_offset(), w.cpu())
                        for w in (v.diagonal(), v.select(0, 1), v.unsqueeze(0), v.t())]
            out += [(w.is_conj(), w.resolve_conj().cpu())
                    for w in (z.unsqueeze(0) for z in complexes)]
        return out

    assert_same(run(TPU), run("cpu"))
    def outcome(view, device):
        try:
            return view(device).cpu()
        except RuntimeError as e:
            return str(e).splitlines()[0]  # (debug mode adds where the op ran)

    for _ in range(2):  # valid for one base, invalid for the next: as on CPU each time
        for i in range(5):
            for view in (lambda d, i=i: bases(d)[0][i].view(16),
                         lambda d, i=i: bases(d)[0][i].as_strided((4, 4), (1, 4), 8)):
                assert_same(outcome(view, TPU), outcome(view, "cpu"))


def test_a_loop_over_rows_and_windows_compiles_once():
    # x[i] and x[i:i + n] in a loop: their index is an input of the program, not a constant
    # of one program per index (PyTorch's own tests do this over thousands of rows).
    def run(device, spans):
        x = torch.zeros(64, 3, device=device)
        src = torch.arange(192.0, device=device).reshape(64, 3)
        acc = torch.zeros(4, 3, device=device)
        for lo, hi in spans:
            for i in range(lo, hi):
                x[i] = src[i]
                x[i + 1:i + 3] += 1
                acc = acc + src[i:i + 4]
            x.cpu()
        return x, acc

    spans = [(0, 4), (4, 8), (8, 12), (20, 24), (40, 44)]
    torchtpu.debug.reset_metrics()
    actual = run("tpu", spans[:2])
    first = dict(torchtpu.debug.metrics()["compile"])
    actual = run("tpu", spans)
    assert torchtpu.debug.metrics()["compile"] == first
    assert_same(actual, run("cpu", spans))


@pytest.mark.parametrize("size, step", [(0, 1), (0, 2), (1, 1)])
def test_unfold_of_a_0d_tensor_is_a_window_of_size(size, step):
    x = torch.tensor(0.5)
    assert_same(x.to("tpu").unfold(0, size, step), x.unfold(0, size, step))


@pytest.mark.parametrize("size, stride", [((2, 3, 4), (2, 4, 6)), ((4, 3, 2), (10, 3, 1)),
                                          ((2, 3, 4), (0, 0, 0)), ((4, 1, 1, 2), (10, 0, 0, 2))])
def test_empty_strided_with_gaps_or_overlaps_as_cpu(size, stride):
    # Such a layout came out contiguous, over a storage of its element count: as_strided over
    # empty_strided's storage (PyTorch's own test does that) went out of bounds.
    def run(device):
        t = torch.empty_strided(size, stride, device=device).fill_(1.5)
        over = torch.empty(t.untyped_storage().nbytes() // 4, device=device).as_strided(
            size, stride)
        return t.stride(), t.untyped_storage().nbytes(), t, over.shape

    tpu, cpu = run(TPU), run("cpu")
    assert tpu[:2] == cpu[:2] and tpu[3] == cpu[3]
    assert_same(tpu[2], cpu[2])


@pytest.mark.parametrize("size, stride", [
    ((2, 4, 2 ** 29, 2 ** 29), (2 ** 60, 2 ** 58, 2 ** 29, 1)), ((8, 8), (2 ** 61, 1)),
    ((2,), (-1,))])
@pytest.mark.parametrize("new", [False, True])
def test_empty_strided_beyond_int64_bytes_raises_as_cpu(size, stride, new):
    # PyTorch's test_empty_overflow on tpu: a TypeError from jax, and for a dense layout XLA
    # aborted the process (its element count overflowed).
    def call(device):
        if new:
            return torch.zeros(1, dtype=torch.float64, device=device).new_empty_strided(size,
                                                                                        stride)
        return torch.empty_strided(size, stride, dtype=torch.float64, device=device)

    raises_as_cpu(call)


def test_a_decompositions_result_never_aliases_its_input():
    # An op whose schema returns fresh memory: a decomposition that returns (a view of) its
    # input, as `flattened[index]` does for a 0-d index, gets a copy.
    from torchtpu.eager.dispatch import _in_memory_of_its_own

    x = torch.arange(6.0, device="tpu")
    out = _in_memory_of_its_own(lambda args, kwargs: args[0][2])((x,), {})
    assert out.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    x.add_(1)
    assert out.item() == 2.0
    pair = _in_memory_of_its_own(lambda args, kwargs: (args[0] * 2, args[0][1:]))((x,), {})
    assert pair[1].untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    assert torch.equal(pair[1].cpu(), x[1:].cpu())
