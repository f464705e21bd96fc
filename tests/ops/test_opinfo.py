"""Conformance against PyTorch's OpInfo database: every op gives CPU's answer on tpu.

For each OpInfo and dtype (float32, bfloat16, int64, bool where supported) the sample inputs
run on CPU and on tpu: values, dtypes and shapes must agree (random ops: shape, dtype and
distribution). Gradients are compared for differentiable ops in float32, and invalid
arguments (``error_inputs``) must raise CPU's exception type. Known failures live in
``expectations.py``; an entry whose test passes fails the run until it is removed.

The default suite runs the first samples of each op; ``-m slow`` runs every sample. An op
with an expected failure always runs every sample, so its entry is checked in both.
"""

from __future__ import annotations

import math
import re
import sys
import time
from collections import Counter

import pytest
import torch
from expectations import EXPECTED, key_of
from pytorch_test_db import op_db
from torch.utils._pytree import tree_flatten

import torchtpu
from torchtpu.debug import coverage

TPU = "tpu:0"
DTYPES = (torch.float32, torch.bfloat16, torch.int64, torch.bool, torch.complex64,
          torch.float64)
MODES = ("strict", "debug")
# Samples per op in the default suite (fixed: the first ones the OpInfo yields).
FAST_SAMPLES = {"forward": 1, "grad": 1, "errors": 3}

# Ops whose values are random (compared by distribution) or undefined (shape and dtype only).
RANDOM = {
    "bernoulli", "cauchy", "exponential", "geometric", "log_normal", "multinomial", "normal",
    "uniform", "randn", "randn_like", "rand_like", "randint", "randint_like",
    "nn.functional.dropout", "nn.functional.dropout2d", "nn.functional.dropout3d",
    "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout",
    "nn.functional.rrelu",
    # Their windows sit where random samples put them (test_pooling_fractional.py checks the
    # values given the same samples).
    "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d",
}
# Random ops whose gradient PyTorch defines as zero, whatever the draw (derivatives.yaml):
# compared with CPU's, not with their forward's difference quotient.
ZERO_GRAD = {"normal"}
# Random ops whose gradient follows the random draw: the grad test draws it once, on CPU, and
# passes the same draw to both devices (the keyword, and the samples per plane it takes).
SAME_DRAW = {"nn.functional.fractional_max_pool2d": ("_random_samples", 2),
             "nn.functional.fractional_max_pool3d": ("_random_samples", 3)}
UNDEFINED = {"empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided",
             "empty_permuted"}
# Positional arguments that PyTorch wants on the host for any device (as on cuda).
HOST_ARGS = {"tensor_split": (0,)}
# Low-rank factorisations draw a random sketch: their factors differ by more than rounding.
NO_GRAD_CHECK = {"svd_lowrank", "pca_lowrank"}

# torch.testing's defaults for float32 are tighter than XLA's transcendental functions
# (a few ulps apart from Sleef's); bfloat16 rounds once per op on both sides.
TOLERANCE = {
    torch.float32: dict(rtol=1e-5, atol=1e-5),
    torch.complex64: dict(rtol=1e-5, atol=1e-5),
    torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2),
}
GRAD_TOLERANCE = dict(rtol=1e-4, atol=1e-4)
# float32 rounding: a large 3-d sample's grid gradient sums many products, and tpu's is
# 2e-4 from CPU's (the nearer of the two to float64's)
GRAD_TOLERANCE_OF = {"grid_sampler_3d": dict(rtol=1e-4, atol=5e-4)}
# float32 rounding: CPU's fused attention sums in another order; in a sample whose outputs
# reach ~600, 3.4e-5 relative, and an output near 0.1 is 3e-5 off (an ulp of 600)
FORWARD_TOLERANCE_OF = {
    ("nn.functional.multi_head_attention_forward", torch.float32): dict(rtol=5e-5, atol=1e-4)}

# op_db entries, one test id each: "name" or "name.variant".
OPS = {(op.name + ("." + op.variant_test_name if op.variant_test_name else "")): op
       for op in op_db}


