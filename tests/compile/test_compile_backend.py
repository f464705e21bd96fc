"""torch.compile(backend="tpu"): inference, training graphs, mutation, RNG, graph breaks."""

from __future__ import annotations

import warnings

import pytest
import torch
from compile_testlib import count as _count
from compile_testlib import fresh_dynamo  # noqa: F401  (autouse fixture)
from conftest import TPU, assert_same
from torch import nn

import torchtpu
from torchtpu.debug import explain_recompile


def test_function_matches_cpu():
    def f(x, y):
        return torch.softmax(x @ y.T, -1).sum(0) * 2 + x.mean()

    x, y = torch.randn(4, 8), torch.randn(5, 8)
    out = torch.compile(f, backend="tpu")(x.to(TPU), y.to(TPU))
    assert out.device.type == "tpu"
    assert_same(out, f(x, y))


def test_default_backend_compiles_tpu_graphs_here():
    # torch.compile(model) means inductor, which cannot compile a graph on 'tpu'.
    model = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 2))
    x = torch.randn(4, 8)
    expected = model(x)
    model.to(TPU)
    traces = _count("graph", "trace")
    out = torch.compile(model)(x.to(TPU))
    assert _count("graph", "trace") > traces
    assert_same(out, expected)


def test_tensors_made_inside_the_graph_on_the_device():
    # HF's DynamicCache does torch.tensor([], device=x.device): PyTorch builds a real device
    # tensor while tracing and lifts it into the graph as a constant.
    def f(x):
        empty = torch.tensor([], dtype=x.dtype, device=x.device)
        scale = torch.tensor([1.0, 2.0, 3.0], device=x.device)
        return torch.cat([empty, x * scale], dim=-1)

    x = torch.randn(2, 3)
    assert_same(torch.compile(f, backend="tpu")(x.to(TPU)), f(x))

    # Training: AOTAutograd's joint trace records them as real constants, and the forward
    # program takes them in (HF models train under torch.compile with use_cache on).
    xt = x.to(TPU).requires_grad_()
    xc = x.clone().requires_grad_()
    out = torch.compile(f, backend="tpu")(xt)
    (out * out).sum().backward()
    (f(xc) * f(xc)).sum().backward()
    assert_same(out, f(x))
    assert_same(xt.grad, xc.grad)
    assert _count("graph", "eager_graph") == 0


def test_dtype_conversions_and_integer_indexing_stay_in_the_program():
    # RMSNorm's x.to(float32) and gathers by position ids: one program, not an eager graph.
    def f(x, i):
        y = x.to(torch.bfloat16).float() * 2
        return y[i].sum() + x[:, i].to(torch.float64).sum()

    x, i = torch.randn(4, 4), torch.tensor([0, 2, 3])
    xt = x.to(TPU).requires_grad_()
    xc = x.clone().requires_grad_()
    out = torch.compile(f, backend="tpu")(xt, i.to(TPU))
    out.backward()
    f(xc, i).backward()
    assert_same(out, f(x, i))
    assert_same(xt.grad, xc.grad)
    assert _count("graph", "eager_graph") == 0


def test_grouped_mm_in_float32_compiles():
    # Hugging Face's mixture-of-experts layers call torch._grouped_mm on tpu for any dtype;
    # PyTorch's meta kernel admits only bfloat16, so the fake-tensor rule is ours.
    offs = torch.tensor([2, 2, 6], dtype=torch.int32)  # expert 1 gets no tokens

    def experts(x, w):
        return torch._grouped_mm(x, w, offs=offs.to(x.device)).relu().sum(0)

    def by_loop(x, w):
        bounds = [(0, 2), (2, 2), (2, 6)]
        rows = [x[lo:hi] @ w[g] for g, (lo, hi) in enumerate(bounds)]
        return torch.cat(rows).relu().sum(0)

    x, w = torch.randn(6, 4), torch.randn(3, 4, 8)
    xt, wt = x.to(TPU).requires_grad_(), w.to(TPU).requires_grad_()
    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    out = torch.compile(experts, backend="tpu")(xt, wt)
    out.sum().backward()
    by_loop(xc, wc).sum().backward()
    assert_same(out, by_loop(x, w))
    assert_same(xt.grad, xc.grad)
    assert_same(wt.grad, wc.grad)
    assert _count("graph", "eager_graph") == 0


