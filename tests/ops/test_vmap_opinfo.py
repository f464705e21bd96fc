"""torch.func over PyTorch's OpInfos: vmap, and vmap over vjp, give CPU's answer on tpu.

The checks of functorch's test_vmap.py (test_vmap_exhaustive) and test_ops.py (test_vmapvjp)
run one program on both devices: each sample gets a batch dimension in the positions
functorch's generator picks (all in front, all at the back, some unbatched), then
``vmap(op)`` (and ``vmap(vmap(op))`` beside a dummy level), or ``vmap`` of the op's ``vjp``
over batched primals and cotangents, runs on CPU and on tpu. Where CPU raises, tpu must
raise the same exception type. ``-m slow`` sweeps every op; the default suite runs a few.
"""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.utils._pytree as pytree
from test_opinfo import OPS as ALL_OPS
from torch.func import vjp, vmap

TPU = "tpu:0"
SAMPLES = 2  # per op
BDIM_CHOICES = 4  # all-zero, then the first (-1, None) patterns, as functorch orders them
TOLERANCE = dict(rtol=1e-4, atol=1e-4)

OPS = {op_id: op for op_id, op in ALL_OPS.items() if torch.float32 in op.supported_dtypes("cpu")}

# Known differences, each with its reason; an entry whose check passes fails the run.
EXPECTED = {
    ("chalf", "vmap"): "complex32 (chalf) has no XLA dtype",
    ("linalg.eigh", "vmap"): "eigenvectors are unique up to sign only (functorch skips it too)",
    ("native_group_norm", "vmap"): "CPU's kernel refuses a batch dimension at the back "
                                   "(X.is_contiguous); tpu computes it",
}
# Samples that cannot be batched by repeating them, or whose values are undefined.
SKIP = {"sparse.sampled_addmm", "sparse.mm.reduce", "empty_like", "new_empty",
        "new_empty_strided", "empty", "empty_strided", "empty_permuted"}

DEFAULT = {("add", "vmap"), ("nn.functional.cross_entropy", "vmapvjp"),
           ("masked_fill", "vmapvjp")}


def _bdim_choices(n):
    return ([(0,) * n] + list(itertools.product((-1, None), repeat=n))[:-1])[:BDIM_CHOICES]


def _add_bdim(t, bdim, size=2):
    if bdim == 0:
        return t.repeat(size, *([1] * t.dim()))
    return t.unsqueeze(-1).expand(*t.shape, size).contiguous()


def _batched(args):
    """functorch's generate_vmap_inputs: (batched args, in_dims) per batch-dim choice."""
    flat, spec = pytree.tree_flatten(tuple(args))
    is_tensor = [isinstance(a, torch.Tensor) for a in flat]
    for choice in _bdim_choices(sum(is_tensor)):
        it = iter(choice)
        dims = [next(it) if t else None for t in is_tensor]
        batched = [a if d is None else _add_bdim(a, d) for a, d in zip(flat, dims, strict=True)]
        yield pytree.tree_unflatten(batched, spec), pytree.tree_unflatten(dims, spec)


def _to(x, device):
    if hasattr(x, "output_process_fn_grad"):  # a SampleInput
        y = type(x).__new__(type(x))
        y.__dict__.update(x.__dict__)
        y.input, y.args, y.kwargs = _to((x.input, x.args, x.kwargs), device)
        return y

    def move(t):
        if not isinstance(t, torch.Tensor):
            return t
        return t.detach().to(device).requires_grad_(t.requires_grad)

    return pytree.tree_map(move, x)


def _outcome(make, device):
    torch.manual_seed(0)
    try:
        fn, args = make(device)
        return fn(*args)
    except Exception as e:  # noqa: BLE001  (compared with CPU's)
        return e