def _params(test: str):
    out = []
    for op_id, op in OPS.items():
        if test == "grad":
            ok = op.supports_autograd and torch.float32 in op.supported_backward_dtypes("cpu")
            dtypes = (torch.float32,) if ok and op.name not in NO_GRAD_CHECK else ()
        elif test == "errors":
            dtypes = (None,) if op.error_inputs_func is not None else ()
        else:
            supported = op.supported_dtypes("cpu")
            dtypes = tuple(d for d in DTYPES if d in supported)
        for dtype in dtypes:
            # One worker takes all of an op's tests (``--dist loadgroup``): debug mode's and
            # the gradient's run the programs strict mode's forward compiled.
            out.append(pytest.param(op_id, dtype, id=f"{op_id}-{_dtype_name(dtype)}",
                                    marks=pytest.mark.xdist_group(op_id)))
    return out


def _dtype_name(dtype) -> str:
    return "any" if dtype is None else str(dtype).removeprefix("torch.")


# Comparison.


def _views_more_storage(x: torch.Tensor) -> bool:
    return x.untyped_storage().nbytes() > x.numel() * x.element_size()


def _to_tpu(x, grad=False, storages=None):
    """``x`` on tpu; ``storages``: CPU storages the sample's tensors share, each moved once
    (their tpu copies, filled in here), so tensors sharing memory on CPU share it on tpu."""
    if isinstance(x, torch.Tensor) and x.device.type == "meta":
        return x  # error inputs mixing devices keep their meta tensor
    shared = storages is not None and _storage_key(x) in storages
    if isinstance(x, torch.Tensor) and (torch._debug_has_internal_overlap(x) == 1 or shared
                                        or not grad and _views_more_storage(x)):
        # an expanded tensor (stride 0) keeps its overlap, a partial view the rest of its
        # storage (as_strided may reach it): rebuilt over its storage on tpu
        flat = storages.get(_storage_key(x)) if shared else None
        if flat is None:
            flat = torch.empty(0, dtype=x.dtype).set_(x.untyped_storage()).to(TPU)
            if shared:
                storages[_storage_key(x)] = flat
        return flat.as_strided(x.shape, x.stride(), x.storage_offset())
    if isinstance(x, torch.Tensor):
        t = x.detach().to(TPU)
        return t.requires_grad_(x.requires_grad) if grad else t
    return x


def _storage_key(x) -> tuple | None:
    if not isinstance(x, torch.Tensor) or x.device.type != "cpu" or not x.numel():
        return None
    return x.untyped_storage().data_ptr(), x.dtype


def _is_cpu_device(x) -> bool:
    return (isinstance(x, torch.device) and x.type == "cpu") or x == "cpu"


def _on_tpu(op, s, grad=False):
    """The sample with its tensors on tpu, and any device argument naming tpu."""
    keep = HOST_ARGS.get(op.name, ())
    moved: dict[int, object] = {}  # one tensor passed twice (input and out=) stays one tensor
    tensors = {id(x): x for x in tree_flatten((s.input, s.args, s.kwargs))[0]
               if isinstance(x, torch.Tensor) and x.device.type == "cpu" and x.numel()}
    # Distinct tensors over one storage (an out= that is a view of an input): one on tpu too,
    # where a grad test's leaves allow it.
    counts = Counter(_storage_key(x) for x in tensors.values())
    storages = {} if grad else {key: None for key, n in counts.items() if n > 1}

    def move(x):
        if isinstance(x, torch.Tensor):
            if id(x) not in moved:
                moved[id(x)] = _to_tpu(x, grad, storages)
            return moved[id(x)]
        return x

    t = s.transform(move)
    t.args = tuple(TPU if _is_cpu_device(a) else s.args[i] if i in keep else a
                   for i, a in enumerate(t.args))
    t.kwargs = {k: TPU if _is_cpu_device(v) else v for k, v in t.kwargs.items()}
    return t


def _leaves(out):
    leaves, _ = tree_flatten(out)
    return leaves