def test_as_strided_runs_in_the_program_when_its_source_is_dense():
    # AOTAutograd regenerates views with as_strided (Swin's pooling does), and their
    # backward scatters with as_strided_scatter: both by storage geometry.
    def f(x):
        windows = x.as_strided((3, 2, 2), (2, 4, 1), 1)
        return (windows * windows).sum(0)

    x = torch.randn(4, 4)
    xt, xc = x.to(TPU).requires_grad_(), x.clone().requires_grad_()
    out = torch.compile(f, backend="tpu")(xt)
    out.sum().backward()
    f(xc).sum().backward()
    assert_same(out, f(x))
    assert_same(xt.grad, xc.grad)
    assert _count("graph", "eager_graph") == 0

    # A source that is not its own dense storage (a transpose): the graph runs eagerly,
    # with CPU's result.
    def g(x):
        return x.t().as_strided((2, 2), (1, 4), 2) * 2

    assert_same(torch.compile(g, backend="tpu")(x.to(TPU)), g(x))
    assert _count("graph", "eager_graph") >= 1


def test_a_graph_run_op_by_op_views_results_laid_out_otherwise_than_cpus():
    # PyTorch checked the graph's views against its strides; a tpu result may be laid out
    # otherwise (a scatter into a transposed tensor comes out contiguous): Longformer's
    # chunking (as_strided of a view keeps its graph eager) raised "view size is not
    # compatible".
    def f(x):
        z = torch.zeros(4, 6, device=x.device).t()
        z[:, :2] = x
        w = z.t().view(24)
        return w, (x + 1)[1:].as_strided((2, 2), (1, 1))

    x = torch.randn(6, 2)
    assert_same(torch.compile(f, backend="tpu")(x.to(TPU)), f(x))
    assert _count("graph", "eager_graph") >= 1


def test_a_masked_scalar_assignment_runs_inside_the_program():
    # A padding mask's h[~mask] = 0 (Wav2Vec2, HuBERT): a select, no data-dependent shape.
    def f(h, mask):
        h = h * 3
        h[~mask] = 0
        h[h > 2] = 2.0
        return h

    torch.manual_seed(0)
    h, mask = torch.randn(2, 5, 3, requires_grad=True), torch.rand(2, 5) > 0.4
    ht = h.detach().to(TPU).requires_grad_()
    out, expected = torch.compile(f, backend="tpu")(ht, mask.to(TPU)), f(h, mask)
    out.sum().backward()
    expected.sum().backward()
    assert_same(out, expected)
    assert_same(ht.grad, h.grad)
    assert _count("graph", "eager_graph") == 0


def test_addcdiv_and_addcmul_with_a_value():
    # Dynamo traces them (single-tensor Adam/AdamW, foreach=False) into inductor's prims.fma.
    def f(p, a, b):
        p.addcdiv_(a, b, value=-0.1)
        p.addcmul_(a, b, value=0.5)
        return p * 2

    p, a, b = torch.randn(5), torch.randn(5), torch.rand(5) + 0.5
    pt = p.to(TPU)
    out = torch.compile(f, backend="tpu")(pt, a.to(TPU), b.to(TPU))
    expected = f(p, a, b)
    assert_same(out, expected)
    assert_same(pt, p)
    assert _count("graph", "eager_graph") == 0


def test_inference_graph_writes_its_inputs():
    # An optimizer step's shape: inputs updated in place under no_grad, inside the program.
    def step(p, m, g):
        m.mul_(0.9).add_(g)
        p.sub_(m[None], alpha=0.1)
        return p.sum()

    p, m, g = torch.randn(3, 4), torch.randn(4), torch.randn(4)
    pt, mt = p.to(TPU), m.to(TPU)
    row = pt[1]  # a view: sees the write through its base
    version = pt._version
    with torch.no_grad():
        out = torch.compile(step, backend="tpu")(pt, mt, g.to(TPU))
        expected = step(p, m, g)
    assert_same(out, expected)
    assert_same(pt, p)
    assert_same(mt, m)
    assert_same(row, p[1])
    assert pt._version > version  # autograd sees the mutation
    assert _count("graph", "eager_graph") == 0


def test_module_forward_backward_matches_cpu():
    torch.manual_seed(0)
    cpu = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 3))
    tpu = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 3))
    tpu.load_state_dict(cpu.state_dict())
    tpu.to(TPU)
    x = torch.randn(5, 6)
    compiled = torch.compile(tpu, backend="tpu")
    compiled(x.to(TPU)).square().sum().backward()
    cpu(x).square().sum().backward()
    for a, b in zip(tpu.parameters(), cpu.parameters(), strict=True):
        assert_same(a.grad, b.grad, rtol=1e-5, atol=1e-6)


