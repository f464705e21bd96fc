"""Fused eager: ops are recorded, and at a sync point the pending ops run as one program.

Every executable call (runtime/execute.py) is recorded as a node: the executable, its static
arguments, and where each array argument comes from (an earlier node's output or an
external array). Output shapes come from ``jax.eval_shape``, cached per signature. At a sync
point (`.item()`, `.cpu()`, printing, a data-dependent shape, ``torch.tpu.synchronize()``,
``torchtpu.sync()``, or the trace growing past ``TORCHTPU_FUSED_MAX_OPS``) the trace becomes
one jitted function, cached by the trace's signature, so a training loop that syncs once per
step compiles once and then runs each step as one XLA program. When the sync point forces
one value and much of the trace does not lead to it (``loss.item()`` after backward and the
optimizer step), the part it needs runs first and the rest after it, without waiting.
A loop that does not sync every step is cut at optimizer steps instead: once a second step
is pending, what was recorded runs (without waiting), so its programs repeat step for step
rather than being cut wherever the size limit falls, a new program each time. A loop with
no optimizer step (evaluation, generation) is cut by size; once a cut has shown the period
its ops repeat with, later cuts fall where that cut fell in the loop body (the last period
before the limit ending as it ended), so from the second cut on the programs repeat.
Only outputs some tensor still references are returned; intermediates never leave the
device program.

With the persistent cache on, programs and per-op output shapes are also kept on disk under a
key built from what was recorded (runtime/program_store.py), so a new process running the
same loop neither traces nor compiles: it loads.
"""

from __future__ import annotations

import functools
import math
import sys
import warnings
import weakref
from collections import Counter, OrderedDict

import jax
import jax.numpy as jnp
import torch
from jax.tree_util import tree_flatten, tree_unflatten
from torch.optim.optimizer import register_optimizer_step_post_hook

from .. import config
from ..debug import counters
from ..runtime import code_limit, execute, memory, program_store
from ..runtime.execute import Executable, Pending
from ..runtime.program_store import Unstable, stable
from ..tensor import forget_pending_views, note_last_program, settle_pending
from . import deferred_checks


class _Trace:
    def __init__(self):
        self.nodes: list[tuple] = []  # (exe, statics, kw_statics, treedef, wiring)
        self.outs: list[list[weakref.ref]] = []
        self.out_avals: list[list] = []
        self.leaves: list = []
        self.leaf_index: dict[int, int] = {}
        self.leaf_avals: list = []


_trace = _Trace()
_AVALS: dict = {}
# Least recently run last; a process that keeps making new programs (shapes that never repeat)
# lets the oldest go, as each holds its compiled code.
_PROGRAMS: OrderedDict = OrderedDict()
_MAX_PROGRAMS = 1024
code_limit.on_release(lambda: _PROGRAMS.clear())
_stored_shapes: tuple = (None, {})  # (store folder, its shapes) as last read
_new_shapes: dict = {}  # found by tracing since the last write to the store
_max_ops = 0
# The loop body's ops as the last size cut found them (a period of hashes ending where it
# cut), and the trace length from which a trace ending so is cut (a period before the limit).
_anchor: tuple = ()
_window = 0
_split_forced = True
_steps_pending = 0  # optimizer steps recorded since the last flush
_step_hook = None
_donate = True


_NUMBERS = (bool, int, float, complex)


def _aval_key(x):
    if isinstance(x, (bool, int, float, complex)):
        return type(x)
    return (x.shape, x.dtype, getattr(x, "weak_type", False))


def _abstract(x):
    if isinstance(x, (bool, int, float, complex)):
        return x
    return jax.ShapeDtypeStruct(x.shape, x.dtype, weak_type=getattr(x, "weak_type", False))