def _compare(actual, expected, dtype, what="output", tolerance=None):
    a, e = _leaves(actual), _leaves(expected)
    assert len(a) == len(e), f"{what}: {len(a)} leaves on tpu, {len(e)} on CPU"
    # Inexact outputs of integer or bool inputs (softmax(dtype=float64), mean of ints...) get
    # torch.testing's default tolerance for their own dtype, as PyTorch's OpInfo tests do.
    tol = TOLERANCE.get(dtype, {})
    for i, (x, y) in enumerate(zip(a, e, strict=False)):
        where = f"{what}[{i}]"
        if isinstance(y, torch.Tensor):
            assert isinstance(x, torch.Tensor), f"{where}: {type(x)} on tpu, a tensor on CPU"
            assert x.device.type == "tpu", f"{where}: on {x.device}, not tpu"
            x = x.detach().cpu()
            y = y.detach()
            assert x.dtype == y.dtype, f"{where}: dtype {x.dtype} on tpu, {y.dtype} on CPU"
            assert x.shape == y.shape, f"{where}: shape {tuple(x.shape)} on tpu, {tuple(y.shape)}"
            inexact = y.is_floating_point() or y.is_complex()
            t = (tolerance or TOLERANCE.get(y.dtype, tol)) if inexact else dict(rtol=0, atol=0)
            torch.testing.assert_close(x, y, equal_nan=True, check_stride=False,
                                       msg=lambda m, where=where: f"{where}: {m}", **t)
        elif isinstance(y, float) and not math.isnan(y):
            assert x == pytest.approx(y, rel=1e-5, abs=1e-5), f"{where}: {x} on tpu, {y} on CPU"
        elif not (isinstance(y, float) and math.isnan(y) and math.isnan(x)):
            assert x == y, f"{where}: {x!r} on tpu, {y!r} on CPU"


def _compare_meta(actual, expected):
    """Shape and dtype only: for ops whose values are undefined."""
    a, e = _leaves(actual), _leaves(expected)
    assert len(a) == len(e)
    for x, y in zip(a, e, strict=False):
        if isinstance(y, torch.Tensor):
            assert x.device.type == "tpu" and x.dtype == y.dtype and x.shape == y.shape


def _compare_distribution(actual, expected):
    """Same shapes and dtypes, and a two-sample Kolmogorov-Smirnov test on the values."""
    _compare_meta(actual, expected)
    for x, y in zip(_leaves(actual), _leaves(expected), strict=False):
        if not isinstance(y, torch.Tensor):
            continue
        x = x.detach().cpu().double().flatten()
        y = y.detach().double().flatten()
        assert x.isfinite().eq(y.isfinite()).all() or not y.isfinite().all(), "non-finite"
        n = x.numel()
        if n < 20:
            continue
        xs, _ = x.sort()
        grid = torch.cat([xs, y.sort()[0]])
        cdf_x = torch.searchsorted(xs, grid, right=True) / n
        cdf_y = torch.searchsorted(y.sort()[0], grid, right=True) / n
        d = (cdf_x - cdf_y).abs().max().item()
        # Critical value at alpha = 1e-3: seeds are fixed, so the outcome is too.
        limit = 1.95 * math.sqrt(2 / n)
        assert d <= limit, f"distribution differs from CPU's: KS statistic {d:.3f} > {limit:.3f}"


# Running samples.


def _samples(op, dtype, test, full):
    if test == "grad":
        it = op.sample_inputs("cpu", dtype, requires_grad=True)
    else:
        it = op.sample_inputs("cpu", dtype)
    limit = None if full else FAST_SAMPLES[test]
    for i, s in enumerate(it):
        if limit is not None and i >= limit:
            return
        yield s


def _call(op, s, device="cpu"):
    # Factories called without a device (linspace, arange...) create on the default device.
    with torch.device(device):
        return op(s.input, *s.args, **s.kwargs)


def _draws_dropout(op, s) -> bool:
    """Attention samples that apply dropout: their values follow the random masks."""
    if op.name == "nn.functional.multi_head_attention_forward":
        return bool(s.kwargs.get("training")) and s.args[9] > 0  # dropout_p
    return s.kwargs.get("dropout_p", 0) > 0


