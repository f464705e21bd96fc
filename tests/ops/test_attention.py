"""F.scaled_dot_product_attention on tpu against CPU: one op (torchtpu::attention) wherever
CPU runs its flash kernel, PyTorch's math composite wherever CPU runs that."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
import torch
import torch.nn.functional as F
from conftest import TPU
from torch.nn.attention import SDPBackend, sdpa_kernel

import torchtpu
from torchtpu.ops import attention
from torchtpu.runtime.platform import platform

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float64: dict(rtol=1e-7, atol=1e-7),
       torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2), torch.float16: dict(rtol=1e-3, atol=1e-3)}


def _inputs(dtype=torch.float32, heads_kv=4, seq_kv=12, dim_v=8):
    torch.manual_seed(0)
    return [torch.randn(2, 4, 16, 8, dtype=dtype), torch.randn(2, heads_kv, seq_kv, 8, dtype=dtype),
            torch.randn(2, heads_kv, seq_kv, dim_v, dtype=dtype)]


def _both(fn, inputs, grad=True):
    """fn's output and input gradients on CPU and on tpu, and the tpu output's grad_fn."""
    results = []
    for device in ("cpu", TPU):
        # q, k and v require grad; a mask only if asked (CPU then runs the math path)
        xs = [x.detach().to(device).requires_grad_(grad and (i < 3 or x.requires_grad))
              for i, x in enumerate(inputs)]
        out = fn(*xs)
        grads = ()
        if grad:
            g = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).reshape(out.shape)
            grads = torch.autograd.grad(out, [x for x in xs if x.requires_grad], g.to(device))
        results.append((out, grads))
    (out_cpu, grads_cpu), (out_tpu, grads_tpu) = results
    tol = TOL[inputs[0].dtype]
    torch.testing.assert_close(out_tpu.cpu(), out_cpu, **tol)
    for a, e in zip(grads_tpu, grads_cpu, strict=True):
        torch.testing.assert_close(a.cpu(), e, **tol)
    return out_tpu.grad_fn


def _fused(grad_fn) -> bool:
    return grad_fn is not None and "torchtpu_attention" in grad_fn.name()


CASES = {
    "plain": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v), {}),
    "causal": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), {}),
    "scale": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=0.3), {}),
    "grouped": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                               enable_gqa=True),
                {"heads_kv": 2}),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("case", sorted(CASES))
def test_flash_cases_run_as_one_op_and_match_cpu(case, dtype):
    fn, shape = CASES[case]
    assert _fused(_both(fn, _inputs(dtype, **shape)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("length, kept", [(12, True), (64, False)])
def test_the_backward_reads_kept_probabilities_or_recomputes_them(length, kept, dtype):
    # Kept while no larger than the query, key, value and output the op saves anyway.
    inputs = [torch.randn(1, 2, length, 8, dtype=dtype) for _ in range(3)]
    fn = CASES["causal"][0]
    assert _fused(_both(fn, inputs))
    q, k, v = (x.to(TPU) for x in inputs)
    probs = torch.ops.torchtpu.attention(q, k, v, None, True, 0.3)[2]
    assert probs.shape == ((1, 2, length, length) if kept else (0,))


@pytest.mark.skipif(platform() != "cpu", reason="an XLA:CPU kernel choice")
@pytest.mark.parametrize("kept", [True, False])
def test_the_backward_reads_its_products_left_operands_in_rows_on_xla_cpu(kept):
    # dv = p^T @ dout and dk = ds^T @ q contract the query rows: as written, XLA:CPU runs
    # them on Eigen, ~2/3 the speed of the YNNPACK kernel that takes the operand in rows.
    q, k, v, dout, out = (jnp.ones((2, 2, 16, 8), jnp.float32) for _ in range(5))
    probs = jnp.ones((2, 2, 16, 16) if kept else (0,), jnp.float32)
    lse = jnp.zeros((2, 2, 16), jnp.float32)
    backward = jax.jit(lambda *a: attention._attention_backward(*a, True, 0.3))
    text = backward.lower(dout, q, k, v, None, out, lse, probs).compile().as_text()
    assert "lhs_batch_dims={0,1}, lhs_contracting_dims={3}" in text
    assert "lhs_batch_dims={0,1}, lhs_contracting_dims={2}" not in text


def test_grouped_low_precision_key_and_value_gradients_round_as_cpus():
    # CPU's flash kernel adds each query head's part into a bfloat16 gradient in turn
    q, k, v = _inputs(torch.bfloat16, heads_kv=2)
    grads = []
    for device in ("cpu", TPU):
        xs = [x.to(device).requires_grad_() for x in (q, k, v)]
        out = F.scaled_dot_product_attention(*xs, is_causal=True, enable_gqa=True)
        grads.append(torch.autograd.grad(out, xs[1:], torch.ones_like(out)))
    for cpu, tpu in zip(*grads, strict=True):
        assert (tpu.cpu() == cpu).float().mean() > 0.9  # one sum rounded once: ~0.7


@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_masks_match_cpu_and_a_fully_masked_row_is_zero(kind):
    q, k, v = _inputs()
    mask = torch.rand(16, 12, generator=torch.Generator().manual_seed(1)) > 0.3
    mask[3] = False  # a query that may attend to nothing: CPU gives a row of zeros
    if kind == "additive":
        mask = torch.zeros(2, 1, 16, 12).masked_fill(~mask, float("-inf"))
    grad_fn = _both(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                    [q, k, v, mask])
    assert _fused(grad_fn)
    out = F.scaled_dot_product_attention(q.to(TPU), k.to(TPU), v.to(TPU), attn_mask=mask.to(TPU))
    assert torch.equal(out[:, :, 3].cpu(), torch.zeros(2, 4, 8))


def test_mask_and_causal_together_as_cpu():
    # CPU's flash kernel applies both; its math path refuses them.
    q, k, v = _inputs()
    mask = torch.rand(16, 12, generator=torch.Generator().manual_seed(1)) > 0.3
    assert _fused(_both(lambda q, k, v, m: F.scaled_dot_product_attention(
        q, k, v, attn_mask=m, is_causal=True), [q, k, v, mask]))
    v = v[..., :6]  # a value dim unlike the query's: CPU runs math
    for device in ("cpu", TPU):
        with pytest.raises(RuntimeError, match="should not be set when is_causal"):
            F.scaled_dot_product_attention(q.to(device), k.to(device), v.to(device),
                                           attn_mask=mask.to(device), is_causal=True)


@pytest.mark.parametrize("why", ["math selected", "3-d", "value dim", "dropout", "mask grad"])
def test_where_cpu_runs_math_tpu_runs_the_composite(why):
    q, k, v = _inputs(dim_v=6 if why == "value dim" else 8)
    extra = [torch.randn(16, 12)] if why == "mask grad" else []
    if why == "mask grad":
        extra[0].requires_grad_()

    def fn(q, k, v, *mask):
        if why == "3-d":
            q, k, v = q[0], k[0], v[0]
        if why == "dropout":  # a dropout of 0 in training: the math path, no randomness
            return F.scaled_dot_product_attention(q, k, v, dropout_p=1e-30)
        if why == "math selected":
            with sdpa_kernel(SDPBackend.MATH):
                return F.scaled_dot_product_attention(q, k, v)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask[0] if mask else None)

    assert not _fused(_both(fn, [q, k, v, *extra]))


def test_bad_shapes_raise_cpus_error():
    q, k, v = _inputs(heads_kv=2)
    with pytest.raises(RuntimeError) as cpu:
        F.scaled_dot_product_attention(q, k, v)
    with pytest.raises(RuntimeError) as tpu:
        F.scaled_dot_product_attention(q.to(TPU), k.to(TPU), v.to(TPU))
    assert str(tpu.value) == str(cpu.value)


def test_double_backward_matches_cpus_math_path():
    # CPU's flash backward has no derivative; tpu's backward under create_graph is the
    # differentiable composite, compared with CPU's math path.
    def penalty(q):
        out = F.scaled_dot_product_attention(q, q * 0.5, q, is_causal=True)
        (g,) = torch.autograd.grad((out * out).sum(), q, create_graph=True)
        return (g * g).sum()

    q = _inputs()[0]
    qc = q.clone().requires_grad_()
    with sdpa_kernel(SDPBackend.MATH):
        (expected,) = torch.autograd.grad(penalty(qc), qc)
    qt = q.to(TPU).requires_grad_()
    (actual,) = torch.autograd.grad(penalty(qt), qt)
    torch.testing.assert_close(actual.cpu(), expected, rtol=1e-4, atol=1e-4)


def test_fused_eager_matches_strict():
    q, k, v = (x.to(TPU).requires_grad_() for x in _inputs())
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    (g_strict,) = torch.autograd.grad(out.sum(), q)
    torchtpu.set_eager_mode("fused")
    try:
        out_fused = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        (g_fused,) = torch.autograd.grad(out_fused.sum(), q)
        # One program around the op instead of one for it: XLA may fuse exp differently.
        torch.testing.assert_close(out_fused.cpu(), out.cpu(), rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(g_fused.cpu(), g_strict.cpu(), rtol=1e-6, atol=1e-6)
    finally:
        torchtpu.set_eager_mode("strict")


def test_vmap_runs_the_composite():
    q = _inputs()[0]
    attend = torch.func.vmap(lambda x: F.scaled_dot_product_attention(x, x, x, is_causal=True))
    torch.testing.assert_close(attend(q.to(TPU)).cpu(), attend(q), **TOL[torch.float32])


def test_the_output_is_laid_out_as_the_query_as_cpus_flash_kernel():
    # A query transposed from (B, L, H, E) gives a (B, L, H, E) buffer: code that views the
    # transposed output without .contiguous() works on CPU (tpu's was contiguous: an error).
    x = torch.linspace(-1, 1, 2 * 6 * 16).reshape(2, 6, 16)

    def attend(t):
        q = t.view(2, 6, 2, 8).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, q, q, is_causal=True)
        return y, y.transpose(1, 2).view(2, 6, 16)

    (y_tpu, out_tpu), (y_cpu, out_cpu) = attend(x.to(TPU)), attend(x)
    assert y_tpu.stride() == y_cpu.stride()
    torch.testing.assert_close(out_tpu.cpu(), out_cpu, rtol=1e-5, atol=1e-6)
    compiled = torch.compile(lambda t: attend(t)[1], backend="tpu")(x.to(TPU))
    torch.testing.assert_close(compiled.cpu(), out_cpu, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("inputs", ["transposed", "contiguous"])
def test_the_gradients_are_laid_out_as_cpus_flash_kernel(inputs):
    # (B, L, H, E) order whatever the inputs' (a contiguous query's gradient had been
    # contiguous). A graph torch.compile runs op by op views them as PyTorch's meta lays them.
    grads = []
    for device in ("cpu", TPU):
        qkv = torch.linspace(-1, 1, 2 * 5 * 3 * 8).reshape(2, 5, 3, 2, 4).to(device)
        q, k, v = (t.transpose(1, 2) for t in qkv.unbind(2))
        if inputs == "contiguous":
            q, k, v = (t.contiguous() for t in (q, k, v))
        q, k, v = (t.requires_grad_() for t in (q, k, v))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        grads.append(torch.autograd.grad(out, (q, k, v), torch.ones_like(out)))
    for a, e in zip(*reversed(grads), strict=True):
        assert a.stride() == e.stride()
        torch.testing.assert_close(a.cpu(), e, rtol=1e-5, atol=1e-6)


def test_the_output_of_an_expanded_query_is_contiguous_as_cpus():
    # CPU's kernel allocates empty_like(query): a query with zero strides (one expanded over
    # the batch and heads) gives a contiguous output, not one ordered by sorting its strides.
    outs = []
    for device in ("cpu", TPU):
        q = torch.linspace(-1, 1, 5 * 8, device=device).reshape(1, 1, 5, 8).expand(2, 3, 5, 8)
        kv = torch.linspace(-1, 1, 2 * 3 * 7 * 8, device=device).reshape(2, 3, 7, 8)
        outs.append(F.scaled_dot_product_attention(q, kv, kv))
    assert outs[1].stride() == outs[0].stride()
    torch.testing.assert_close(outs[1].cpu(), outs[0], **TOL[torch.float32])


def test_key_and_value_of_different_lengths_raise_the_math_paths_error():
    # CPU's flash kernel does not check them (it reads past the shorter); its math path and
    # tpu raise (tpu's one op had failed in its lowering instead).
    q, k, v = _inputs()
    with sdpa_kernel(SDPBackend.MATH), pytest.raises(RuntimeError) as cpu:
        F.scaled_dot_product_attention(q, k, v[:, :, :6])
    with pytest.raises(RuntimeError) as tpu:
        F.scaled_dot_product_attention(q.to(TPU), k.to(TPU), v[:, :, :6].to(TPU))
    assert str(tpu.value) == str(cpu.value)


@pytest.mark.parametrize("empty", ["query", "key"])
def test_an_empty_sequence_under_the_flash_backend_as_cpu(empty):
    # CPU returns before choosing a kernel: an empty output, or zeros for no keys.
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = torch.randn(1, 2, 0 if empty == "query" else 5, 8)
    kv = torch.randn(1, 2, 0 if empty == "key" else 6, 8)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        expected = F.scaled_dot_product_attention(q, kv, kv)
        actual = F.scaled_dot_product_attention(q.to("tpu"), kv.to("tpu"), kv.to("tpu"))
    assert actual.shape == expected.shape
    assert torch.equal(actual.cpu(), expected)


def _flex_case():
    from torch.nn.attention.flex_attention import create_block_mask

    q, k, v = (torch.randn(1, 2, 128, 16, generator=torch.Generator().manual_seed(i))
               for i in range(3))
    mask = create_block_mask(lambda b, h, i, j: i >= j, None, None, 128, 128, device="cpu")
    return q, k, v, mask, lambda s, b, h, i, j: s + (i - j) * 0.01


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
def test_flex_attention_matches_cpu_and_its_dense_gradient():
    from torch.nn.attention.flex_attention import flex_attention

    q, k, v, mask, bias = _flex_case()
    expected = flex_attention(q, k, v, score_mod=bias, block_mask=mask)
    on_tpu = q.to("tpu").requires_grad_()
    actual = flex_attention(on_tpu, k.to("tpu"), v.to("tpu"), score_mod=bias,
                            block_mask=mask.to("tpu"))
    torch.testing.assert_close(actual.cpu(), expected, rtol=1e-5, atol=1e-5)
    # CPU's flex attention has no backward: compare with the same attention written out.
    actual.sum().backward()
    cpu = q.clone().requires_grad_()
    pos = torch.arange(128)
    scores = cpu @ k.transpose(-1, -2) / 4 + (pos[:, None] - pos[None]) * 0.01
    scores = scores.masked_fill(pos[:, None] < pos[None], float("-inf"))
    (scores.softmax(-1) @ v).sum().backward()
    torch.testing.assert_close(on_tpu.grad.cpu(), cpu.grad, rtol=1e-5, atol=1e-5)


def test_flex_attention_compiles():
    from torch.nn.attention.flex_attention import flex_attention

    q, k, v, mask, bias = _flex_case()
    expected = flex_attention(q, k, v, score_mod=bias, block_mask=mask)
    actual = torch.compile(flex_attention, backend="tpu")(
        q.to("tpu"), k.to("tpu"), v.to("tpu"), score_mod=bias, block_mask=mask.to("tpu"))
    torch.testing.assert_close(actual.cpu(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
def test_flex_attention_gradient_through_a_score_mod_of_the_head_index():
    # Its backward traces the score_mod's joint on fake tensors beside a real tpu constant.
    from torch.nn.attention.flex_attention import flex_attention

    def head_scale(score, b, h, q_idx, kv_idx):
        return score * (h + 1).to(score.dtype)

    q, k, v, _, _ = _flex_case()
    on_tpu = [t.to("tpu").requires_grad_() for t in (q, k, v)]
    flex_attention(*on_tpu, score_mod=head_scale).sum().backward()
    # CPU's flex attention has no backward: the same attention written out.
    cpu = [t.clone().requires_grad_() for t in (q, k, v)]
    scores = cpu[0] @ cpu[1].transpose(-1, -2) / 4 * torch.tensor([1.0, 2.0])[:, None, None]
    (scores.softmax(-1) @ cpu[2]).sum().backward()
    torch.testing.assert_close([t.grad.cpu() for t in on_tpu], [t.grad for t in cpu],
                               rtol=1e-5, atol=1e-5)
