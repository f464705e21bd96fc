"""Bounded dynamic shapes: pad a varying dimension up to the next bucket size.

``torch.compile(model, backend="tpu", options={"buckets": {"sizes": (32, 64, 128),
"pad": {"targets": -100}}})``

When a dimension varies between calls (a sequence length), Dynamo traces the graph once
with that size symbolic: on the second distinct shape by itself, or at once after
``torch._dynamo.mark_dynamic(x, dim)``. Each call then pads every input along its symbolic
dimensions to the smallest bucket that fits, runs the program compiled for that bucket
(one per bucket, with static shapes), and slices the outputs back to the true size. The
padding and slicing are ordinary tpu ops, so autograd carries gradients through both.

Padding must not change the real part of any output. bucket_safety.py checks each graph
once: ops that keep a real position's result independent of padded positions pass (causal
attention, a mask padded with False or -inf, a loss whose targets are padded with its
``ignore_index``, elementwise ops, matmuls and norms over other dimensions); a graph with
anything else (a mean or softmax over the padded dimension, a size used as a number, a
write into a padded input) runs unpadded, one program per size, with the reason in
``torchtpu.debug.explain_recompile()``. Inputs are padded with 0 unless ``pad`` names
another value by argument name (or position, for a function taking ``*args``). Sizes
beyond the largest bucket run unpadded.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import fx

from ..debug import counters as metrics
from ..debug import explain
from . import bucket_safety


@dataclass(frozen=True)
class BucketSpec:
    sizes: tuple[int, ...]
    pad: dict = field(default_factory=dict)

    def bucket(self, n: int) -> int:
        for s in self.sizes:
            if s >= n:
                return s
        return n  # beyond the largest bucket: exact size


def parse(spec) -> BucketSpec | None:
    """``None``, a list of sizes, or ``{"sizes": [...], "pad": {argument_name: value}}``."""
    if spec is None:
        return None
    if isinstance(spec, dict):
        unknown = set(spec) - {"sizes", "pad"}
        if unknown:
            raise ValueError(f"torchtpu: unknown bucket option(s) {sorted(unknown)}; known: "
                             f"'sizes' and 'pad'")
        sizes, pad = spec.get("sizes"), spec.get("pad") or {}
    else:
        sizes, pad = spec, {}
    if not isinstance(sizes, (list, tuple)) or not all(
            isinstance(s, int) and not isinstance(s, bool) for s in sizes):
        raise ValueError(f"torchtpu: buckets' sizes must be a list of ints, got {sizes!r}")
    if not sizes or min(sizes) <= 0:
        raise ValueError(f"torchtpu: buckets need positive sizes, got {spec!r}")
    if not isinstance(pad, dict) or not all(
            isinstance(v, (int, float, bool)) for v in pad.values()):
        raise ValueError(f"torchtpu: buckets' 'pad' must map argument names to numbers, "
                         f"got {pad!r}")
    return BucketSpec(tuple(sorted(set(sizes))), dict(pad))


def _symbol(size):
    """The symbol a size is, if it is exactly one (s0), else None (static or an expression)."""
    if isinstance(size, torch.SymInt):
        expr = size.node.expr
        if getattr(expr, "is_Symbol", False):
            return expr
    return None


def _has_symbols(size) -> bool:
    return isinstance(size, torch.SymInt) and bool(size.node.expr.free_symbols)


def _aliases(node: fx.Node) -> set:
    """The names and positions a user would use for this graph input."""
    grapharg = node.meta.get("grapharg")
    source = getattr(grapharg, "source", None)
    text = source.name if isinstance(getattr(source, "name", None), str) else ""
    if callable(getattr(source, "name", None)):
        text = source.name()
    found: set = set(re.findall(r"L\['(\w+)'\]$", text))
    found |= {int(i) for i in re.findall(r"L\['args'\]\[(\d+)\]$", text)}
    return found


def _warn_of_unknown_pads(spec: BucketSpec, placeholders: list, why_not: str) -> None:
    """A graph left unpadded while ``pad`` names none of its inputs: likely a misspelt name
    (``"target"`` for ``"targets"``), which would have made it safe."""
    names = set().union(*(_aliases(n) for n in placeholders))
    unknown = sorted(str(k) for k in set(spec.pad) - names)
    if unknown:
        known = sorted(str(a) for a in names)
        warnings.warn(f"torchtpu: buckets' 'pad' names {unknown}, no input of this graph "
                      f"(its inputs: {known}); the graph runs unpadded, one program per size: "
                      f"{why_not}", stacklevel=2)


class Bucketed:
    """The callable the backend returns for a graph with symbolic sizes and buckets on."""

    def __init__(self, gm: fx.GraphModule, example_inputs: list, spec: BucketSpec,
                 compile_aten: Callable):
        self.gm, self.spec, self.compile_aten = gm, spec, compile_aten
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        # Where each symbol's value can be read at run time, and what to pad.
        self.readers: dict = {}
        self.tensor_dims: list[tuple[int, list[tuple[int, object]], float]] = []
        self.int_inputs: list[tuple[int, object]] = []
        for i, node in enumerate(placeholders):
            x = _traced_value(node, example_inputs[i])
            if isinstance(x, torch.Tensor):
                dims = [(d, _symbol(n)) for d, n in enumerate(x.shape) if _symbol(n) is not None]
                if dims:
                    value = next((self.spec.pad[a] for a in _aliases(node) if a in spec.pad), 0)
                    self.tensor_dims.append((i, dims, value))
                    for d, sym in dims:
                        self.readers.setdefault(sym, ("tensor", i, d))
            elif isinstance(x, torch.SymInt) and _symbol(x) is not None:
                self.int_inputs.append((i, _symbol(x)))
                self.readers.setdefault(_symbol(x), ("int", i, None))
        # Only sizes of tensors are padded; a Python number Dynamo made symbolic is passed as
        # it is (unless it is also a tensor's size).
        self.padded = padded = {s for _, dims, _ in self.tensor_dims for _, s in dims}
        self.int_inputs = [(i, s) for i, s in self.int_inputs if s in padded]
        self.output_dims, why_not = self._output_dims(gm)
        # Every symbol an output is cut by must be readable from the inputs.
        unread = [s for d in self.output_dims for _, s in d if s not in self.readers]
        if unread and why_not is None:
            why_not = f"output size {unread[0]} is not read from an input"
        if why_not is None:
            try:
                bucket_safety.check(gm, padded, {i: v for i, _, v in self.tensor_dims})
            except bucket_safety.Unsafe as e:
                why_not = str(e)
        self.sliceable = why_not is None
        if not self.sliceable:
            metrics.count("graph", "bucket_unpadded")
            explain.note(f"buckets off for this graph, each size runs unpadded: {why_not}")
            _warn_of_unknown_pads(spec, placeholders, why_not)
        self.programs: dict[tuple, Callable] = {}

    def _output_dims(self, gm: fx.GraphModule):
        out = next(n for n in gm.graph.nodes if n.op == "output")
        dims, why_not = [], None
        for v in out.args[0]:
            val = v.meta.get("example_value", v.meta.get("val")) if isinstance(v, fx.Node) else v
            if isinstance(val, torch.Tensor):
                d = [(k, _symbol(n)) for k, n in enumerate(val.shape) if _symbol(n) is not None]
                # A dimension like s0 * 4 cannot be cut back by slicing; run such graphs unpadded.
                uncut = [n for n in val.shape if _symbol(n) is None and _has_symbols(n)]
                if uncut and why_not is None:
                    why_not = f"output size {uncut[0]} cannot be cut back by slicing"
                dims.append(d)
            else:
                dims.append([])
        return dims, why_not

    def __call__(self, *args):
        values = {}
        for sym, (kind, i, d) in self.readers.items():
            values[sym] = int(args[i].shape[d]) if kind == "tensor" else int(args[i])
        sizes = {sym: self.spec.bucket(v) if sym in self.padded else v
                 for sym, v in values.items()}
        if not self.sliceable or sizes == values:
            sizes = dict(values)  # nothing to pad (or nothing we could cut back)
        key = tuple(sorted((str(s), n) for s, n in sizes.items()))
        args = list(args)
        for i, dims, value in self.tensor_dims:
            args[i] = _pad(args[i], [(d, sizes[s]) for d, s in dims], value)
        for i, sym in self.int_inputs:
            args[i] = sizes[sym]
        program = self.programs.get(key)
        if program is None:
            metrics.count("graph", "bucket_compile")
            explain.note(f"bucket {dict(key)} compiled")
            program = self.programs[key] = self.compile_aten(self.gm, args)
        else:
            metrics.count("cache", "bucket_hit")
        outs = program(*args)
        if sizes == values:
            return outs
        return [_cut(o, dims, values) for o, dims in zip(outs, self.output_dims, strict=True)]


def _traced_value(node: fx.Node, example):
    """What Dynamo traced the input as (a FakeTensor with symbolic sizes); the backend's
    example inputs are the real tensors of the first call."""
    return node.meta.get("example_value", example)


def _pad(x: torch.Tensor, dims: list[tuple[int, int]], value) -> torch.Tensor:
    widths = [0] * (2 * x.dim())
    for d, size in dims:
        # F.pad lists (left, right) pairs from the last dimension backwards.
        widths[2 * (x.dim() - 1 - d) + 1] = size - x.shape[d]
    if not any(widths):
        return x
    return torch.nn.functional.pad(x, widths, value=value)


def _cut(x, dims, values):
    if not isinstance(x, torch.Tensor):
        return x
    cut = x
    for d, sym in dims:
        if cut.shape[d] != values[sym]:
            cut = cut.narrow(d, 0, values[sym])
    # A fresh tensor, as the unpadded program returns: a narrowed view would keep the padded
    # buffer alive and refuse .view().
    return cut.contiguous() if cut is not x else x


def compile_bucketed(gm: fx.GraphModule, example_inputs: list, spec: BucketSpec,
                     compile_aten: Callable) -> Callable:
    """The backend's result for ``gm`` with buckets on."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    traced = [_traced_value(n, x) for n, x in zip(placeholders, example_inputs, strict=True)]
    symbolic = any(
        isinstance(x, torch.SymInt)
        or isinstance(x, torch.Tensor) and any(isinstance(n, torch.SymInt) for n in x.shape)
        for x in traced
    )
    if not symbolic:
        # Static shapes: one program, as without buckets. Dynamo makes the varying
        # dimension symbolic when it first sees a second size.
        return compile_aten(gm, example_inputs)
    return Bucketed(gm, example_inputs, spec, compile_aten)