def _run_forward(op, dtype, full):
    n = 0
    for s in _samples(op, dtype, "forward", full):
        t = _on_tpu(op, s)
        torch.manual_seed(0)
        try:
            expected = _call(op, s)
        except Exception as e:  # the sample is invalid on CPU: tpu must refuse it alike
            with pytest.raises(type(e)):
                _call(op, t, TPU)
            n += 1
            continue
        torch.manual_seed(0)
        actual = _call(op, t, TPU)
        # As PyTorch's TestCommon.test_compare_cpu: outputs that are unique only up to a
        # gauge (eigenvector signs, singular vectors, a random low-rank sketch) are compared
        # through the sample's own output_process_fn_grad (abs, a reconstruction...);
        # for every other op it is the identity.
        expected = s.output_process_fn_grad(expected)
        actual = t.output_process_fn_grad(actual)
        if op.name in RANDOM or _draws_dropout(op, s):
            _compare_distribution(actual, expected)
        elif op.name in UNDEFINED:
            _compare_meta(actual, expected)
        else:
            _compare(actual, expected, dtype, tolerance=FORWARD_TOLERANCE_OF.get((op.name, dtype)))
        n += 1
    return n


def _grad_inputs(s):
    return [x for x in _leaves((s.input, s.args, s.kwargs))
            if isinstance(x, torch.Tensor) and x.requires_grad]


def _differentiable_outputs(op, s, device="cpu") -> list:
    with torch.device(device):
        out = op.gradcheck_wrapper(op.get_op(), s.input, *s.args, **s.kwargs)
    out = s.output_process_fn_grad(out)
    return [o for o in _leaves(out) if isinstance(o, torch.Tensor) and o.requires_grad]


def _grads(op, s, device="cpu", cotangents=None):
    outs = _differentiable_outputs(op, s, device)
    inputs = _grad_inputs(s)
    if not outs or not inputs:
        return None, None
    if cotangents is None:
        g = torch.Generator().manual_seed(0)
        cotangents = [torch.randn(o.shape, generator=g, dtype=o.dtype) for o in outs]
        cotangents = [c.real if c.is_complex() else c for c in cotangents]
    ct = [c.to(o.device) for c, o in zip(cotangents, outs, strict=False)]
    # Complex outputs contribute their real part: a real loss, the same on both devices.
    loss = sum(torch.real((o * c).sum()) if o.is_complex() else (o * c).sum()
               for o, c in zip(outs, ct, strict=False))
    return torch.autograd.grad(loss, inputs, allow_unused=True), cotangents


def _same_draw(op, s):
    """The sample with the random draw SAME_DRAW names, when it does not pass one itself."""
    if op.name not in SAME_DRAW or SAME_DRAW[op.name][0] in s.kwargs:
        return s
    name, per_plane = SAME_DRAW[op.name]
    x = s.input
    batched = x.ndim == per_plane + 2
    shape = (x.shape[0] if batched else 1, x.shape[-per_plane - 1], per_plane)
    draw = torch.rand(shape, generator=torch.Generator().manual_seed(0), dtype=x.dtype)
    s.kwargs = {**s.kwargs, name: draw}
    return s


def _loss(op, s, cotangents) -> float:
    """The scalar _grads differentiates, summed in float64 (for a difference quotient)."""
    outs = _differentiable_outputs(op, s, s.input.device)
    return sum(torch.real((o.detach().cpu().double() * c.double()).sum()).item()
               for o, c in zip(outs, cotangents, strict=False))


