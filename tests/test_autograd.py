"""Autograd through lowered ops: gradients live on tpu and equal CPU's."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import TPU, assert_same, raises_as_cpu

CASES = [
    lambda x, w: (x @ w).tanh().sum(),
    lambda x, w: F.gelu(x @ w).pow(2).mean(),
    lambda x, w: F.layer_norm(x @ w, (5,)).sigmoid().sum(),
    lambda x, w: F.cross_entropy(x @ w, torch.tensor([1, 0, 4], device=x.device)),
    lambda x, w: F.softmax(x @ w, -1).log().sum(),
    lambda x, w: (x.t()[1:3] * 2).exp().sum() + w.norm(),
    lambda x, w: F.silu(x).sum() + F.relu(w).sum() + F.leaky_relu(w, 0.2).sum(),
    lambda x, w: torch.cat([x, x * 3], 1).max(1).values.sum() + w.abs().sum(),
    lambda x, w: F.embedding(torch.tensor([[0, 2], [1, 1]], device=x.device), x).sum() + w.sum(),
    lambda x, w: F.dropout(x, 0.0).mean() + (w / (w.abs() + 1)).var(),
    lambda x, w: F.mse_loss(x @ w, torch.ones(3, 5, device=x.device)),
    lambda x, w: x.view(-1)[::2].sum() + w[:, 1].prod(),
    lambda x, w: torch.cdist(x, w.t()).sum(),
    lambda x, w: F.scaled_dot_product_attention(
        x[None, None], x[None, None], (x @ w)[None, None, :, :4], is_causal=True).sum(),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_gradients_match_cpu(case, eager_mode):
    fn = CASES[case]
    torch.manual_seed(case)
    x0, w0 = torch.randn(3, 4), torch.randn(4, 5)
    grads = []
    for dev in ("cpu", "tpu:0"):
        x = x0.to(dev).detach().requires_grad_(True)
        w = w0.to(dev).detach().requires_grad_(True)
        loss = fn(x, w)
        loss.backward()
        assert x.grad.device.type == dev.split(":")[0]
        grads.append((loss, x.grad, w.grad))
    assert_same(grads[1], grads[0], rtol=1e-4, atol=1e-5)


def test_retain_graph_and_accumulation():
    out = []
    for dev in ("cpu", "tpu:0"):
        x = torch.arange(4.0, device=dev, requires_grad=True)
        y = (x * x).sum()
        y.backward(retain_graph=True)
        y.backward()
        out.append(x.grad)
    assert_same(out[1], out[0])


def test_no_grad_and_detach():
    x = torch.ones(3, device="tpu", requires_grad=True)
    with torch.no_grad():
        y = x * 2
    assert not y.requires_grad
    z = (x * 2).detach()
    assert not z.requires_grad and z.device.type == "tpu"
    w = x * 3
    assert w.requires_grad and w.grad_fn is not None


def test_autograd_grad_and_double_backward():
    res = []
    for dev in ("cpu", "tpu:0"):
        x = torch.tensor([0.5, 1.5], device=dev, requires_grad=True)
        (g,) = torch.autograd.grad((x**3).sum(), x, create_graph=True)
        (gg,) = torch.autograd.grad(g.sum(), x)
        res.append((g, gg))
    assert_same(res[1], res[0])


@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_forward_and_backward(mode, index_dtype):
    # (int32 indices: max's row of each bag was lost to an int64 sentinel, a zero gradient)
    torch.manual_seed(0)
    w0 = torch.randn(10, 3)
    idx = torch.tensor([1, 2, 4, 5, 4, 3, 9, 0], dtype=index_dtype)
    off = torch.tensor([0, 2, 2, 5], dtype=index_dtype)  # bag 1 is empty
    psw = torch.rand(8) if mode == "sum" else None
    res = []
    for dev in ("cpu", "tpu"):
        w = w0.to(dev).detach().requires_grad_(True)
        out = torch.nn.functional.embedding_bag(
            idx.to(dev), w, off.to(dev), mode=mode,
            per_sample_weights=None if psw is None else psw.to(dev))
        (out * torch.arange(3.0, device=dev)).sum().backward()
        res.append((out, w.grad))
    assert_same(res[1], res[0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("fn", [torch.linalg.det, lambda a: torch.linalg.slogdet(a)[1],
                                lambda a: torch.logdet(a).real],
                         ids=["det", "slogdet", "logdet"])
def test_determinant_gradients(fn, layout, dtype):
    # CPU's _linalg_det returns the LU of A^T for a contiguous real A, and the backward picks
    # its solve by A's contiguity: both layouts, real and complex.
    a = torch.randn(3, 4, 4, dtype=dtype, generator=torch.Generator().manual_seed(0))
    a = a + 4 * torch.eye(4, dtype=dtype)  # positive determinants: logdet is real
    if layout == "transposed":
        cpu = a.mT.contiguous().mT.requires_grad_()
        tpu = a.mT.contiguous().to("tpu").mT.detach().requires_grad_()
    else:
        cpu, tpu = a.clone().requires_grad_(), a.to("tpu").requires_grad_()
    assert tpu.is_contiguous() == cpu.is_contiguous()
    fn(cpu).abs().sum().backward()
    fn(tpu).abs().sum().backward()
    assert_same(tpu.grad, cpu.grad, rtol=1e-4, atol=1e-5)


def test_forward_mode_transforms():
    # Forward-mode AD asks whether a tangent's storage matches its primal's
    # (_has_same_storage_numel): tensor metadata, answered without a program.
    from torch.func import hessian, jacfwd, jvp

    x = torch.randn(4)
    t = x.to("tpu")
    out, tangent = jvp(torch.sin, (t,), (torch.ones(4, device="tpu"),))
    assert_same(out, torch.sin(x))
    assert_same(tangent, torch.cos(x))
    assert_same(jacfwd(torch.tanh)(t), jacfwd(torch.tanh)(x))
    f = lambda w: (w.sin() * w).sum()  # noqa: E731
    assert_same(hessian(f)(t), hessian(f)(x), rtol=1e-5)


def test_jvp_through_a_python_number():
    # The number's zero tangent is a ZeroTensor, whose mul kernel infers its shape on meta
    # copies of the arguments: a tpu tensor's .to("meta") must be one.
    from torch.func import jvp

    out, tangent = jvp(lambda w: w * 2, (torch.ones(3, device="tpu"),),
                       (torch.ones(3, device="tpu"),))
    assert_same(tangent, torch.full((3,), 2.0))


def _assert_same_sparse(actual, expected):
    assert actual.layout == expected.layout == torch.sparse_coo and actual.device.type == "tpu"
    assert actual.is_coalesced() == expected.is_coalesced()
    assert torch.equal(actual._indices().cpu(), expected._indices())
    assert_same(actual._values(), expected._values())


@pytest.mark.parametrize("bag", [False, True])
def test_sparse_embedding_gradient_is_sparse_as_on_cpu(bag):
    # Embedding(sparse=True) and EmbeddingBag(sparse=True) give a sparse COO gradient, entry
    # for entry CPU's (they were dense on tpu before it had sparse tensors).
    torch.manual_seed(0)
    make = (lambda: torch.nn.EmbeddingBag(10, 3, mode="mean", sparse=True, padding_idx=0)) \
        if bag else (lambda: torch.nn.Embedding(10, 3, sparse=True, padding_idx=0))
    cpu, tpu = make(), make()
    tpu.load_state_dict(cpu.state_dict())
    tpu.to("tpu")
    ids = torch.tensor([[1, 2, 0], [2, 2, 5]])
    cpu(ids).pow(2).sum().backward()
    tpu(ids.to("tpu")).pow(2).sum().backward()
    _assert_same_sparse(tpu.weight.grad, cpu.weight.grad)


def test_gather_sparse_grad_gradient_is_sparse_as_on_cpu():
    x = torch.randn(10, 5)
    index = torch.tensor([[0, 1, 1], [4, 4, 2]])
    grads = []
    for device in ("cpu", TPU):
        leaf = x.to(device).detach().requires_grad_()
        out = torch.gather(leaf, 1, index.to(device), sparse_grad=True)
        (out * torch.arange(6.0).view(2, 3).to(device)).sum().backward()
        grads.append(leaf.grad)
    _assert_same_sparse(grads[1], grads[0])


def test_forward_mode_ad_with_tangents_laid_out_unlike_their_primals():
    import torch.autograd.forward_ad as fwAD

    def run(device):
        out = []
        with fwAD.dual_level():  # a transposed (non-contiguous) tangent
            x = fwAD.make_dual(torch.ones(2, 3, device=device),
                               torch.arange(6.0, device=device).reshape(3, 2).T)
            out.append(fwAD.unpack_dual(x * 2).tangent)
        with fwAD.dual_level():  # a dual written into a plain tensor
            z = torch.zeros(3, device=device)
            z[1:] = fwAD.make_dual(torch.ones(2, device=device), torch.ones(2, device=device))
            out.append(fwAD.unpack_dual(z).tangent)
        _, jvp_fn = torch.func.linearize(torch.sin, torch.arange(5.0, device=device))
        out.append(jvp_fn(torch.ones(5, device=device)))
        return out

    assert_same(run(TPU), run("cpu"))


def test_make_fx_traces_ops_on_tpu_constants():
    from torch.fx.experimental.proxy_tensor import make_fx

    scale = torch.arange(4.0, device=TPU)
    graph = make_fx(lambda t: t.sin() * scale)(torch.ones(4, device=TPU))
    expected = torch.full((4,), 2.0).sin() * torch.arange(4.0)
    assert_same(graph(torch.full((4,), 2.0, device=TPU)), expected)


@pytest.mark.parametrize("fn", [torch.nn.functional.silu, torch.nn.functional.mish,
                                lambda q: torch.nn.functional.scaled_dot_product_attention(
                                    q, q.flip(-1), q * 2, is_causal=True)],
                         ids=["silu", "mish", "attention"])
def test_forward_mode_ad_through_ops_with_their_own_autograd(fn):
    # silu/mish's Function had no jvp (NotImplementedError); attention's tangent was None.
    import torch.autograd.forward_ad as fwAD

    g = torch.Generator().manual_seed(0)
    x, t = torch.randn(1, 2, 4, 8, generator=g), torch.randn(1, 2, 4, 8, generator=g)

    def tangent(device):
        with fwAD.dual_level():
            return fwAD.unpack_dual(fn(fwAD.make_dual(x.to(device), t.to(device)))).tangent

    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        expected = tangent("cpu")  # (CPU's flash kernel has no forward formula)
    assert_same(tangent("tpu"), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("p", [0, 0.5, 1, 1.5, 2, 3, float("inf")])
def test_cdist_gradient_where_points_coincide_is_cpus(p):
    # cdist(x, x) has zero distances on its diagonal (and, here, a coordinate difference of
    # 0 in one pair): CPU's kernel gives those pairs no gradient, and sign(0) = 0.
    x = torch.tensor([[0.0, 0.0], [1.0, 1.0], [1.0, 0.0]])
    grads = []
    for device in ("cpu", TPU):
        a = x.detach().to(device).requires_grad_()
        d = torch.cdist(a, a, p=p)
        (d * torch.arange(9.0, device=device).reshape(3, 3)).sum().backward()
        grads.append(a.grad)
    assert_same(grads[1], grads[0])


def test_a_cpu_gradient_for_a_tpu_output_is_refused_as_on_cuda():
    # The engine skips its device check for a Python-dispatch tensor: the leaf got a CPU .grad.
    x = torch.ones(2, device="tpu", requires_grad=True)
    for call in (lambda: (x * 2).backward(torch.ones(2)),
                 lambda: torch.autograd.grad(x * 2, x, torch.ones(2))):
        with pytest.raises(RuntimeError, match="invalid gradient at index 0 - expected device "
                                               "tpu:0 but got cpu"):
            call()
    (x.sum() * 2).backward(torch.tensor(1.0))  # a 0-d one moves, as the engine moves it
    assert x.grad.device.type == "tpu" and x.grad.tolist() == [2.0, 2.0]


@pytest.mark.parametrize("leaf_device", ["cpu", TPU])
def test_a_tpu_gradient_for_a_cpu_output_is_refused_as_on_cuda(leaf_device):
    # The engine skipped its device check for the Python-dispatch gradient, then failed an
    # internal assert on streams ("opt_ready_stream && opt_parent_stream").
    leaf = torch.ones(2, device=leaf_device, requires_grad=True)
    out = leaf.to("cpu") * 2
    for call in (lambda: out.backward(torch.ones(2, device=TPU), retain_graph=True),
                 lambda: torch.autograd.grad(out, leaf, torch.ones(2, device=TPU))):
        with pytest.raises(RuntimeError, match="invalid gradient at index 0 - expected "
                                               "device cpu but got tpu:0"):
            call()
    (out.sum() * 2).backward(torch.tensor(1.0, device=TPU))  # a 0-d one moves
    assert leaf.grad.device == leaf.device and leaf.grad.tolist() == [4.0, 4.0]


def test_a_dual_of_tensors_on_two_devices():
    # PyTorch compares their storages' sizes; ours read a CPU tensor's as a tpu one's.
    import torch.autograd.forward_ad as fwAD

    t = torch.ones(2, device="tpu")
    for primal, tangent in ((t, torch.ones(2)), (torch.ones(2), t)):
        with fwAD.dual_level():
            dual = fwAD.make_dual(primal, tangent)
            assert fwAD.unpack_dual(dual).tangent.device == tangent.device
    assert not t.is_set_to(torch.ones(2))


def test_a_saved_tensor_written_in_place_is_named_as_cudas():
    def backward(device):
        y = torch.randn(3, device=device, requires_grad=True).sigmoid()
        y.add_(1)
        y.sum().backward()

    with pytest.raises(RuntimeError) as on_cpu:
        backward("cpu")
    with pytest.raises(RuntimeError) as on_tpu:
        backward(TPU)
    # CPU's "[torch.FloatTensor [3]]" is "[torch.cuda.FloatTensor [3]]" on cuda
    assert "[torch.FloatTensor [3]], which is output 0 of Sigmoid," in str(on_cpu.value)
    assert str(on_tpu.value) == str(on_cpu.value).replace("torch.Float", "torch.tpu.Float")


def test_parameters_made_inside_torch_func_transforms():
    # linearize's jvp_fn folds its constants into Parameters, here under vmap; a Parameter
    # of a captured tensor under grad is one of grad's level, as CPU's _make_subclass makes it
    def run(device):
        c = torch.arange(3.0, device=device)
        _, jvp_fn = torch.func.linearize(lambda x: (x.cos() * c, x.sum()), c + 1)
        out = list(torch.func.vmap(jvp_fn)(torch.ones(2, 3, device=device)))
        for requires_grad in (False, True):
            def f(x, requires_grad=requires_grad):
                p = torch.nn.Parameter(c * 2, requires_grad=requires_grad)
                assert isinstance(p, torch.nn.Parameter) and p.requires_grad == requires_grad
                return (x * p * x).sum()

            out.append(torch.func.grad(f)(c))
            out.append(torch.func.vmap(torch.func.grad(f))(torch.ones(2, 3, device=device)))

        def g(x):  # a Parameter subclass, through Tensor._make_subclass
            return x * Scaled(c) * torch.Tensor._make_subclass(Scaled, c, True)

        out.append(torch.func.vmap(g)(torch.ones(2, 3, device=device)))
        out.append(torch.func.grad(lambda x: g(x).sum())(c))
        return out

    class Scaled(torch.nn.Parameter):
        pass


    assert_same(run(TPU), run("cpu"))


def test_silu_of_a_complex_input_that_requires_grad_is_refused_as_on_cpu():
    # silu runs our own autograd kernel on tpu; CPU's generated one refuses a complex result
    raises_as_cpu(lambda d: F.silu(torch.ones(3, dtype=torch.complex64, device=d,
                                              requires_grad=True)))
    assert F.silu(torch.ones(3, dtype=torch.complex64, device="tpu")).is_complex()