def record(exe: Executable, args: tuple, kwargs: dict):
    """Record one executable call; returns its outputs as pending values."""
    nums, names = exe.static_argnums, exe.static_argnames
    if nums:
        statics = tuple((i, a) for i, a in enumerate(args) if i in nums)
        dyn = [a for i, a in enumerate(args) if i not in nums]
    else:
        statics, dyn = (), list(args)
    kw_statics = tuple((k, v) for k, v in kwargs.items() if k in names) if kwargs else ()
    dyn_kw = {k: v for k, v in kwargs.items() if k not in names} if kwargs else {}
    leaves, treedef = tree_flatten((dyn, dyn_kw))
    t = _trace
    first_new_leaf = len(t.leaves)
    wiring, avals = [], []
    for leaf in leaves:
        if type(leaf) is Pending:
            if leaf.array is None:
                if leaf.error is not None:  # its op failed in an earlier program
                    raise leaf.error.with_traceback(None)
                wiring.append(leaf.src)
                avals.append((leaf.shape, leaf.dtype, False))
                continue
            leaf = leaf.array
        # An array used twice is one input. A number is an input of its own at each use:
        # Python shares small ints' objects, so sharing by identity would wire a loop's step
        # (x[i], offsets) by value, one program per value.
        idx = None if type(leaf) in _NUMBERS else t.leaf_index.get(id(leaf))
        if idx is None:
            idx = len(t.leaves)
            if type(leaf) not in _NUMBERS:
                t.leaf_index[id(leaf)] = idx
            t.leaves.append(leaf)
            t.leaf_avals.append(_aval_key(leaf))
        wiring.append(idx)
        avals.append(t.leaf_avals[idx])
    wiring = tuple(wiring)
    sig = (exe, statics, kw_statics, treedef, tuple(avals))
    key = (sig, torch.get_default_dtype())  # rules read it as they are traced
    shape_info = _AVALS.get(key)
    if shape_info is None:
        try:
            shape_info = _AVALS[key] = _shapes(sig, exe, args, kwargs)
        except BaseException:
            # The op is not recorded: nor are the inputs it added (a number jax cannot take
            # would fail the next program).
            for leaf in t.leaves[first_new_leaf:]:
                t.leaf_index.pop(id(leaf), None)
            del t.leaves[first_new_leaf:], t.leaf_avals[first_new_leaf:]
            raise
    out_treedef, out_avals = shape_info
    node = len(t.nodes)
    outs = [Pending(a.shape, a.dtype, (node, j)) for j, a in enumerate(out_avals)]
    t.nodes.append((exe, statics, kw_statics, treedef, wiring))
    t.outs.append([weakref.ref(p) for p in outs])
    t.out_avals.append(out_avals)
    if node + 1 >= _window and (node + 1 >= _max_ops or _ends_as_anchor(t.nodes)):
        _set_anchor(t.nodes)
        flush(cut=True)
    return tree_unflatten(out_treedef, outs)


def _op(node: tuple) -> int:
    return hash(node[:4])  # the op and its static arguments, not where its inputs come from


def _ends_as_anchor(nodes: list[tuple]) -> bool:
    n = len(_anchor)
    return _op(nodes[-1]) == _anchor[-1] and tuple(_op(x) for x in nodes[-n:]) == _anchor


def _set_anchor(nodes: list[tuple]) -> None:
    global _anchor, _window
    ops = [_op(x) for x in nodes]
    period = _period(ops)
    _anchor = tuple(ops[-period:]) if period else ()
    _window = _max_ops - len(_anchor)