def test_batchnorm_running_stats_written_back():
    torch.manual_seed(0)
    cpu = nn.BatchNorm1d(4)
    tpu = nn.BatchNorm1d(4).to(TPU)
    x = torch.randn(8, 4) * 3 + 1
    out = torch.compile(tpu, backend="tpu")(x.to(TPU))
    assert_same(out, cpu(x), rtol=1e-5, atol=1e-5)
    assert_same(tpu.running_mean, cpu.running_mean, rtol=1e-5, atol=1e-6)
    assert_same(tpu.running_var, cpu.running_var, rtol=1e-5, atol=1e-6)
    assert int(tpu.num_batches_tracked.cpu()) == 1


def test_dropout_draws_from_the_seeded_stream():
    def f(x):
        return nn.functional.dropout(x, 0.5, training=True) + 1

    x = torch.ones(64, 32).to(TPU)
    compiled = torch.compile(f, backend="tpu")
    torch.manual_seed(3)
    a = compiled(x).cpu()
    b = compiled(x).cpu()  # the stream advanced: a different mask
    torch.manual_seed(3)
    eager = f(x).cpu()
    assert torch.equal(a, eager)  # same seed, same draw as eager tpu
    assert not torch.equal(a, b)
    torch.manual_seed(3)
    assert torch.equal(compiled(x).cpu(), a)


@pytest.mark.parametrize("factory", [
    lambda: torch.randn(64, 32, device=TPU),
    lambda: torch.randn(64, 32, device=TPU, dtype=torch.bfloat16),
    lambda: torch.rand(64, 32, device=TPU),
    lambda: torch.randint(3, 9, (64, 32), device=TPU),
    lambda: torch.randint(9, (64, 32), device=TPU, dtype=torch.int32),
    lambda: torch.normal(2.0, 3.0, (64, 32), device=TPU),
], ids=["randn", "randn_bf16", "rand", "randint_low", "randint_int32", "normal"])
def test_random_factories_lower_and_draw_as_eager(factory):
    compiled = torch.compile(lambda: factory() * 1, backend="tpu")
    torch.manual_seed(5)
    a, b = compiled().cpu(), compiled().cpu()
    torch.manual_seed(5)
    eager = factory().cpu()
    assert torch.equal(a, eager)  # same seed, same draw and dtype as eager tpu
    assert not torch.equal(a, b)
    assert _count("graph", "eager_graph") == 0


def test_graph_breaks_print_and_item(capsys):
    def f(x):
        y = x.sin() * 2
        print("halfway")
        s = y.sum().item()
        return y + s

    x = torch.randn(3, 5)
    out = torch.compile(f, backend="tpu")(x.to(TPU))
    assert "halfway" in capsys.readouterr().out
    assert_same(out, f(x), rtol=1e-5, atol=1e-5)


def test_recompile_is_counted_and_explained():
    def f(x):
        return x.cos() + 1

    compiled = torch.compile(f, backend="tpu", dynamic=False)
    before = _count("graph", "recompile")
    compiled(torch.randn(3, 4).to(TPU))
    compiled(torch.randn(3, 4).to(TPU))
    assert _count("graph", "recompile") == before
    compiled(torch.randn(3, 4, dtype=torch.float64).to(TPU))
    assert _count("graph", "recompile") == before + 1
    text = explain_recompile()
    assert "float32[3, 4]" in text and "float64[3, 4]" in text
    assert "guard failed" in text


def test_identical_graph_hits_the_program_cache():
    def f(x):
        return (x * 3).tanh()

    x = torch.randn(4, 4).to(TPU)
    torch.compile(f, backend="tpu")(x)
    torch._dynamo.reset()  # Dynamo forgets; our program cache does not
    hits, traces = _count("cache", "hit"), _count("graph", "trace")
    out = torch.compile(f, backend="tpu")(x)
    assert _count("cache", "hit") == hits + 1
    assert _count("graph", "trace") == traces
    assert_same(out, (x.cpu() * 3).tanh())


def test_unknown_option_is_an_error():
    import pytest

    with pytest.raises(Exception, match="unknown torch.compile option"):
        torch.compile(lambda x: x + 1, backend="tpu", options={"bukets": [8]})(
            torch.ones(2).to(TPU)
        )