def _check_against_own_forward(op, t, actual, cotangents, seed):
    """A random op's gradient follows its draw, which CPU's does not share: check it against
    a central difference of the tpu forward itself, every call making the same draw."""
    inputs = _grad_inputs(t)
    g = torch.Generator().manual_seed(1)
    directions = [torch.randn(x.shape, generator=g, dtype=x.dtype) for x in inputs]
    predicted = sum((a.cpu().double() * v.double()).sum().item()
                    for a, v in zip(actual, directions, strict=True) if a is not None)
    h, losses = 1e-2, []
    for sign in (1, -1):
        with torch.no_grad():
            for x, v in zip(inputs, directions, strict=True):
                x.add_(v.to(x.device), alpha=sign * h)
        torch.manual_seed(seed)
        losses.append(_loss(op, t, cotangents))
        with torch.no_grad():
            for x, v in zip(inputs, directions, strict=True):
                x.sub_(v.to(x.device), alpha=sign * h)
    difference = (losses[0] - losses[1]) / (2 * h)
    assert abs(difference - predicted) <= 1e-2 * max(1.0, abs(predicted)), (
        f"gradient along a random direction: {predicted}, its own forward's difference "
        f"quotient: {difference}")


def _run_grad(op, dtype, full):
    n = 0
    for s in _samples(op, dtype, "grad", full):
        s = _same_draw(op, s)
        expected, cts = _grads(op, s)
        if expected is None:
            continue
        t = _on_tpu(op, s, grad=True)
        torch.manual_seed(0)
        actual, _ = _grads(op, t, TPU, cts)
        assert actual is not None, "no differentiable output on tpu"
        if (op.name in RANDOM and op.name not in SAME_DRAW and op.name not in ZERO_GRAD
                or _draws_dropout(op, s)):
            _check_against_own_forward(op, t, actual, cts, seed=0)
            n += 1
            continue
        for i, (a, e) in enumerate(zip(actual, expected, strict=False)):
            assert (a is None) == (e is None), f"grad[{i}]: {a is None=} {e is None=}"
            if e is not None:
                assert a.device.type == "tpu"
                tolerance = GRAD_TOLERANCE_OF.get(op.name, GRAD_TOLERANCE)
                torch.testing.assert_close(a.cpu(), e, equal_nan=True, **tolerance,
                                           msg=lambda m, i=i: f"grad[{i}]: {m}")
        n += 1
    return n


def _run_errors(op, dtype, full):
    n = 0
    inputs = op.error_inputs("cpu")
    for i, ei in enumerate(inputs):
        if not full and i >= FAST_SAMPLES["errors"]:
            break
        s = ei.sample_input
        try:
            _call(op, s)
        except Exception as e:
            if not isinstance(e, ei.error_type):
                continue  # CPU itself disagrees with the OpInfo: nothing to hold tpu to
            regex = ei.error_regex if re.search(ei.error_regex, str(e)) else ""
        else:
            continue
        t = _on_tpu(op, s)
        try:
            _call(op, t, TPU)
        except ei.error_type as e:
            # PyTorch's own test holds the message to the OpInfo's regex; so do we where CPU
            # meets it.
            if not re.search(regex, str(e)):
                raise AssertionError(f"error input {i}: tpu's message {str(e)!r} does not "
                                     f"match {regex!r}, as CPU's does") from e
            n += 1
            continue
        except Exception as e:
            raise AssertionError(f"error input {i}: tpu raised {type(e).__name__} ({e}), "
                                 f"CPU raised {ei.error_type.__name__}") from e
        raise AssertionError(f"error input {i}: tpu raised nothing, CPU raised "
                             f"{ei.error_type.__name__}")
    return n


RUNNERS = {"forward": _run_forward, "grad": _run_grad, "errors": _run_errors}
DTYPE_NAMES = {_dtype_name(d): d for d in DTYPES + (None,)}


def _run(test, op_id, dtype, mode, full):
    with torchtpu.set_eager_mode(mode):
        return RUNNERS[test](OPS[op_id], dtype, full)


def listed(op_id: str, test: str) -> str | None:
    """The expected failure of ``test`` for the op in float64 (autograd's extra sweeps)."""
    op = OPS[op_id]
    return EXPECTED.get(key_of(op.name, op.variant_test_name, "float64", test))