def _same(make, what):
    expected, actual = _outcome(make, "cpu"), _outcome(make, TPU)
    if isinstance(expected, Exception) or isinstance(actual, Exception):
        assert type(actual) is type(expected), f"{what}: tpu {actual!r}, CPU {expected!r}"
        return
    got, want = pytree.tree_leaves(actual), pytree.tree_leaves(expected)
    assert len(got) == len(want), what
    for a, e in zip(got, want, strict=True):
        if isinstance(e, torch.Tensor):
            torch.testing.assert_close(a.cpu(), e, equal_nan=True, msg=lambda m: f"{what}: {m}",
                                       **TOLERANCE)


def _check_vmap(op, sample):
    for args, dims in _batched((sample.input, *sample.args)):
        def make(device, args=args, dims=dims):
            kwargs = _to(sample.kwargs, device)
            return vmap(lambda *a: op(*a, **kwargs), in_dims=dims), _to(args, device)

        def make_nested(device, args=args, dims=dims):
            kwargs = _to(sample.kwargs, device)
            inner = vmap(lambda _, *a: op(*a, **kwargs), (0, *(None for _ in dims)))
            return vmap(inner, (0, *dims)), (torch.ones(2, 1, device=device), *_to(args, device))

        _same(make, f"vmap in_dims={dims}")
        _same(make_nested, f"vmap(vmap) in_dims={dims}")


def _differentiable(op, sample):
    """The op as a function of its inputs that require grad; floating outputs only."""
    flat, spec = pytree.tree_flatten((sample.input, *sample.args))
    where = [i for i, a in enumerate(flat) if isinstance(a, torch.Tensor) and a.requires_grad]

    def fn(*primals):
        args = list(flat)
        for i, p in zip(where, primals, strict=True):
            args[i] = p
        out = op(*pytree.tree_unflatten(args, spec), **sample.kwargs)
        if sample.output_process_fn_grad is not None:
            out = sample.output_process_fn_grad(out)
        if isinstance(out, (tuple, list)):
            out = tuple(o for o in out if isinstance(o, torch.Tensor)
                        and (o.is_floating_point() or o.is_complex()))
        return out

    return fn, [flat[i].detach() for i in where]


def _check_vmapvjp(op, sample):
    fn, primals = _differentiable(op, sample)
    if not primals:
        return
    with torch.no_grad():
        out = fn(*primals)
    generator = torch.Generator().manual_seed(1)
    cotangents, spec = pytree.tree_flatten(pytree.tree_map(
        lambda o: torch.randn(o.shape, dtype=o.dtype, generator=generator), out))
    n = len(primals)
    for args, dims in _batched((*primals, *cotangents)):
        def make(device, args=args, dims=dims):
            f, _ = _differentiable(op, _to(sample, device))

            def vjp_of(*a):
                return vjp(f, *a[:n])[1](pytree.tree_unflatten(list(a[n:]), spec))

            return vmap(vjp_of, in_dims=tuple(dims)), _to(args, device)

        _same(make, f"vmap(vjp) in_dims={dims}")


CHECKS = {"vmap": _check_vmap, "vmapvjp": _check_vmapvjp}


def _params():
    for check in CHECKS:
        for op_id, op in OPS.items():
            if op_id in SKIP or (check == "vmapvjp" and not op.supports_autograd):
                continue
            marks = () if (op_id, check) in DEFAULT or (op_id, check) in EXPECTED else (
                pytest.mark.slow,)
            yield pytest.param(op_id, check, id=f"{check}-{op_id}", marks=marks)


@pytest.mark.parametrize("op_id,check", list(_params()))
def test_func_transform_matches_cpu(op_id, check):
    op = OPS[op_id]
    reason = EXPECTED.get((op_id, check))
    torch.manual_seed(0)
    samples = itertools.islice(
        op.sample_inputs("cpu", torch.float32, requires_grad=check != "vmap"), SAMPLES)
    try:
        for sample in samples:
            CHECKS[check](op, sample)
    except AssertionError:
        if reason:
            pytest.xfail(reason)
        raise
    if reason:
        pytest.fail(f"({op_id}, {check}) passes but is listed in EXPECTED ({reason})")