def _period(ops: list[int]) -> int | None:
    """The smallest p with ``ops[-2p:-p] == ops[-p:]`` (the last p ops repeat), if any."""
    n = len(ops)
    last = ops[-1]
    for p in range(1, n // 2 + 1):
        if ops[n - 1 - p] == last and ops[n - 2 * p:n - p] == ops[n - p:]:
            return p
    return None


def _shapes(sig, exe, args, kwargs):
    """An op's output shapes: from the store if an earlier process traced this signature."""
    global _stored_shapes
    text = _call_text(*sig) if program_store.enabled() else None
    if text is not None:
        folder = program_store.folder()
        if _stored_shapes[0] != folder:
            _stored_shapes = (folder, program_store.load_shapes())
        known = _stored_shapes[1].get(text)
        if known is not None:
            return known
    info = _eval_shape(exe, args, kwargs, exe.static_argnums, exe.static_argnames)
    if text is not None:
        _new_shapes[text] = info
    return info


def _call_text(exe, statics, kw_statics, treedef, inputs) -> str | None:
    """A recorded call as text the same in every process; None if some part is not."""
    if exe.key is None:
        return None
    try:
        return (f"{exe.key}|{stable(statics)}|{stable(kw_statics)}|{treedef}|{stable(inputs)}"
                f"|{torch.get_default_dtype()}")
    except Unstable:
        return None


def _eval_shape(exe, args, kwargs, nums, names):
    a = [a if i in nums else jax.tree_util.tree_map(_abstract, a) for i, a in enumerate(args)]
    k = {n: v if n in names else jax.tree_util.tree_map(_abstract, v) for n, v in kwargs.items()}
    leaves, treedef = tree_flatten(jax.eval_shape(exe.current(), *a, **k))
    return treedef, leaves


def _program(nodes, needed, donated):
    """The recorded trace as one function of its external leaves."""
    fences = _fences(nodes, donated)

    def program(*leaves):
        env = []
        for i, node in enumerate(nodes):
            values = [leaves[w] if type(w) is int else env[w[0]][w[1]] for w in node[4]]
            for leaf, after in fences.get(i, {}).items():
                fenced = _after(leaves[leaf], [v for k in after for v in env[k]])
                values = [fenced if w == leaf else v for w, v in zip(node[4], values, strict=True)]
            env.append(_call(node, values))
        return [env[i][j] for i, j in needed]

    return jax.jit(program, donate_argnums=donated)


def _fences(nodes: list[tuple], donated: tuple) -> dict[int, dict[int, list[int]]]:
    """For each donated leaf more than one op reads (a weight the backward's dots read and
    the optimizer step updates): its other readers, whose outputs the last reader's read
    must follow.

    XLA writes a donated buffer's new value in place only if it can prove every other read
    of the buffer comes first; unordered, it copies the leaf first (every weight, each step).
    XLA:CPU drops optimization barriers before it looks, so the order is a data dependency
    (``_after``). A view's readers read its leaf. Keyed by the last reader's node."""
    consumers: dict[int, set[int]] = {}
    for i, node in enumerate(nodes):
        for w in node[4]:
            if type(w) is tuple:
                consumers.setdefault(w[0], set()).add(i)

    def readers(i):  # the node, or for a view what reads it
        if not nodes[i][0].is_view:
            return {i}
        return set().union(*(readers(k) for k in consumers.get(i, ())))

    donated, direct = set(donated), {}
    for i, node in enumerate(nodes):
        for w in node[4]:
            if type(w) is int and w in donated:
                direct.setdefault(w, set()).add(i)
    fences: dict[int, dict[int, list[int]]] = {}
    ancestors: dict[int, set[int]] = {}  # a last reader's: their reads come first already
    for leaf, nodes_reading in direct.items():
        every = sorted(set().union(*(readers(i) for i in nodes_reading)))
        last = every[-1] if every else None
        if last not in nodes_reading or len(every) < 2:
            continue  # no other reader, or the last reads it through a view
        if last not in ancestors:
            ancestors[last] = _ancestors(nodes, last)
        after = [k for k in every[:-1] if k not in ancestors[last]]
        if after:
            fences.setdefault(last, {})[leaf] = after
    return fences


def _after(leaf, values: list):
    """``leaf``, unchanged, as a value XLA computes only once ``values`` are: a select on
    a comparison that is never true (no number exceeds infinity, NaN included)."""
    if not jnp.issubdtype(leaf.dtype, jnp.floating):
        return leaf
    firsts = [jnp.real(v.reshape(-1)[0]).astype(jnp.float32)
              for v in values if hasattr(v, "shape") and v.size]
    if not firsts:
        return leaf
    never = sum(firsts[1:], firsts[0]) > jnp.inf
    return jnp.where(never, leaf + 1, leaf)


def _call(node: tuple, values: list) -> list:
    """One recorded call on its array arguments' values: its outputs, flattened."""
    exe, statics, kw_statics, treedef, _ = node
    dyn, dyn_kw = tree_unflatten(treedef, values)
    args = list(dyn)
    for i, v in statics:
        args.insert(i, v)
    return jax.tree_util.tree_leaves(exe.jitted(*args, **dyn_kw, **dict(kw_statics)))


def _donatable(leaves: list, outputs: list) -> tuple[int, ...]:
    """Leaves nothing else references any more (an input updated in place, a temporary)
    whose buffer an output of the same shape can reuse, so memory does not double."""
    if not _donate:
        return ()
    free = Counter((p.shape, p.dtype) for p in outputs)
    out = []
    for i in range(len(leaves)):
        # No local name for the leaf: the only references allowed are the list's and
        # getrefcount's own argument.
        if isinstance(leaves[i], jax.Array) and sys.getrefcount(leaves[i]) <= 2:
            aval = (leaves[i].shape, leaves[i].dtype)
            if free[aval] > 0:
                free[aval] -= 1
                out.append(i)
    return tuple(out)


def flush(target: Pending | None = None, *, cut: bool = False) -> None:
    """Run every recorded op (each program compiled once per trace signature).

    Forcing one value (``target``: ``loss.item()``) runs the ops it depends on as their own
    program and dispatches the rest after it without waiting, so the caller has its value
    while the rest (backward, the optimizer step) still runs and Python records on. A
    ``cut`` (the size limit) leaves the count of optimizer steps since the last flush as it
    is, so the optimizer-step cuts keep their place in the loop."""
    global _trace, _steps_pending
    t = _trace
    if not cut:
        _steps_pending = 0
    if not t.nodes:
        if not cut:
            deferred_checks.raise_failed(wait=target is None)
        return
    recompiled_before = _recompiles
    _trace = _Trace()
    t.leaf_index.clear()
    first = _ancestors(t.nodes, target.src[0]) if target is not None and _split_forced else None
    if first is not None:
        first |= _checks_of(t.nodes, first)
    if first is None or len(t.nodes) - len(first) < _MIN_TAIL:
        _, error = _run_or_each(t)
        first = None if target is None else set(range(len(t.nodes)))  # (all forced)
    else:
        head, tail, links = _split(t, first)
        del t
        arrays, error = _run_or_each(head, links)
        del head  # its leaf list, so the tail may donate what only it still reads
        tail.leaves += arrays
        tail.leaf_avals += [_aval_key(a) for a in arrays]
        del arrays
        if error is None:
            _, error = _run_or_each(tail)
        else:  # the links the head failed to compute fail the ops that read them
            _run_each(tail)
    deferred_checks.dispatched(first)
    if _new_shapes:
        program_store.save_shapes(_new_shapes)
        _new_shapes.clear()
    if not cut:  # (size-limit cuts fall anywhere while a loop's period is being found)
        _note_recompiles(recompiled_before)
    if error is not None:
        raise error
    if not cut:  # (a cut falls inside some op's call: its checks wait for a sync point)
        deferred_checks.raise_failed(wait=target is None)


def _checks_of(nodes: list[tuple], first: set[int]) -> set[int]:
    """The index checks that read only what ``first`` computes: they run in its program, so
    the sync point forcing it reports them."""
    return {i for i in deferred_checks.recorded_nodes()
            if i not in first and _ancestors(nodes, i) - {i} <= first}


# Sync points in a row that each needed a new program: the recorded ops change every time.
_MISSING_STREAK = 8
_streak = 0
_recompiles = 0  # programs this process compiled again for other shapes, so far
# The op sequences (executables alone) of the programs compiled so far: a program missed for
# a sequence not among them is a step's warm-up (each sync point of a step is its own
# program), not shapes that vary.
_op_sequences: set = set()
_MAX_SEQUENCES = 4096


def _note_recompiles(recompiled_before: int) -> None:
    """Warn when fused eager needs a new program for ops it has compiled before at every sync
    point (shapes that vary step to step): each is a whole program to compile there, where
    strict eager reuses per-op ones. (Counted in process: a program the persistent cache
    holds still missed here.)"""
    global _streak
    _streak = _streak + 1 if _recompiles > recompiled_before else 0
    if _streak == _MISSING_STREAK:
        warnings.warn(
            f"torchtpu: fused eager compiled a new program at each of the last "
            f"{_MISSING_STREAK} sync points: the recorded ops change every time (shapes "
            "that vary from step to step, such as packed sequences of new lengths). Strict "
            "eager reuses its per-op programs and is faster here; torch.compile's "
            "options={'buckets': ...} pads a varying dimension.", stacklevel=3)


def _run_or_each(t: _Trace, keep: tuple = ()) -> tuple[list, Exception | None]:
    """Run ``t`` as one program; if that raises, op by op (``_run_each``). Returns ``keep``'s
    values and the error, which the sync point raises once every value that does not depend
    on it is computed."""
    try:
        return _run(t, keep), None
    except Exception as e:
        return _run_each(t, keep), e


def _run_each(t: _Trace, keep: tuple = ()) -> list:
    """After ``t``'s program failed (out of memory, say): each op on its own, as strict eager
    would have run them, so a failure loses nothing else. Values computed from the failing
    op's output keep its error, and raise it when read. Returns ``keep``'s values."""
    forget_pending_views()
    env = []
    for i, node in enumerate(t.nodes):
        values = [t.leaves[w] if type(w) is int else env[w[0]][w[1]] for w in node[4]]
        error = next((v for v in values if isinstance(v, Exception)), None)
        if error is None:
            try:
                env.append(_call(node, values))
                continue
            except Exception as e:
                error = e
        env.append([error] * len(t.out_avals[i]))
    for i, refs in enumerate(t.outs):
        for j, ref in enumerate(refs):
            p = ref()
            if p is not None:
                if isinstance(env[i][j], Exception):
                    p.error = env[i][j]
                else:
                    p.array = env[i][j]
    return [env[i][j] for i, j in keep]


# Fewer ops than this left over after a forced value are not worth a program of their own.
_MIN_TAIL = 64


def _ancestors(nodes: list[tuple], node: int) -> set[int]:
    """The nodes ``node`` depends on, itself included."""
    seen, stack = {node}, [node]
    while stack:
        for w in nodes[stack.pop()][4]:
            if type(w) is tuple and w[0] not in seen:
                seen.add(w[0])
                stack.append(w[0])
    return seen


def _split(t: _Trace, first: set[int]) -> tuple[_Trace, _Trace, tuple]:
    """``t`` as two traces: the nodes in ``first`` and the rest. The rest reads the first's
    outputs as extra leaves, appended after ``t``'s; ``links`` names them in the first.
    A view of leaves the rest reads (a weight's transpose, which the forward's dot takes
    for free) is computed again there rather than returned by the first."""
    head, tail = _Trace(), _Trace()
    head.leaves, head.leaf_avals = t.leaves, t.leaf_avals
    tail.leaves, tail.leaf_avals = list(t.leaves), list(t.leaf_avals)
    moved, link_leaf, links = {}, {}, []  # node -> its index in its part; tail's links
    redone: dict[int, int] = {}  # a head view of leaves -> its copy's index in the tail

    def tail_input(w):
        node = t.nodes[w[0]]
        if node[0].is_view and all(type(v) is int for v in node[4]):
            if w[0] not in redone:
                redone[w[0]] = len(tail.nodes)
                tail.nodes.append(node)
                tail.outs.append([_gone] * len(t.outs[w[0]]))
                tail.out_avals.append(t.out_avals[w[0]])
            return (redone[w[0]], w[1])
        k = link_leaf.get(w)  # a head output: one more tail leaf
        if k is None:
            k = link_leaf[w] = len(t.leaves) + len(links)
            links.append((moved[w[0]], w[1]))
        return k

    for i, node in enumerate(t.nodes):
        part = head if i in first else tail
        wiring = []
        for w in node[4]:
            if type(w) is int:
                wiring.append(w)
            elif part is tail and w[0] in first:
                wiring.append(tail_input(w))
            else:
                wiring.append((moved[w[0]], w[1]))
        moved[i] = len(part.nodes)
        part.nodes.append(node[:4] + (tuple(wiring),))
        part.outs.append(t.outs[i])
        part.out_avals.append(t.out_avals[i])
    return head, tail, tuple(links)


def _gone():
    """A recomputed node's outputs: no tensor holds them (a dead weak reference)."""
    return None


def _run(t: _Trace, keep: tuple = ()) -> list:
    """Run ``t`` as one program: outputs some tensor still references, and ``keep``'s
    (returned, in order)."""
    global _recompiles
    forget_pending_views()
    live = {(i, j) for i, refs in enumerate(t.outs) for j, r in enumerate(refs) if r() is not None}
    needed = tuple(sorted(live.union(keep)))
    outputs = [t.outs[i][j]() for i, j in needed]
    donated = _donatable(t.leaves, [p for p in outputs if p is not None])
    del outputs
    # A node's executable hashes by identity, so the nodes themselves are the trace's key.
    sig = (tuple(t.nodes), tuple(t.leaf_avals), needed, donated, torch.get_default_dtype(),
           jax.config.jax_default_matmul_precision)
    entry = _PROGRAMS.get(sig)
    if entry is None:
        ops = tuple(node[0] for node in t.nodes)
        if ops in _op_sequences:
            _recompiles += 1
        elif len(_op_sequences) < _MAX_SEQUENCES:
            _op_sequences.add(ops)
        _refuse_outputs_larger_than_the_device(t, needed)
        order = _alias_order(t, needed, donated)
        entry = _PROGRAMS[sig] = (_loaded_or_traced(t, order, donated), order)
        if len(_PROGRAMS) > _MAX_PROGRAMS:
            _PROGRAMS.popitem(last=False)
    else:
        _PROGRAMS.move_to_end(sig)
        counters.count("cache_hit", "fused_program")
    prog, order = entry
    counters.count("execute", "fused_program")
    if donated:
        counters.count("execute", "donated_buffers", len(donated))
    results = prog(*t.leaves)
    note_last_program(results)
    for (i, j), value in zip(order, results, strict=False):
        p = t.outs[i][j]()
        if p is not None:
            p.array = value
    if not keep:
        return []
    at = {ij: k for k, ij in enumerate(order)}
    return [results[at[ij]] for ij in keep]


def _refuse_outputs_larger_than_the_device(t: _Trace, needed: tuple) -> None:
    """XLA:CPU fails such a program after dispatch, and a wait on its results never ends
    (strict eager's single op fails at dispatch): raised here, the ops run one by one and the
    one that cannot fit raises, as in strict eager."""
    total = sum(math.prod(a.shape) * a.dtype.itemsize
                for a in (t.out_avals[i][j] for i, j in needed))
    device = _device_bytes()
    if total > device:
        raise torch.OutOfMemoryError(
            f"tpu out of memory: a fused program's results need {total / 2**30:.1f} GiB, the "
            f"device has {device / 2**30:.1f} GiB")


@functools.cache
def _device_bytes() -> int:
    return memory.mem_get_info()[1]


def _alias_order(t: _Trace, needed: tuple, donated: tuple) -> tuple:
    """``needed`` reordered so that each donated leaf's buffer goes to the value that
    replaces it (a parameter's, an optimizer state's update). JAX pairs each output with the
    first unpaired donated input of its shape and dtype; paired otherwise, XLA copies every
    such buffer before the program can overwrite it."""
    successor = {}
    for ij in needed:
        leaf = _replaced_leaf(t, *ij)
        if leaf in donated and leaf not in successor:
            successor[leaf] = ij
    paired, rest = set(successor.values()), {}
    for ij in needed:
        if ij not in paired:
            rest.setdefault(_shape(t.out_avals[ij[0]][ij[1]]), []).append(ij)
    order = []
    for leaf in sorted(donated):
        # An unpaired donated leaf takes any output of its shape (there are enough:
        # ``_donatable`` donates no more leaves of a shape than there are outputs).
        order.append(successor.get(leaf) or rest[_shape(t.leaf_avals[leaf])].pop(0))
    taken = set(order)
    return tuple(order) + tuple(ij for ij in needed if ij not in taken)


def _replaced_leaf(t: _Trace, i: int, j: int) -> int | None:
    """The leaf output ``j`` of node ``i`` most likely updates: followed back through
    inputs of the output's shape, the k-th such output of a node taking the k-th such input
    (a foreach op's lists; ``p.mul_(a).add_(b)`` is two nodes)."""
    while True:
        shape = _shape(t.out_avals[i][j])
        rank = sum(_shape(a) == shape for a in t.out_avals[i][:j])
        same = [w for w in t.nodes[i][4]
                if (_shape(t.leaf_avals[w]) if type(w) is int else
                    _shape(t.out_avals[w[0]][w[1]])) == shape]
        if len(same) <= rank:
            return None
        w = same[rank]
        if type(w) is int:
            return w
        i, j = w


def _shape(aval) -> tuple | type:
    """Shape and dtype of an output's or a leaf's abstract value (a Python number: its type)."""
    if isinstance(aval, type):
        return aval
    if isinstance(aval, tuple):
        return aval[:2]
    return (tuple(aval.shape), aval.dtype)


def _loaded_or_traced(t: _Trace, needed: tuple, donated: tuple):
    """The trace's program: loaded from the store, else traced (and stored when it can be)."""
    key = _program_key(t, needed, donated) if program_store.enabled() else None
    if key is not None:
        try:
            exported = program_store.load_program(key)
        except Exception:  # an entry this jax cannot read back: trace it again
            exported = None
        if exported is not None:
            return program_store.jitted(exported, donated)
    counters.count("compile", "fused_program")
    prog = _program(t.nodes, needed, donated)
    if key is None:
        return prog
    try:
        blob = jax.export.export(prog)(*map(_abstract, t.leaves)).serialize()
    except Exception:
        # Not exportable (a host callback, say; flatbuffers missing), or the trace fails:
        # the plain program runs, and raises the trace's own error if there is one.
        return prog
    program_store.save_program(key, blob)
    # This process compiles the program a later one will load, so that one finds this
    # one's executable in the compile cache.
    return program_store.jitted(jax.export.deserialize(blob), donated)


def _program_key(t: _Trace, needed: tuple, donated: tuple) -> str | None:
    calls = []
    for exe, statics, kw_statics, treedef, wiring in t.nodes:
        text = _call_text(exe, statics, kw_statics, treedef, wiring)
        if text is None:
            return None
        calls.append(text)
    try:
        tail = stable((t.leaf_avals, needed, donated))
    except Unstable:
        return None
    return program_store.key("\n".join(calls), tail)


def _after_optimizer_step(optimizer, args, kwargs) -> None:
    """An optimizer step's end is where a training loop's iterations meet: with a second
    step pending (the loop has not synced since the last), run what was recorded."""
    global _steps_pending
    if torch.compiler.is_compiling():
        return
    _steps_pending += 1
    if _steps_pending >= 2:
        flush()


def enable() -> None:
    global _max_ops, _window, _anchor, _split_forced, _step_hook
    _max_ops = _window = int(config.get("fused_max_ops"))
    _anchor = ()
    _split_forced = bool(config.get("fused_split"))
    execute.set_recorder(record, flush)
    if _step_hook is None:
        _step_hook = register_optimizer_step_post_hook(_after_optimizer_step)
    if not getattr(torch.set_default_dtype, "_torchtpu", False):
        torch.set_default_dtype = _flushing_first(torch.set_default_dtype)


def _flushing_first(set_default_dtype):
    """A change of the default dtype is a sync point: rules read it as they are traced, at
    the flush, and must see the one the ops were recorded under (``tensor([1, 3]) / 3``
    recorded under float64 came out float64 with float32's values)."""
    @functools.wraps(set_default_dtype)
    def set_then(d):
        if execute.recording() and d != torch.get_default_dtype():
            flush()
        set_default_dtype(d)

    set_then._torchtpu = True
    return set_then


def disable() -> None:
    """Compute what is pending, then leave no pending values behind for the strict path."""
    global _step_hook
    flush()
    execute.set_recorder(None)
    if _step_hook is not None:
        _step_hook.remove()
        _step_hook = None
    settle_pending()