def test_inductors_options_are_ignored_with_a_warning():
    # A script tuned for inductor (max_autotune, triton.cudagraphs) runs on tpu unchanged.
    import pytest

    f = torch.compile(lambda x: x + 1, backend="tpu",
                      options={"max_autotune": True, "triton.cudagraphs": False})
    with pytest.warns(UserWarning, match="ignores inductor's option"):
        assert_same(f(torch.ones(2).to(TPU)), torch.full((2,), 2.0))


def test_modes_are_inductors_names():
    import pytest

    x = torch.ones(2).to(TPU)
    for mode in ("reduce-overhead", "max-autotune"):  # nothing for XLA to do differently
        assert_same(torch.compile(lambda x: x + 1, backend="tpu", mode=mode)(x), x.cpu() + 1)
    with pytest.raises(Exception, match="Unrecognized mode=max-autotun, should be one of"):
        torch.compile(lambda x: x + 2, backend="tpu", mode="max-autotun")(x)


def test_import_and_eager_ops_do_not_load_dynamo_and_compiling_after_them_works():
    # (the meta kernels strict eager runs imported it on the first op: ~2 s per process)
    import subprocess
    import sys

    code = """if True:
        import sys, torch, torchtpu
        print('torch._dynamo' in sys.modules)
        x = torch.randn(4, 4, device='tpu')
        y = torch.nn.functional.layer_norm(torch.sin(x), (4,)).softmax(-1).var(0)
        print('torch._dynamo' in sys.modules)
        f = torch.compile(lambda t: torch.sin(t).softmax(-1), backend='tpu')
        print(torch.allclose(f(x).cpu(), torch.sin(x.cpu()).softmax(-1)))
        meta = torch._decomp.global_decomposition_table['post_autograd'][torch.ops.aten.sin.default]
        import torch._dynamo
        compiled = torch.compile(lambda t: meta(t) * 2, backend='eager', fullgraph=False)
        print(torch.allclose(compiled(x.cpu()), torch.sin(x.cpu()) * 2))
    """
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["False", "False", "True", "True"]
    assert torchtpu  # the package under test


def test_an_output_that_is_an_input_is_that_tensor():
    # What a compiled forward saves for its backward is often a weight: handed back as the
    # weight itself, not a copy the program made.
    from torch import fx

    from torchtpu.compile.lower_fx import Program

    def f(x, y):
        return x, torch.ops.aten.add.Tensor(x, y), y

    gm = fx.symbolic_trace(f)
    x, y = torch.randn(3, 4, device=TPU), torch.randn(3, 4, device=TPU)
    a, b, c = Program(gm, "forward")([x, y])
    assert a is x and c is y
    assert_same(b, x.cpu() + y.cpu())


def test_compiled_model_in_fused_eager_takes_pending_inputs_and_gradients():
    # The input (x * 2) and the backward's incoming gradient are values fused eager has
    # recorded but not run: the compiled program computes them first.
    torch.manual_seed(0)
    layer = nn.Linear(3, 2)
    x = torch.randn(4, 3)
    expected = layer(x * 2).sin()
    expected.sum().backward()
    on_tpu = nn.Linear(3, 2).to(TPU)
    on_tpu.load_state_dict(layer.state_dict())
    compiled = torch.compile(on_tpu, backend="tpu")
    with torchtpu.set_eager_mode("fused"):
        out = compiled(x.to(TPU) * 2).sin()
        out.sum().backward()
    assert_same(out, expected)
    assert_same(on_tpu.weight.grad, layer.weight.grad)


def test_data_dependent_shapes_inside_a_compiled_function():
    # x[mask], torch.where(cond), masked_select: Dynamo's graph break at them failed on tpu
    # tensors (NameError in its generated code); the graph now keeps them.
    def f(a, b):
        out = a.clone()
        out[b > 0] = b[b > 0]
        return a[a > 0].sum(), torch.where(a > 0)[0], torch.masked_select(a, b > 0), out

    a, b = torch.randn(4, 5), torch.randn(4, 5)
    assert_same(torch.compile(f, backend="tpu")(a.to(TPU), b.to(TPU)), f(a, b))


