"""Conformance against PyTorch's ModuleInfo database: every nn module gives CPU's answer on tpu.

Each ModuleInfo's inputs (float32) run through the module on CPU and on a copy of it on tpu:
outputs, and the gradients of the inputs and parameters, must agree (where float32 rounding
parts them, tpu's must be within twice CPU's distance of the float64 result); an input CPU
refuses must raise the same exception type on tpu. Modules whose train and eval modes differ run in
both. A lazy module is materialised on CPU first (its parameters are drawn from the device's
generator, which on tpu is not CPU's), then copied. The default suite runs each module's
first sample; ``-m slow`` runs them all.
"""

from __future__ import annotations

import copy
import functools

import pytest
import torch
from conftest import TPU
from pytorch_test_db import module_db
from torch.nn.modules.lazy import LazyModuleMixin
from torch.utils._pytree import tree_flatten, tree_map

CASES = [(info, training) for info in module_db
         for training in ((True, False) if info.train_and_eval_differ else (True,))]


def _moved(device, dtype=None):
    def move(x):
        if isinstance(x, torch.Tensor):
            to = dtype if dtype is not None and x.is_floating_point() else x.dtype
            return x.detach().to(device, to).requires_grad_(x.requires_grad)
        return x

    return move


def _run(module, forward_input, device, dtype=None):
    """The module's outputs, and the gradients of its inputs and parameters (as CPU tensors)."""
    args = tree_map(_moved(device, dtype), forward_input.args)
    kwargs = tree_map(_moved(device, dtype), forward_input.kwargs)
    out = module(*args, **kwargs)
    outputs = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor)]
    leaves = [x for x in tree_flatten((args, kwargs))[0]
              if isinstance(x, torch.Tensor) and x.requires_grad] + list(module.parameters())
    loss = sum((o.to(dtype or torch.float32) ** 2).sum() for o in outputs if o.requires_grad)
    grads = torch.autograd.grad(loss, leaves, allow_unused=True) if torch.is_tensor(loss) else []
    return [o.detach().cpu() for o in outputs], [g if g is None else g.cpu() for g in grads]


def _close(actual, expected, float64) -> str | None:
    """Why ``actual`` (tpu) is not CPU's ``expected``, or None. Where float32 rounding parts
    them (sums in another order; an ill-conditioned gradient), tpu's may be up to twice as far
    from float64's ``float64()`` as CPU's is."""
    if expected is None or actual is None:
        return None if actual is None and expected is None else "one of them is None"
    try:
        torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5, equal_nan=True)
        return None
    except AssertionError as mismatch:
        if not expected.is_floating_point():
            return str(mismatch)
        exact = float64()
        ours, cpus = ((t.double() - exact).abs().nan_to_num().max().item()
                      for t in (actual, expected))
        if ours <= 2 * cpus + 1e-6 * exact.abs().max().item():
            return None
        return f"{mismatch}\nfrom float64's: tpu {ours:.3g}, CPU {cpus:.3g}"


IDS = [f"{i.name}-{'train' if t else 'eval'}" for i, t in CASES]


@pytest.mark.parametrize("info, training", CASES, ids=IDS)
def test_module_first_sample_as_cpu(info, training):
    _compare_samples(info, training, first_only=True)


@pytest.mark.slow
@pytest.mark.parametrize("info, training", CASES, ids=IDS)
def test_module_as_cpu(info, training):
    _compare_samples(info, training, first_only=False)


def _compare_samples(info, training: bool, first_only: bool) -> None:
    torch.manual_seed(0)
    samples = info.module_inputs_func(info, device="cpu", dtype=torch.float32,
                                      requires_grad=True, training=training)
    for n, sample in enumerate(samples[:1] if first_only else samples):
        _compare(info, sample, training, f"{info.name} sample {n} ({sample.desc or 'default'})")


def _compare(info, sample, training: bool, where: str) -> None:
    torch.manual_seed(0)
    on_cpu = info.module_cls(*sample.constructor_input.args,
                             **sample.constructor_input.kwargs).train(training)
    untouched = copy.deepcopy(on_cpu)
    try:
        expected = _run(on_cpu, sample.forward_input, "cpu")
    except Exception as error:  # noqa: BLE001  (tpu must refuse it alike)
        with pytest.raises(type(error)):
            _run(untouched.to(TPU), sample.forward_input, TPU)
        return
    if any(isinstance(m, LazyModuleMixin) for m in untouched.modules()):
        untouched = copy.deepcopy(on_cpu)  # (now materialised)
    actual = _run(copy.deepcopy(untouched).to(TPU), sample.forward_input, TPU)
    in_float64 = functools.cache(
        lambda: _run(untouched.double(), sample.forward_input, "cpu", torch.float64))
    for k, kind in enumerate(("output", "gradient")):
        ours, cpus = actual[k], expected[k]
        assert len(ours) == len(cpus), f"{where}: {len(ours)} {kind}s, CPU {len(cpus)}"
        for i, (a, e) in enumerate(zip(ours, cpus, strict=True)):
            why = _close(a, e, lambda k=k, i=i: in_float64()[k][i])
            assert why is None, f"{where} {kind} {i}: {why}"
