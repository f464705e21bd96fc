"""The ``torch.compile(..., backend="tpu")`` backend.

Dynamo hands us a torch-level FX graph with FakeTensor example inputs. AOTAutograd turns it
into functional ATen graphs -- one for inference, or a forward and a backward for training --
decomposing ops that have no lowering rule (ops/decomps.py). Each ATen graph becomes one jax
program (lower_fx.py), looked up first in an in-process cache. AOTAutograd's runtime wrapper
does the rest in eager tpu code: it writes a training graph's mutated inputs back with
``copy_`` (BatchNorm's running stats) and rebuilds outputs that alias inputs; an inference
graph (an optimizer step) writes its inputs inside the program.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import fx

from ..debug import counters as metrics
from ..debug import explain
from ..ops.decomps import CUSTOM_OP_BODIES, DECOMPOSITIONS
from ..ops.elementwise import register_inductor_prims
from ..ops.registry import LOWERINGS
from . import buckets as bucketing
from .cache_key import graph_key
from .lower_fx import Program, Unlowerable, eager_runner

register_inductor_prims()

# Compiled programs by graph key; a hit skips lowering and JAX's tracing and compiling.
PROGRAMS: dict[str, Callable] = {}

_KNOWN_OPTIONS = {"buckets"}
# torch.compile's modes (inductor's names): accepted, as they change nothing XLA does
_MODES = ("default", "lite", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")


def _inductor_options() -> set[str]:
    from torch._inductor import config

    return set(config.get_config_copy())


def _decompositions() -> dict:
    # A rule is one fused computation; decomposing an op that has one only adds ops. A custom
    # op's Python body writes in place (linear_cross_entropy's chunks), which AOTAutograd's
    # decompositions, run below functionalization, may not: its graph runs op by op.
    return {op: fn for op, fn in DECOMPOSITIONS.items()
            if op not in LOWERINGS and op not in CUSTOM_OP_BODIES}


def _graph_compiler(kind: str, options: tuple) -> Callable:
    def compile_graph(gm: fx.GraphModule, example_inputs) -> Callable:
        key = graph_key(gm, kind, options)
        program = PROGRAMS.get(key)
        if program is not None:
            metrics.count("cache", "hit")
            return program
        metrics.count("cache", "miss")
        try:
            program = Program(gm, kind, _returned_to_the_caller(kind))
        except Unlowerable as e:
            # Correct, just slower: every op goes through the eager executor.
            metrics.count("graph", "eager_graph")
            explain.note(f"{kind} graph runs eagerly: {e}")
            program = eager_runner(gm)
        PROGRAMS[key] = program
        return program

    if kind == "backward":
        # Dynamo would wrap a backward compiler in ``disable`` to keep it from tracing the
        # generated code, hiding the program's boxed calling convention. Our runtime is on
        # Dynamo's skip list already (dynamo_tensor.py), so that wrapper is not needed.
        compile_graph._is_wrapped_bw_compiler = True
    return compile_graph


def _returned_to_the_caller(kind: str) -> range | None:
    """Positions of a graph's outputs the caller receives (None: all): a forward graph's
    user outputs come after the inputs it writes, and its saved activations after them."""
    if kind != "forward":
        return None
    metadata = getattr(torch._guards.TracingContext.try_get(), "fw_metadata", None)
    if metadata is None:
        return range(0)
    first = metadata.num_mutated_inp_runtime_indices
    return range(first, first + len(metadata.output_info))


def compile_aten(gm: fx.GraphModule, example_inputs: list, options: tuple = ()) -> Callable:
    """AOTAutograd over ``gm``, with every ATen graph lowered to a jax program."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    backend = aot_autograd(
        partition_fn=min_cut_rematerialization_partition,
        fw_compiler=_graph_compiler("forward", options),
        bw_compiler=_graph_compiler("backward", options),
        inference_compiler=_graph_compiler("inference", options),
        decompositions=_decompositions(),
        # An inference graph (an optimizer step) writes its inputs itself (copy_ nodes,
        # lower_fx): no epilogue of one eager copy_ per parameter and moment.
        keep_inference_input_mutations=True,
    )
    return backend(gm, example_inputs)


def tpu_backend(
    gm: fx.GraphModule, example_inputs: list, *, options: dict[str, Any] | None = None,
    mode: str | None = None,
) -> Callable:
    """The Dynamo backend. ``options``: ``{"buckets": ...}`` (see compile/buckets.py)."""
    if mode is not None and mode not in _MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: {', '.join(_MODES)}")
    options = dict(options or {})
    unknown = set(options) - _KNOWN_OPTIONS
    tuning = unknown & _inductor_options()
    if tuning:
        # A script tuned for inductor runs unchanged: its knobs mean nothing to XLA.
        warnings.warn(f"torchtpu: backend 'tpu' ignores inductor's option(s) {sorted(tuning)}",
                      stacklevel=2)
        unknown -= tuning
    if unknown:
        raise ValueError(
            f"torchtpu: unknown torch.compile option(s) {sorted(unknown)} for backend 'tpu'; "
            f"known: {sorted(_KNOWN_OPTIONS)}"
        )
    metrics.count("graph", "dynamo_graph")
    explain.record_compile(gm, example_inputs)
    spec = bucketing.parse(options.get("buckets"))
    if spec is not None:
        return bucketing.compile_bucketed(gm, example_inputs, spec, compile_aten)
    return compile_aten(gm, example_inputs)


__all__ = ["PROGRAMS", "compile_aten", "tpu_backend"]