def test_a_comparison_with_a_number_lives_across_a_graph_break():
    # Dynamo took a tpu tensor for a subclass with its own __torch_function__, so `x > 0`
    # came back from a graph break through a global it had not installed (NameError).
    def f(x):
        y = x > 0
        torch._dynamo.graph_break()
        return y.sum(), (0.5 <= x) & y

    x = torch.randn(3, 5)
    assert_same(torch.compile(f, backend="tpu")(x.to(TPU)), f(x))


def test_transformer_with_a_padding_mask_made_in_forward():
    # PyTorch's translation tutorial: the bool padding mask beside a float causal mask makes
    # nn.Transformer warn, a graph break with the mask still in use.
    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(11, 16, padding_idx=0)
            self.tf = nn.Transformer(16, 2, 1, 1, 32, dropout=0.0, batch_first=True)

        def forward(self, src, tgt):
            causal = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1],
                                                                    device=tgt.device)
            return self.tf(self.emb(src), self.emb(tgt), tgt_mask=causal,
                           src_key_padding_mask=src == 0, tgt_key_padding_mask=tgt == 0)

    torch.manual_seed(0)
    model = Seq2Seq()
    src, tgt = torch.tensor([[3, 4, 5, 0], [6, 7, 0, 0]]), torch.tensor([[1, 2, 0], [3, 0, 0]])
    expected = model(src, tgt)
    out = torch.compile(model.to(TPU), backend="tpu")(src.to(TPU), tgt.to(TPU))
    assert_same(out, expected, rtol=1e-4, atol=1e-5)


def test_torch_cond_eager_compiled_and_differentiated():
    # A higher-order op asks each tensor subclass for a rule; tpu takes the dense kernel's.
    def f(x):
        return torch.cond(x.sum() > 0, lambda t: t.sin(), lambda t: t.cos() * 2, (x,))

    for sign in (1.0, -1.0):
        x = torch.linspace(0.1, 1.0, 4) * sign
        on_tpu = x.to(TPU).requires_grad_()
        out = f(on_tpu)
        out.sum().backward()
        cpu = x.clone().requires_grad_()
        expected = f(cpu)
        expected.sum().backward()
        assert_same(out, expected)
        assert_same(on_tpu.grad, cpu.grad)
        eager_graphs = _count("graph", "eager_graph")
        assert_same(torch.compile(f, backend="tpu")(x.to(TPU)), expected)
        assert _count("graph", "eager_graph") == eager_graphs  # lax.cond, in the program


def test_nested_cond_trains_compiled_as_on_cpu():
    # Branches that call the module's layers: AOTAutograd's forward and backward graphs both
    # hold conds, lowered into their programs.
    class Gate(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

        def forward(self, x):
            def other(v):
                return torch.cond(v.sum() < -1, lambda u: self.b(u), lambda u: u * 3, (v,))
            return torch.cond(x.mean() > 0, lambda v: self.a(v).relu(), other, (x,)).pow(2).sum()

    torch.manual_seed(0)
    cpu = Gate()
    tpu = Gate().to(TPU)
    tpu.load_state_dict(cpu.state_dict())
    compiled = torch.compile(tpu, backend="tpu")
    eager_graphs = _count("graph", "eager_graph")
    for sign in (1.0, -1.0, -0.01):
        x = torch.linspace(0.1, 1.2, 12).view(3, 4) * sign
        cpu.zero_grad()
        tpu.zero_grad()
        loss, expected = compiled(x.to(TPU)), cpu(x)
        loss.backward()
        expected.backward()
        assert_same(loss, expected, rtol=1e-5)
        for p, q in zip(tpu.parameters(), cpu.parameters(), strict=True):
            assert_same(p.grad if q.grad is not None else None, q.grad, rtol=1e-5, atol=1e-6)
    assert _count("graph", "eager_graph") == eager_graphs


def _while(x):
    from torch._higher_order_ops.while_loop import while_loop

    step = torch.zeros((), dtype=torch.long, device=x.device)
    return while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * 2), (step, x))[1]


def _scan(x):
    from torch._higher_order_ops.scan import scan

    return scan(lambda c, r: (c + r, c * r), torch.zeros(4, device=x.device), x)[1]


def _map(x):
    from torch._higher_order_ops.map import map as map_rows

    return map_rows(lambda r, y: r.sin() + y, x, torch.ones(4, device=x.device))