def check_listed(request, op_id: str, test: str, run) -> None:
    """``run(op, full)`` (the samples it checked) held to expectations.py: a listed failure
    xfails, a listed test that passes fails, so the table stays true."""
    reason = listed(op_id, test)
    full = reason is not None or _is_slow(request)
    try:
        n = run(OPS[op_id], full)
    except (Exception, pytest.fail.Exception):  # pytest.raises' DID NOT RAISE is no Exception
        if reason:
            pytest.xfail(reason)
        raise
    if reason:
        pytest.fail(f"{op_id} {test} passes but is listed in expectations.py ({reason})")
    if n == 0:
        pytest.skip("no sample applies")


def _check(request, test, op_id, dtype, mode):
    op = OPS[op_id]
    key = key_of(op.name, op.variant_test_name, _dtype_name(dtype), test)
    reason = EXPECTED.get(key)
    full = reason is not None or _is_slow(request)
    record = {"op": op.name, "variant": op.variant_test_name, "dtype": _dtype_name(dtype),
              "test": test, "mode": mode, "full": full}
    start = time.perf_counter()
    try:
        n = _run(test, op_id, dtype, mode, full)
    except Exception as e:
        line = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
        coverage.record(record | {"outcome": "xfail" if reason else "fail",
                                  "reason": reason or line[:200],
                                  "seconds": time.perf_counter() - start})
        if reason:
            pytest.xfail(reason)
        raise
    coverage.record(record | {"outcome": "pass" if n else "skip", "reason": "",
                              "seconds": time.perf_counter() - start})
    if reason and not reason.startswith("hardware:"):
        pytest.fail(f"{key} passes but is listed in expectations.py ({reason}): remove the entry")
    if n == 0:
        pytest.skip("no sample applies")


def _is_slow(request) -> bool:
    return request.node.get_closest_marker("slow") is not None


@pytest.fixture(scope="module", autouse=True)
def _write_results():
    yield
    coverage.save_results()


# Swept by `make test-slow` only (its failures in the table still run by default): float64
# found nothing the other dtypes had not.
SLOW_ONLY = (torch.float64,)


def _default(test: str, every: int, always=(torch.float32,)):
    """The default suite's fixed subset: dtypes in ``always`` for every op, the rest (but
    SLOW_ONLY) for every ``every``-th parameter, and whatever the expectations table names
    (so it stays true)."""
    out, i = [], 0
    for p in _params(test):
        op_id, dtype = p.values
        op = OPS[op_id]
        listed = key_of(op.name, op.variant_test_name, _dtype_name(dtype), test) in EXPECTED
        if dtype in SLOW_ONLY:
            if listed:
                out.append(p)
            continue
        if dtype in always or listed or i % every == 0:
            out.append(p)
        i += 1
    return out


# The default suite: the first samples, strict mode, and debug mode for float32 forward.
@pytest.mark.parametrize("op_id,dtype", _default("forward", 6))
def test_forward(request, op_id, dtype):
    _check(request, "forward", op_id, dtype, "strict")


@pytest.mark.parametrize("op_id,dtype", [p for p in _params("forward")
                                         if p.values[1] == torch.float32])
def test_forward_debug(request, op_id, dtype):
    _check(request, "forward", op_id, dtype, "debug")


@pytest.mark.parametrize("op_id,dtype", _default("grad", 2, always=()))
def test_grad(request, op_id, dtype):
    _check(request, "grad", op_id, dtype, "strict")


@pytest.mark.parametrize("op_id,dtype", _params("errors"))
def test_errors(request, op_id, dtype):
    _check(request, "errors", op_id, dtype, "strict")


# The full sweep: every sample, in every eager mode.
@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op_id,dtype", _params("forward"))
def test_forward_full(request, op_id, dtype, mode):
    _check(request, "forward", op_id, dtype, mode)


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op_id,dtype", _params("grad"))
def test_grad_full(request, op_id, dtype, mode):
    _check(request, "grad", op_id, dtype, mode)


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op_id,dtype", _params("errors"))
def test_errors_full(request, op_id, dtype, mode):
    _check(request, "errors", op_id, dtype, mode)


if __name__ == "__main__":  # one isolated check: test op_id dtype mode full
    _test, _op_id, _dtype, _mode, _full = sys.argv[1:]
    print(_run(_test, _op_id, DTYPE_NAMES[_dtype], _mode, _full == "1"))
