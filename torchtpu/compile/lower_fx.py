"""Lowering a functional ATen FX graph (what AOTAutograd hands a backend) to one jax function.

Each ``call_function`` node runs its op's lowering rule (ops/registry.py) on jax values, with
its non-tensor arguments as the Python values the graph holds. The whole walk happens inside
one ``jax.jit`` trace, so the graph becomes a single XLA program.

Shapes are static inside a program. A graph traced with symbolic sizes (Dynamo's automatic
dynamic shapes) still lowers: its SymInt inputs that are sizes arrive as Python ints and become
static jit arguments, so each concrete shape is one program (see compile/buckets.py to bound
them). A SymInt input that no shape depends on (a decode loop's position) is a traced argument
instead: one program serves every value.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import torch
from jax import lax
from torch import fx
from torch.utils._pytree import tree_map

from ..debug import counters as metrics
from ..eager.matmul_checks import CHECKED_ON_TENSORS
from ..eager.meta_errors import check_as_cpu
from ..eager.number_checks import NUMBER_OPS, check_number_fits
from ..ops import random as rng
from ..ops.dtypes import as_meta, astype, to_jax_dtype
from ..ops.registry import LOWERINGS
from ..ops.views import gather_view
from ..runtime import code_limit, memory
from ..runtime.execute import concrete, unrecorded
from ..runtime.transfer import to_device, to_host
from ..tensor import (
    TpuTensor,
    contiguous_strides,
    is_dense,
    make_view,
    read,
    with_layout,
    wrap,
    write,
)
from . import graph_checks
from .control_flow import CONTROL_FLOW, subgraphs

aten = torch.ops.aten


class Unlowerable(Exception):
    """The graph holds an op no rule can run inside a program (the graph then runs eagerly)."""


# Asserts and hints the graph carries for other compilers; nothing to compute.
_NO_OPS = {
    aten._assert_tensor_metadata.default,
    aten._assert_scalar.default,
    aten.sym_constrain_range.default,
    aten.sym_constrain_range_for_size.default,
}

_SYM_QUERIES = {
    aten.sym_size.int: lambda x, d: x.shape[d],
    aten.sym_numel.default: lambda x: x.size,
    aten.sym_stride.int: None,  # strides do not exist for jax arrays; see _check
    aten.sym_storage_offset.default: lambda x: 0,
}

_RANDOM_MODULE = rng.__name__
# A checkpointed region's random ops under AOTAutograd: the forward saves the stream's state
# with each, the backward's recomputation replays from it.
_SAVE_RNG = torch.ops.higher_order.run_and_save_rng_state
_REPLAY_RNG = torch.ops.higher_order.run_with_rng_state


def is_random(rule) -> bool:
    return rule.fn.__module__ == _RANDOM_MODULE


def _rng_op(node: fx.Node):
    """The op a run_and_save_rng_state/run_with_rng_state node runs, if it has a rule."""
    op = node.args[0] if node.target is _SAVE_RNG else node.args[1]
    return op if op in LOWERINGS else None


def check(gm: fx.GraphModule) -> None:
    """Raise Unlowerable if any node cannot run inside a program."""
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        t = node.target
        if t in _NO_OPS or t in graph_checks.ASSERTS or t is operator.getitem:
            continue
        if t is _SAVE_RNG or t is _REPLAY_RNG:
            if _rng_op(node) is None:
                raise Unlowerable(f"{t} of {node.args[:2]} (no lowering rule)")
            continue
        if t in _SYM_QUERIES:
            if _SYM_QUERIES[t] is None:
                raise Unlowerable(f"{t} (strides are not modelled inside programs)")
            continue
        if t is aten._to_copy.default:
            if not _stays_on_device(node):
                raise Unlowerable(f"{t} to another device")
            continue
        if t is aten.copy_.default:
            if node.args[0].op != "placeholder":
                raise Unlowerable(f"{t} into an intermediate")
            continue
        if t in _STORAGE_VIEWS:
            if not _is_own_storage(node.args[0]):
                raise Unlowerable(f"{t} of a tensor that is not its own dense storage")
            continue
        if t in CONTROL_FLOW:
            for sub in subgraphs(gm, node):
                _check_subgraph(sub)
            continue
        if isinstance(t, torch._ops.OpOverload):
            rule = LOWERINGS.get(t)
            if rule is None:
                raise Unlowerable(f"{t} has no lowering rule")
            if rule.eager and not (is_random(rule) or _integer_indexing(node)
                                   or _masked_scalar_set(node)):
                raise Unlowerable(f"{t} has a data-dependent output shape")
        elif isinstance(t, torch._ops.HigherOrderOperator) or not callable(t):
            raise Unlowerable(f"call of {t!r}")


def _check_subgraph(gm: fx.GraphModule) -> None:
    """A branch or loop body lowers as a graph does, but draws no random numbers (a branch not
    taken would still advance the stream), writes no input and holds no tensor constant."""
    check(gm)
    if has_random(gm) or any(n.target is aten.copy_.default for n in gm.graph.nodes):
        raise Unlowerable("a write or a random draw inside a torch.cond branch or loop body")
    for node in gm.graph.nodes:
        if node.op == "get_attr" and not isinstance(getattr(gm, node.target), fx.GraphModule):
            raise Unlowerable("a tensor constant inside a torch.cond branch or loop body")


def _stays_on_device(node: fx.Node) -> bool:
    """A ``_to_copy`` onto tpu: inside a program every value is a device array already (a CPU
    input or constant is moved in with the call), so it is a dtype conversion at most, which
    _conform does. A copy off the device runs eagerly."""
    out = node.meta.get("val")
    return isinstance(out, torch.Tensor) and out.device.type == "tpu"


# Views and scatters by storage geometry (AOTAutograd regenerates views of a base with them):
# inside a program a value is a dense array, which is its storage only if PyTorch's meta says
# the tensor is contiguous from offset 0. Otherwise the graph runs eagerly.
_STORAGE_VIEWS = {aten.as_strided.default, aten.as_strided_scatter.default}


def _fakes(node: fx.Node) -> tuple[Any, dict]:
    """The node's arguments as the graph's fake tensors (with their strides)."""
    def fake(a):
        return a.meta.get("val") if isinstance(a, fx.Node) else a

    return tree_map(fake, node.args), tree_map(fake, node.kwargs)


def _is_own_storage(node) -> bool:
    val = node.meta.get("val") if isinstance(node, fx.Node) else None
    return (isinstance(val, torch.Tensor) and val.storage_offset() == 0
            and val.is_contiguous())


def _as_strided(x, size, stride, storage_offset=None):
    return gather_view.jitted(x, storage_offset or 0, (tuple(size), tuple(stride)))


# Eager only because a bool mask's selection has a data-dependent size: with integer index
# tensors their rules are plain array code, and run inside a program.
_INDEXING = {aten.index.Tensor, aten.index_put.default, aten._unsafe_index_put.default}


def _integer_indexing(node: fx.Node) -> bool:
    if node.target not in _INDEXING:
        return False
    indices = [i for i in node.args[1] if i is not None]
    return all(isinstance(i, fx.Node) and isinstance(i.meta.get("val"), torch.Tensor)
               and i.meta["val"].dtype != torch.bool for i in indices)


def _masked_scalar_set(node: fx.Node) -> bool:
    """``x[mask] = scalar`` (a padding mask's ``h[~mask] = 0``): a select, with no
    data-dependent shape (ops/indexing.py)."""
    if node.target not in (aten.index_put.default, aten._unsafe_index_put.default):
        return False
    _, indices, value, *accumulate = (*node.args, *node.kwargs.values())
    index = indices[0] if len(indices) == 1 else None
    return (not any(accumulate) and isinstance(index, fx.Node) and isinstance(value, fx.Node)
            and getattr(index.meta.get("val"), "dtype", None) in (torch.bool, torch.uint8)
            and getattr(value.meta.get("val"), "ndim", None) == 0)


def has_random(gm: fx.GraphModule) -> bool:
    return any(
        n.op == "call_function" and (n.target is _SAVE_RNG or n.target in LOWERINGS
                                     and is_random(LOWERINGS[n.target]))
        for n in gm.graph.nodes
    )


def _conform(node: fx.Node, out):
    """Cast a rule's result to the dtype PyTorch's meta says the node has."""
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor) and isinstance(out, jax.Array):
        want = to_jax_dtype(val.dtype)
        if out.dtype != want:
            out = astype(out, want)  # a float into uint8 wraps, as eager's and CPU's
        shape = tuple(val.shape)
        if all(isinstance(n, int) for n in shape) and out.shape != shape:
            raise AssertionError(
                f"torchtpu: lowering of {node.target} produced shape {out.shape}, "
                f"PyTorch gives {shape}"
            )
        return out
    if isinstance(val, (list, tuple)) and isinstance(out, (list, tuple)):
        fixed = []
        for i, o in enumerate(out):
            v = val[i] if i < len(val) else None
            if isinstance(v, torch.Tensor) and o is not None:
                want = to_jax_dtype(v.dtype)
                o = o if o.dtype == want else astype(o, want)
            fixed.append(o)
        return type(out)(fixed)
    return out


def _traced(values) -> bool:
    return any(isinstance(v, jax.core.Tracer) for v in values)


def _traced_slice(node: fx.Node, x, dim=0, start=None, end=None, step=1):
    """``x[start:end]`` where a bound is a traced int (``cache[:, pos:pos + 1]``): its length
    is the one PyTorch's meta computed, the start read at run time."""
    dim = dim % x.ndim
    n, length = x.shape[dim], node.meta["val"].shape[dim]
    if length == 0:
        return lax.slice_in_dim(x, 0, 0, 1, dim)
    start = 0 if start is None else jnp.where(start < 0, start + n, start)
    span = lax.dynamic_slice_in_dim(x, start, (length - 1) * step + 1, dim)
    return lax.slice_in_dim(span, 0, None, step, dim)


def interpret(gm: fx.GraphModule, inputs: list, written: dict | None = None,
              checks: list | None = None) -> list:
    """Evaluate the graph on jax values (inside a trace): the graph's outputs, flattened.
    ``copy_`` into an input (AOTAutograd keeps an inference graph's input mutations in it)
    records the input's new value in ``written``, by placeholder. ``checks`` collects the
    value checks of its nodes that CPU's kernels make (an index in range), as
    (their traced outputs, make_error, the node and its line in the user's code)."""
    env: dict[fx.Node, Any] = {}
    it = iter(inputs)

    def load(a):
        if isinstance(a, fx.Node):
            return env[a]
        if isinstance(a, (list, tuple)):
            # As the eager executor passes them: tensor lists as lists, int lists as tuples.
            # (A size list may hold SymInt nodes: those load as ints, and it stays a tuple.)
            values = [load(v) for v in a]
            if any(isinstance(v, jax.Array) for v in values):
                return values
            return tuple(values)
        if isinstance(a, dict):
            return {k: load(v) for k, v in a.items()}
        return a

    for node in gm.graph.nodes:
        if node.op == "placeholder":
            env[node] = next(it)
        elif node.op == "get_attr":
            sub = getattr(gm, node.target)
            # Constants are passed in as inputs, after placeholders; a subgraph is called.
            env[node] = sub if isinstance(sub, fx.GraphModule) else next(it)
        elif node.op == "call_function":
            t = node.target
            args, kwargs = load(node.args), load(node.kwargs)
            if t in _NO_OPS:
                env[node] = None
            elif t in graph_checks.ASSERTS:
                # (the functional form returns its dependency token)
                env[node] = args[2] if t is aten._functional_assert_async.msg else None
                if checks is not None:
                    checks.append(graph_checks.of_assert(node, *args[:2]))
            elif t in _SYM_QUERIES:
                env[node] = _SYM_QUERIES[t](*args, **kwargs)
            elif t is aten._to_copy.default:
                env[node] = _conform(node, args[0])  # on the device: only its dtype changes
            elif t is aten.as_strided.default:
                env[node] = _conform(node, _as_strided(*args, **kwargs))
            elif t is aten.copy_.default:  # its functional form's rule, into the input
                value = LOWERINGS[aten.copy.default].fn(*args, **kwargs)
                env[node] = env[node.args[0]] = value  # later reads see the new value
                if written is not None:
                    written[node.args[0]] = value
            elif t is aten.slice.Tensor and _traced(args[2:4]):
                env[node] = _traced_slice(node, *args)
            elif isinstance(t, torch._ops.OpOverload):
                # the checks eager runs that meta kernels skip (on the fake tensors where
                # they read strides, which arrays lack)
                check_as_cpu(t, *(_fakes(node) if t in CHECKED_ON_TENSORS else (args, kwargs)))
                if t in NUMBER_OPS:
                    check_number_fits(t, tree_map(
                        lambda a: as_meta(a) if isinstance(a, jax.Array) else a, args), kwargs)
                env[node] = _conform(node, LOWERINGS[t].fn(*args, **kwargs))
                if checks is not None:
                    checks += graph_checks.of_node(node, _fakes(node), args, kwargs)
            elif t in CONTROL_FLOW:
                env[node] = CONTROL_FLOW[t](interpret, *args, **kwargs)
            elif t is _SAVE_RNG:
                state = rng.saved_state()
                env[node] = (state, LOWERINGS[args[0]].fn(*args[1:], **kwargs))
            elif t is _REPLAY_RNG:
                with rng.replaying(args[0]):
                    env[node] = LOWERINGS[args[1]].fn(*args[2:], **kwargs)
            else:  # operator.getitem, operator.mul on sizes, math functions, ...
                env[node] = t(*args, **kwargs)
        elif node.op == "output":
            out = node.args[0]  # a loop's condition graph returns its one value bare
            return list(load(out)) if isinstance(out, (list, tuple)) else [load(out)]
        else:
            raise Unlowerable(f"FX node kind {node.op}")
    raise AssertionError("graph without an output node")


def _arg_kinds(gm: fx.GraphModule) -> list[str]:
    """'array' for tensor placeholders; 'int' for a SymInt no size, stride or int output
    depends on (traced: one program for all its values); 'static' for the rest."""
    sized = _size_symbols(gm)
    kinds = []
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            val = node.meta.get("val")
            if val is None or isinstance(val, torch.Tensor):
                kinds.append("array")
            elif (isinstance(val, torch.SymInt) and val.node.expr.is_Symbol
                  and val.node.expr not in sized):
                kinds.append("int")
            else:
                kinds.append("static")
    return kinds


def _size_symbols(gm: fx.GraphModule) -> set:
    """The symbols a program's shapes are made of: those in a tensor's sizes or strides, and
    in the ints the graph returns (an int output computed from a traced one would be an
    array). A returned input itself is handed back as it came."""
    def symbols(n) -> set:
        return n.node.expr.free_symbols if isinstance(n, torch.SymInt) else set()

    found = set()
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        vals = val if isinstance(val, (list, tuple)) else [val]
        for v in vals:
            if isinstance(v, torch.Tensor):
                for n in (*v.shape, *v.stride()):
                    found |= symbols(n)
        if node.op == "output":
            for o in node.args[0]:
                if isinstance(o, fx.Node) and o.op != "placeholder":
                    found |= symbols(o.meta.get("val"))
    return found


def _to_array(x) -> jax.Array:
    # A value fused eager has recorded but not run is computed first: a compiled program
    # is a sync point for fused eager.
    if type(x) is TpuTensor:
        return concrete(x._storage.value if x._direct else read(x))
    if isinstance(x, TpuTensor):
        return concrete(read(x))
    if isinstance(x, torch.Tensor):
        # A real CPU constant; the graph compilers run under AOTAutograd's FakeTensorMode.
        with torch.utils._python_dispatch._disable_current_modes():
            return to_device(x)
    return jnp.asarray(x)


class Program:
    """A lowered graph: call it with the graph's runtime inputs, get its outputs as tensors."""

    def __init__(self, gm: fx.GraphModule, name: str, returned: range | None = None):
        check(gm)
        self.gm = gm
        self.name = name
        self.kinds = _arg_kinds(gm)
        self.constants = [
            _to_array(value) for n in gm.graph.nodes if n.op == "get_attr"
            and not isinstance(value := getattr(gm, n.target), fx.GraphModule)
        ]
        self.random = has_random(gm)
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        # Inputs the graph writes (copy_ into a placeholder): their positions, in order.
        self.mutated = [i for i, n in enumerate(placeholders)
                        if any(u.target is aten.copy_.default and u.args[0] is n
                               for u in n.users)]
        self._placeholders = placeholders
        output = next(n for n in gm.graph.nodes if n.op == "output")
        # Outputs the caller receives that view an intermediate the graph does not return
        # (``x.cumsum(1)[:, -1]``) are made views of it, as CPU's are: the program returns it
        # too, after the graph's outputs. (Not the activations a forward saves: it would keep
        # both the view's value and its base.)
        self._returned = len(output.args[0])
        returned = range(self._returned) if returned is None else returned
        bases = _viewed_intermediates(output.args[0], [output.args[0][i] for i in returned])
        if bases:
            output.args = ((*output.args[0], *bases),)
            gm.recompile()
        self._strides = [_dense_layout(o) for o in output.args[0]]
        # Outputs that may be handed back as the input tensor their value is: an input or a
        # view of one. A rule may return its input array unchanged (cummin of a 0-d tensor),
        # but the graph's result is then new memory, which a later write must not share.
        self._passthrough = [isinstance(o, fx.Node) and (o.op == "placeholder" or _is_view(o))
                             for o in output.args[0]]
        # Outputs PyTorch puts on the CPU (computed from CPU inputs only) go back there.
        self._on_host = [_on_host(o) for o in output.args[0]]
        # Outputs that view another output: (position, (that output's position, geometry)).
        self._views = [(i, view) for i, o in enumerate(output.args[0])
                       if (view := _view_of_output(o, output.args[0])) is not None]
        # Outputs that view an input or another output with symbolic geometry: (position,
        # the nodes to replay), in graph order.
        self._outputs = list(output.args[0])
        order = {n: k for k, n in enumerate(gm.graph.nodes)}
        self._symbolic_views = sorted(
            ((i, nodes) for i, o in enumerate(self._outputs)
             if (nodes := _symbolic_view(gm, o, self._outputs)) is not None),
            key=lambda view: order[view[1][-1]])
        # Per static-argument signature: the draws the program makes, its non-array outputs.
        self._draws: dict[tuple, int] = {}
        self._layout: dict[tuple, list] = {}
        self._checks: dict[tuple, list] = {}
        self._jit = jax.jit(self._trace, static_argnums=(1,))

    def _trace(self, arrays: list, statics: tuple, stream: tuple | None):
        metrics.count("compile", f"graph:{self.name}")
        metrics.count("graph", "trace")
        it_arrays, it_statics = iter(arrays), iter(statics)
        inputs = [next(it_statics) if k == "static" else next(it_arrays) for k in self.kinds]
        inputs += list(it_arrays)  # the constants
        written: dict = {}
        checks: list = []
        with unrecorded():
            if stream is not None:
                with rng.traced_stream(*stream) as draws:
                    outs = interpret(self.gm, inputs, written, checks)
                self._draws[statics] = draws[2]
            else:
                outs = interpret(self.gm, inputs, written, checks)
        self._checks[statics] = [(len(found), make_error, origin)
                                 for found, make_error, origin in checks]
        # A program returns arrays only; ints and Nones in the output are fixed per signature.
        # An output that is an input, unchanged (a weight a forward saves for its backward),
        # is that input tensor itself, as inductor returns it: as a program output XLA
        # would copy it.
        position = {id(inputs[i]): i for i, k in enumerate(self.kinds) if k != "static"}
        layout, arrays_out = [], []
        replayed = {i for i, _ in self._symbolic_views}
        for k, o in enumerate(outs):
            if not isinstance(o, jax.Array) or k in replayed:  # (a replayed view: made later)
                layout.append(("const", None if k in replayed else o))
            elif id(o) in position and (self._passthrough[k]
                                        or self.kinds[position[id(o)]] != "array"):
                i = position[id(o)]
                layout.append(("input" if self.kinds[i] == "array" else "int", i))
            else:
                layout.append(None)
                arrays_out.append(o)
        self._layout[statics] = layout
        return (arrays_out + [written[self._placeholders[i]] for i in self.mutated]
                + [a for found, *_ in checks for a in found])

    # AOTAutograd's boxed convention: one list argument, which we may clear early. Its
    # backward wrapper (Dynamo's ``disable``) hides the flag and passes inputs unboxed.
    _boxed_call = True

    def __call__(self, *args) -> list:
        if code_limit.due:
            code_limit.release_programs()
        if len(args) == 1 and type(args[0]) is list:  # graph inputs are never lists
            args = args[0]
        arrays, statics = [], []
        for kind, a in zip(self.kinds, args, strict=True):
            if kind == "array":
                arrays.append(_to_array(a))
            elif kind == "int":
                arrays.append(a)  # a Python int: jax traces it weakly typed, as a scalar
            else:
                statics.append(a)
        targets = [args[i] for i in self.mutated]
        inputs = list(args)  # until the outputs that are inputs are handed back
        if type(args) is list:
            args.clear()  # drop the caller's references to the inputs
        arrays += self.constants
        statics = tuple(statics)
        stream = rng.stream_inputs() if self.random else None
        try:
            outs = self._jit(arrays, statics, stream)
        except jax.errors.JaxRuntimeError as e:
            memory.raise_as_torch(e)
        except (TypeError, ValueError, IndexError):  # jax's, for a tracer used as an int
            if "int" not in self.kinds:
                raise
            # A rule needed a traced int as a Python value (a loop bound, a jitted helper's
            # static argument): those ints are static from now on, one program per value.
            metrics.count("graph", "static_ints")
            self.kinds = ["static" if k == "int" else k for k in self.kinds]
            return self(inputs)
        if stream is not None:
            rng.advance(self._draws[statics])
        if checks := self._checks[statics]:
            outs = graph_checks.launch(outs, checks)
        if targets:  # the inputs the graph wrote: their new values are the last outputs
            for t, value in zip(targets, outs[len(outs) - len(targets):], strict=True):
                _write_input(t, value)
            outs = outs[:len(outs) - len(targets)]
        it = iter(outs)
        results = [(to_host(next(it)) if host else _as_tensor(next(it), stride))
                   if slot is None else _returned_input(inputs[slot[1]], stride, host)
                   if slot[0] == "input" else inputs[slot[1]] if slot[0] == "int" else slot[1]
                   for slot, stride, host in zip(self._layout[statics], self._strides,
                                                 self._on_host, strict=True)]
        if self._symbolic_views:
            # AOTAutograd rebuilds a view of an input from the input with the geometry of ours
            # (it cannot replay views with symbolic arguments), and leaves views among
            # outputs to us: ours must be the real views.
            env = dict(zip(self._placeholders, inputs, strict=True))
            for i, nodes in self._symbolic_views:
                env.update(zip(self._outputs, results, strict=True))
                results[i] = _replay(nodes, env)
        for i, view in self._views:
            # The program returned the view's values; the tensor aliases its base, as an
            # inference graph's outputs do in eager (AOTAutograd leaves that to the compiler).
            if type(results[i]) is TpuTensor and _is_wrapped(results[view[0]]):
                results[i] = make_view(results[view[0]]._storage, read(results[i]), *view[1])
        return results[:self._returned]


def _returned_input(t: torch.Tensor, layout: tuple | None, host: bool) -> torch.Tensor:
    """An output that is an input, unchanged: that tensor, unless the graph moved it onto
    the device (``x.to("tpu")`` of a CPU input, a no-op inside the program)."""
    if host or isinstance(t, TpuTensor):
        return t
    return _as_tensor(_to_array(t), layout)


def _dense_layout(node) -> tuple | None:
    """An output's memory order (its dimensions from outermost to innermost) when PyTorch's
    meta gives it a dense layout other than contiguous (a channels_last conv result, a
    transposed view), else None. Under symbolic sizes the order comes from their example
    values: a program serves many shapes, each laid out in that order."""
    val = node.meta.get("val") if isinstance(node, fx.Node) else None
    if not isinstance(val, torch.Tensor):
        return None
    size, stride = [_hint(n) for n in val.shape], [_hint(n) for n in val.stride()]
    if None in size or None in stride or not is_dense(size, stride):
        return None
    if tuple(stride) == contiguous_strides(size):
        return None
    static = tuple(size) if all(isinstance(n, int) for n in val.shape) else None
    order = sorted(range(len(size)), key=lambda d: (-stride[d], -size[d]))
    return static, tuple(order)


def _view_of_output(node, outputs) -> tuple | None:
    """(k, geometry) when output ``node`` is a chain of views of output k, a dense tensor
    from offset 0 (``y, y.view(4)``; a graph break returns what code after it still uses)."""
    base = _viewed_base(node, outputs)
    if base is None or base not in outputs or not _can_alias(node, base):
        return None
    val = node.meta["val"]
    return outputs.index(base), (tuple(val.shape), tuple(val.stride()), val.storage_offset())


def _viewed_intermediates(outputs, candidates) -> list[fx.Node]:
    """The intermediates ``candidates`` (some of the outputs) are views of: chains of
    static views, not covering the whole of it densely, with no output or input among them."""
    bases = []
    for node in candidates:
        base = _viewed_base(node, outputs)
        if base is None or base in outputs or base.op != "call_function" or base in bases:
            continue
        val, of = node.meta["val"], base.meta["val"]
        whole = (val.storage_offset() == 0 and val.numel() == of.numel()
                 and is_dense(val.shape, val.stride()))
        if not whole and _can_alias(node, base):
            bases.append(base)
    return bases


def _viewed_base(node, outputs) -> fx.Node | None:
    """For an output with static geometry made by view ops: the first output along its chain
    of views, else the chain's start; None for any other output."""
    if not isinstance(node, fx.Node) or not _is_static(node):
        return None
    base = node
    while (base.op == "call_function" and isinstance(base.target, torch._ops.OpOverload)
           and base.target.is_view and isinstance(base.args[0], fx.Node)):
        base = base.args[0]
        if base in outputs:
            return base
    return None if base is node else base


def _can_alias(node, base) -> bool:
    """Whether output ``node`` can be a view of ``base``'s storage with its own geometry.
    A conj or neg view (y.conj()) reads its base's memory through a math bit the geometry
    does not carry: it keeps the value the program computed."""
    val, of = node.meta["val"], base.meta["val"]
    return (_is_own_storage(base) and _is_static(base) and of.dtype == val.dtype
            and of.is_conj() == val.is_conj() and of.is_neg() == val.is_neg())


def _symbolic_view(gm: fx.GraphModule, node, outputs) -> list[fx.Node] | None:
    """The nodes computing output ``node``, in graph order, when it is a chain of views with
    symbolic geometry (``x[:, :n // 2]``, ``x[:, p:p + 4:2]``, ``x.split(n // 2)[1]``) of a
    tensor input or of another output; the chain starts at that base."""
    if (not isinstance(node, fx.Node) or not isinstance(node.meta.get("val"), torch.Tensor)
            or node.op == "placeholder" or _is_static(node)):
        return None
    needed, stack, bases = set(), [node], 0
    while stack:
        n = stack.pop()
        if n in needed:
            continue
        needed.add(n)
        is_tensor = isinstance(n.meta.get("val"), torch.Tensor)
        if is_tensor and (n.op == "placeholder" or n is not node and n in outputs):
            bases += 1
            continue
        if n.op == "call_function" and is_tensor and not _is_view(n):
            return None  # computed, not a view
        stack.extend(n.all_input_nodes)
    return [n for n in gm.graph.nodes if n in needed] if bases else None


def _is_view(node: fx.Node) -> bool:
    """A view op's node, or one piece of a view op's list (``split``'s, ``unbind``'s)."""
    if node.target is operator.getitem and isinstance(node.args[0], fx.Node):
        node = node.args[0]
    return node.op == "call_function" and getattr(node.target, "is_view", False)


def _replay(nodes: list[fx.Node], env: dict):
    """Run view nodes (and the int arithmetic they read) eagerly on ``env``'s tensors: the
    runtime inputs and the outputs they view."""
    env = dict(env)
    for n in nodes:
        if n not in env or n is nodes[-1]:  # (the output itself holds the program's value)
            env[n] = n.target(*fx.node.map_arg(n.args, env.__getitem__),
                              **fx.node.map_arg(n.kwargs, env.__getitem__))
    return env[nodes[-1]]


def _is_static(node: fx.Node) -> bool:
    val = node.meta.get("val")
    return isinstance(val, torch.Tensor) and all(
        isinstance(n, int) for n in (*val.shape, *val.stride(), val.storage_offset()))


def _is_wrapped(t) -> bool:
    """A tensor a program output became: the whole of its own storage."""
    return type(t) is TpuTensor and t._direct


def _on_host(node) -> bool:
    val = node.meta.get("val") if isinstance(node, fx.Node) else None
    return isinstance(val, torch.Tensor) and val.device.type == "cpu"


def _hint(n) -> int | None:
    """A size or stride: itself, or a symbolic one's example value."""
    if isinstance(n, int):
        return n
    hint = getattr(getattr(n, "node", None), "hint", None)
    return hint if isinstance(hint, int) else None


def _as_tensor(value: jax.Array, layout: tuple | None) -> TpuTensor:
    """An output as a tensor, laid out as the graph's meta says (a bucketed, padded output
    of another shape stays contiguous)."""
    if layout is None:
        return wrap(value)
    static, order = layout
    if (static is not None and tuple(value.shape) != static) or len(order) != value.ndim:
        return wrap(value)
    stride, step = [0] * value.ndim, 1
    for d in reversed(order):
        stride[d] = step
        step *= max(value.shape[d], 1)
    return with_layout(value, tuple(stride))


def _write_input(t: torch.Tensor, value: jax.Array) -> None:
    """An input's new value: a tpu tensor takes it in its storage; a CPU one (a step counter
    of an optimizer without capturable=True) gets it copied back to the host."""
    if isinstance(t, TpuTensor):
        write(t, value)
    else:
        with torch.no_grad():
            t.copy_(to_host(value))


def eager_runner(gm: fx.GraphModule) -> Callable:
    """Run the graph op by op on the eager tpu executor (for graphs a program cannot hold)."""
    _call_dense_kernels(gm)
    _views_as_reshapes(gm)

    def run(*args):
        if len(args) == 1 and type(args[0]) is list:
            args = args[0]
        metrics.count("graph", "eager_graph_run")
        return gm(*args)

    run._boxed_call = True
    return run


def _views_as_reshapes(gm: fx.GraphModule) -> None:
    """The graph's ``view`` nodes as ``reshape``: PyTorch checked them against its strides,
    and an eager tpu result may be laid out otherwise (an elementwise result of a transposed
    input is contiguous), where ``view`` would refuse what ``reshape`` copies. A functional
    graph writes through none of them, so the values are the same."""
    views = [n for n in gm.graph.nodes if n.op == "call_function"
             and n.target in (aten.view.default, aten._unsafe_view.default)]
    for node in views:
        node.target = aten.reshape.default
    if views:
        gm.recompile()


def _dense_kernels() -> dict:
    """Higher-order ops the graph may call, each with the dense kernel that runs it."""
    from torch._higher_order_ops import auto_functionalize as af

    kernels = {af.auto_functionalized: af.auto_functionalized_dense,
               af.auto_functionalized_v2: af.auto_functionalized_v2_dense}
    try:
        from torch._higher_order_ops.effects import with_effects, with_effects_dense
    except ImportError:
        return kernels
    return {**kernels, with_effects: with_effects_dense}


def _call_dense_kernels(gm: fx.GraphModule) -> None:
    """Higher-order ops as their dense kernels: an op with a side effect (linalg's error
    checks) is a ``with_effects`` call, a custom op writing its arguments an
    ``auto_functionalized`` one. Called as higher-order ops on tpu tensors, their dispatch
    finds no rule for our subclass (or ends in a mode that does not know them: AOTAutograd's
    alias check on the first run) and fails."""
    kernels = _dense_kernels()
    nodes = [n for n in gm.graph.nodes if n.op == "call_function" and n.target in kernels]
    for node in nodes:
        node.target = kernels[node.target]
    if nodes:
        gm.recompile()