@pytest.mark.parametrize("fn", [_while, _scan, _map], ids=["while_loop", "scan", "map"])
def test_loop_higher_order_ops_eager_and_compiled(fn):
    # They asked TpuTensor for a rule and found none (only torch.cond had one).
    x = torch.linspace(-1, 1, 24).reshape(6, 4)
    assert_same(fn(x.to(TPU)), fn(x))
    eager_graphs = _count("graph", "eager_graph")
    assert_same(torch.compile(fn, backend="tpu")(x.to(TPU)), fn(x))
    assert _count("graph", "eager_graph") == eager_graphs  # its lax form, in the program


def test_while_loop_over_a_tensor_made_in_the_function():
    # FakeTensorMode kept torch.tensor(0, device="tpu") as a real constant and ran the body's
    # `i + 1` on it for real: "could not find kernel for aten.add.out at PrivateUse1".
    from torch._higher_order_ops.while_loop import while_loop

    def f(x, n):
        start = torch.tensor(0, device=x.device)
        return while_loop(lambda i, v: (i < n) & (v.sum() < 1e4),
                          lambda i, v: (i + 1, v.abs() * 1.5 + i), (start, x))

    x, n = torch.linspace(-1, 1, 12).view(3, 4), torch.tensor(7)
    assert_same(torch.compile(f, backend="tpu")(x.to(TPU), n.to(TPU)), f(x, n))


def test_scan_differentiated():
    # Its backward takes views' _copy forms (select_copy) PyTorch has no decomposition for.
    x = torch.linspace(-1, 1, 24).reshape(6, 4)
    on_tpu, cpu = x.to(TPU).requires_grad_(), x.clone().requires_grad_()
    _scan(on_tpu).sum().backward()
    _scan(cpu).sum().backward()
    assert_same(on_tpu.grad, cpu.grad)


def test_an_exported_program_with_a_dtype_conversion_runs():
    # torch.export checks each conversion's result with _assert_tensor_metadata.
    class Model(torch.nn.Module):
        def forward(self, x):
            return x.float() * 2 + x.to(torch.float64).sum()

    x = torch.linspace(-1, 1, 12).reshape(3, 4)
    program = torch.export.export(Model(), (x.to(TPU),))
    assert_same(program.module()(x.to(TPU)), Model()(x))
    with pytest.raises(RuntimeError, match="Tensor dtype mismatch! Expected: Double, Got: "):
        torch.ops.aten._assert_tensor_metadata(x.to(TPU), dtype=torch.float64)


def test_integer_indexing_in_a_graph_compiled_under_fused_eager():
    # index and index_put's rules are Python that calls executables (Hugging Face builds its
    # attention masks so): inside a program's trace fused eager's recorder took them.
    def f(x, i):
        y = x.clone()
        y[i] += 1
        return y[i] * 2, y

    x, i = torch.arange(4.0), torch.tensor([0, 2])
    with torchtpu.set_eager_mode("fused"):
        out = torch.compile(f, backend="tpu")(x.to(TPU), i.to(TPU))
        assert_same(out, f(x, i))


def test_a_tensor_made_on_tpu_inside_a_compiled_function():
    # Dynamo makes such a constant for real while tracing: JAX's copy of it ran frames
    # Dynamo then tried to compile (a dataclass's generated __init__).
    f = torch.compile(lambda: torch.tensor([1.5], device="tpu") * 2, backend="tpu")
    assert_same(f(), torch.tensor([3.0]))


def test_a_compiled_cast_into_a_narrow_integer_wraps_as_eager():
    # Out of range float -> uint8 is undefined in C++; CPU (and eager tpu) wrap through int64.
    v = torch.tensor([-1.5, -3.0, 300.0, 2.7])
    f = torch.compile(lambda t: (t.to(torch.uint8), (t * 2).to(torch.int8)), backend="tpu")
    assert_same(f(v.to(TPU)), (v.to(torch.uint8), (v * 2).to(torch.int8)))


def test_outputs_computed_on_the_cpu_stay_on_the_cpu():
    x, i = torch.randn(3), torch.arange(3)
    doubled, shifted = torch.compile(lambda a, j: (a * 2, j + 1), backend="tpu")(x.to(TPU), i)
    assert doubled.device.type == "tpu" and shifted.device.type == "cpu"
    assert_same(shifted, i + 1)


def test_compiled_matmul_refuses_mixed_dtypes_as_eager_does():
    import pytest

    f = torch.compile(lambda a, b: a @ b, backend="tpu")
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype"):
        f(torch.randn(4, 6).to(TPU), torch.randn(6, 2, dtype=torch.float64).to(TPU))


@pytest.mark.parametrize("fn", [
    lambda a: torch.linalg.inv(a).sum(),
    lambda a: torch.linalg.cholesky(a @ a.T).diagonal().sum(),
    lambda a: torch.linalg.solve(a, a[:, :2]).sum(),
], ids=["inv", "cholesky", "solve"])
def test_linalg_with_error_checks_compiles(fn):
    # Their graphs hold the error check as an op with an effect (with_effects), run op by op.
    a = torch.randn(4, 4, generator=torch.Generator().manual_seed(0)) + 4 * torch.eye(4)
    on_tpu, cpu = a.to(TPU).requires_grad_(), a.clone().requires_grad_()
    out = torch.compile(fn, backend="tpu")(on_tpu)
    out.backward()
    fn(cpu).backward()
    torch.testing.assert_close(out.cpu(), fn(a), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(on_tpu.grad.cpu(), cpu.grad, rtol=1e-4, atol=1e-5)


def test_linalg_error_of_a_compiled_graph_is_cpus():
    with pytest.raises(torch.linalg.LinAlgError, match="diagonal element 1 is zero"):
        torch.compile(torch.linalg.inv, backend="tpu")(torch.zeros(3, 3, device=TPU))


def test_a_cpu_input_moved_onto_the_device_comes_back_there():
    # Inside a program the move is a no-op: the output is the input, but on tpu.
    x = torch.arange(3.0)
    assert torch.compile(lambda t: t.to(TPU), backend="tpu")(x).device.type == "tpu"

    def step(t):
        t = t.to(TPU)
        y = t * 2
        torch._dynamo.graph_break()
        return y + t

    assert_same(torch.compile(step, backend="tpu")(x), x * 3)


@pytest.mark.parametrize("fn", [
    lambda x: x - (-1),
    lambda x: x.to(torch.int8) + 300,
    lambda x: x.clamp_min(-1),
    lambda x: torch.full((2,), -1, dtype=torch.uint8, device=x.device) + x[:2],
], ids=["uint8_minus_negative", "int8_plus_300", "clamp_min_negative", "full_wraps"])
def test_integer_numbers_out_of_the_dtypes_range_wrap_as_cpu(fn):
    x = torch.arange(10, dtype=torch.uint8)
    assert_same(torch.compile(fn, backend="tpu")(x.to(TPU)), fn(x))


@pytest.mark.parametrize("fn", [
    lambda x: x.to(torch.int8).clamp(-300, 300),
    lambda x: torch.where(x > 3, x.to(torch.int8), 200),
], ids=["clamp", "where"])
def test_integer_numbers_cpu_refuses_are_refused_under_compile(fn):
    x = torch.arange(10, dtype=torch.uint8)
    with pytest.raises(RuntimeError, match="value cannot be converted to type int8_t"):
        fn(x)
    with pytest.raises(Exception, match="value cannot be converted to type int8_t"):
        torch.compile(fn, backend="tpu")(x.to(TPU))


def test_default_backend_compiles_graphs_that_make_tpu_tensors():
    # No input on tpu, yet the graph makes tpu tensors: inductor cannot compile it.
    make = torch.compile(lambda n: torch.arange(n, device=TPU) * 2)
    assert_same(make(5), torch.arange(5) * 2)
    move = torch.compile(lambda x: x.to(TPU) * 2)
    assert_same(move(torch.ones(4)), torch.ones(4) * 2)


def test_a_changed_default_dtype_gets_its_own_program():
    # Dynamo retraces on the global change; the ATen graph's code is the same text.
    f = torch.compile(lambda x: x / 3, backend="tpu")
    ints = torch.tensor([1, 2, 7])
    assert f(ints.to(TPU)).dtype == torch.float32
    torch.set_default_dtype(torch.float64)
    try:
        out, expected = f(ints.to(TPU)), ints / 3
    finally:
        torch.set_default_dtype(torch.float32)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out.cpu(), expected)


def test_the_recompile_limit_is_explained(monkeypatch):
    # Past the limit Dynamo runs the frame uncompiled: no graph reaches the backend.
    monkeypatch.setattr(torch._dynamo.config, "recompile_limit", 2)
    f = torch.compile(lambda x, k: x * k, backend="tpu", dynamic=False)
    x = torch.ones(2, device=TPU)
    for k in range(4):
        assert f(x, k).tolist() == [k, k]
    text = explain_recompile()
    assert "recompile limit (2) reached by 1 function(s)" in text
    assert "not recompiled" in text and "k == " in text


def test_linalg_error_checks_run_when_dynamo_was_imported_first():
    # Their with_effects nodes run op by op; on the first call AOTAutograd's alias-check mode
    # is active, and a higher-order op's dispatch through it returned NotImplemented.
    script = """
import torch._dynamo
import torch, torchtpu, torchtpu.compile
torchtpu.compile.register()
inv = torch.compile(lambda a: torch.linalg.inv(a), backend="tpu")
a = torch.randn(3, 3) + 3 * torch.eye(3)
assert torch.allclose(inv(a.to("tpu")).cpu(), torch.linalg.inv(a), atol=1e-5)
try:
    inv(torch.zeros(3, 3, device="tpu"))
except torch.linalg.LinAlgError as e:
    print("singular:", e)
"""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "singular: linalg.inv" in done.stdout


def test_chunked_linear_cross_entropy_compiles():
    # Its custom ops' Python bodies write in place: run op by op, not decomposed under AOT.
    options = pytest.importorskip("torch.nn.modules.linear_cross_entropy_options")
    opts = options.LinearCrossEntropyOptions(allow_retain_graph=True, batch_chunk_size=2,
                                             chunking_method="auto", acc_policy="auto",
                                             acc_dtype=None)
    torch.manual_seed(0)
    x, w = torch.randn(5, 3), torch.randn(4, 3, requires_grad=True)
    y = torch.randint(0, 4, (5,))
    expected = nn.functional.linear_cross_entropy(x, w, y, options=opts)
    expected.backward()
    w_tpu = w.detach().to(TPU).requires_grad_()
    loss = torch.compile(nn.functional.linear_cross_entropy, backend="tpu")(
        x.to(TPU), w_tpu, y.to(TPU), options=opts)
    loss.backward()
    torch.testing.assert_close(loss.cpu(), expected)
    torch.testing.assert_close(w_tpu.grad.cpu(), w.grad)


def test_device_queries_fold_to_constants_in_a_full_graph():
    # as Dynamo folds torch.cuda.is_available() and friends
    def f(t):
        if torch.tpu.is_available() and torch.tpu.is_bf16_supported():
            t = t * torch.tpu.device_count() + torch.tpu.current_device()
        with torch.tpu.amp.autocast():
            return t @ t

    x = torch.randn(4, 4).to(TPU)
    assert_same(torch.compile(f, backend="tpu", fullgraph=True)(x), f(x))


def test_our_backward_wrapper_adds_no_graph_break():
    # Dynamo traced torchtpu's wrapper of autograd's engine call and broke at its lock.
    from torch._dynamo.utils import counters

    m = torch.nn.Linear(4, 4)

    @torch.compile(backend="eager")
    def step(x):
        loss = m(x).sum()
        loss.backward()
        return loss

    step(torch.randn(2, 4))
    assert not any("lock" in reason for reason in counters["graph_break"])


def test_ctc_loss_breaks_the_graph_as_on_cpu():
    # (its data-dependent shape breaks it on both; Dynamo then traced our kernel for tpu)
    def f(lp, targets, input_lengths, target_lengths):
        return nn.functional.ctc_loss(lp.log_softmax(-1), targets, input_lengths,
                                      target_lengths)

    args = (torch.randn(12, 2, 6), torch.randint(1, 6, (2, 4)), torch.full((2,), 12),
            torch.full((2,), 4))
    counts = {}
    for device in ("cpu", TPU):
        torch._dynamo.reset()
        counts[device] = torch._dynamo.explain(f)(*[a.to(device) for a in args]).graph_count
    assert counts[TPU] == counts["cpu"]
    assert_same(torch.compile(f, backend="tpu")(*[a.to(TPU) for a in args]), f(*args))


def test_an_rnn_run_eagerly_under_compile_traces_none_of_our_frames():
    # Dynamo runs nn.LSTM eagerly with its frame hook on: it stepped into our dispatch
    # (dropout's error-message helper, Tensor.type) and warned it could not trace a builtin.
    lstm = nn.LSTM(8, 8, 2, dropout=0.2).to(TPU)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        torch.compile(lstm, backend="tpu")(torch.randn(5, 2, 8, device=TPU))
    assert not [w for w in seen if "Dynamo" in str(w.message)]
