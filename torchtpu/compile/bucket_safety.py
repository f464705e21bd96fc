"""Whether padding a graph's inputs leaves the real part of its outputs unchanged.

A conservative pass over Dynamo's graph before any bucket is used. Every tensor knows its
padded dimensions from its symbolic shape (a size that is exactly a bucketed symbol), the
dimensions that merge a padded one with others (``B * s0`` after ``reshape(-1, C)``), and,
where it is known, the constant its padded part holds (an input's pad value). An op passes
when a real position's result cannot depend on a padded one: elementwise ops, views that keep
the padded dimension whole, matmuls and norms over other dimensions, prefix scans, causal
attention, a loss whose padded targets are its ``ignore_index``. Anything else (a reduction,
softmax, sort or flip along a padded dimension, a padded size used as a number, an in-place
write to a padded input, an op this file does not know) makes the graph run unpadded: one
program per size, never a wrong number.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
from torch import fx


class Unsafe(Exception):
    """Padding would change what this graph computes; the message says where."""


@dataclass(frozen=True)
class _Info:
    padded: frozenset  # dims whose size is a bucketed symbol
    merged: frozenset  # dims whose size mixes a bucketed symbol with others (B * s0)
    fill: object = None  # the padded part's value, where known
    from_input: bool = False  # a graph input or a view of one (writes must reach the caller)


def check(gm: fx.GraphModule, symbols: set, fills: dict[int, object]) -> None:
    """Raise Unsafe unless padding the symbols in ``symbols`` is invisible in ``gm``'s
    outputs. ``fills``: placeholder index -> its pad value."""
    env: dict[fx.Node, object] = {}
    index = 0
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            info = _info_of(node, symbols)
            if isinstance(info, _Info):
                info = _Info(info.padded, info.merged, fills.get(index), True)
            env[node] = info
            index += 1
        elif node.op == "output":
            sizes = [n for n in _nodes(node.args) if env.get(n) == "size"]
            if sizes:
                raise Unsafe(f"{sizes[0].name} returns a padded size as a number")
        elif node.op in ("call_function", "call_method"):
            env[node] = _step(node, env, symbols)
        elif node.op == "get_attr":
            env[node] = _info_of(node, symbols)
        else:  # call_module: whatever it does, it is not looked into
            if _touched(node, env):
                raise Unsafe(f"{node.target} is a module call on padded values")
            env[node] = _info_of(node, symbols)


def _value(node: fx.Node):
    return node.meta.get("example_value", node.meta.get("val"))


def _info_of(node: fx.Node, symbols: set):
    return _info_of_value(_value(node), symbols)


def _info_of_value(v, symbols: set):
    """_Info for a tensor, "size" for a number involving a bucketed symbol, else None."""
    if isinstance(v, torch.Tensor):
        padded, merged = set(), set()
        for d, n in enumerate(v.shape):
            if isinstance(n, torch.SymInt) and n.node.expr.free_symbols & symbols:
                (padded if n.node.expr in symbols else merged).add(d)
        return _Info(frozenset(padded), frozenset(merged))
    if isinstance(v, (torch.SymInt, torch.SymFloat)) and v.node.expr.free_symbols & symbols:
        return "size"
    if isinstance(v, (tuple, list)):
        return tuple(_info_of_value(x, symbols) for x in v)
    return None


def _args(node: fx.Node, env) -> list:
    return list(fx.node.map_arg(tuple(node.args), env.get))


def _argument(node: fx.Node, position: int, name: str, default=None):
    """An argument as passed, by position or by keyword."""
    if name in node.kwargs:
        return node.kwargs[name]
    return node.args[position] if len(node.args) > position else default


def _arg(node: fx.Node, env, position: int, name: str, default=None):
    """An argument's info."""
    a = _argument(node, position, name, default)
    return env.get(a) if isinstance(a, fx.Node) else a


def _arg_value(node: fx.Node, position: int, name: str):
    """An argument's traced value (a fake tensor with symbolic sizes)."""
    a = _argument(node, position, name)
    return _value(a) if isinstance(a, fx.Node) else a


def _nodes(args) -> list[fx.Node]:
    found: list[fx.Node] = []
    fx.node.map_arg(args, found.append)
    return found


def _touched(node: fx.Node, env) -> bool:
    return any(_padded(env.get(n)) for n in _nodes((node.args, node.kwargs)))


def _padded(info) -> bool:
    if isinstance(info, _Info):
        return bool(info.padded or info.merged)
    if isinstance(info, tuple):
        return any(_padded(i) for i in info)
    return info == "size"


def _name(node: fx.Node) -> str:
    t = node.target
    return t if isinstance(t, str) else getattr(t, "__name__", str(t))


# Ops by how they treat positions along a dimension.
_CONVERSIONS = {"float", "double", "half", "bfloat16", "long", "int", "bool", "to", "type",
                "type_as", "contiguous", "clone", "detach", "alias", "requires_grad_",
                "_to_copy"}
_MOVES = {"permute", "transpose", "t", "unsqueeze", "squeeze", "expand", "expand_as",
          "movedim", "swapaxes", "swapdims", "mT", "T"}
_RESHAPES = {"view", "reshape", "flatten", "unflatten", "view_as", "reshape_as"}
_CREATIONS = {"arange", "ones", "zeros", "empty", "rand", "randn", "randint", "ones_like",
              "zeros_like", "empty_like", "rand_like", "randn_like", "new_ones", "new_zeros",
              "new_empty", "tril", "triu", "full", "full_like", "new_full"}
# Position i's result reads positions <= i only.
_SCANS = {"cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"}
# Along their dim, a real position's result may read a padded one (or the op cuts there:
# split, select); for a reduction, the pad value that makes padding neutral.
_REDUCTIONS = {"sum": 0, "nansum": 0, "amax": -math.inf, "max": -math.inf, "amin": math.inf,
               "min": math.inf, "prod": 1, "any": 0, "all": 1, "mean": None, "nanmean": None,
               "var": None, "std": None, "logsumexp": None, "norm": None, "argmax": None,
               "argmin": None, "median": None, "softmax": None, "log_softmax": None,
               "sort": None, "argsort": None, "topk": None, "kthvalue": None, "flip": None,
               "roll": None, "count_nonzero": None, "cat": None, "split": None, "chunk": None,
               "unbind": None, "narrow": None, "select": None, "split_with_sizes": None,
               "std_mean": None, "var_mean": None, "aminmax": None, "mode": None}
_OPERATORS = {"add": "add", "sub": "sub", "mul": "mul", "truediv": "div",
              "floordiv": "floor_divide", "mod": "remainder", "pow": "pow", "neg": "neg",
              "pos": "positive", "abs": "abs", "and_": "bitwise_and", "or_": "bitwise_or",
              "xor": "bitwise_xor", "invert": "bitwise_not", "eq": "eq", "ne": "ne",
              "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}


@functools.cache
def _pointwise(name: str) -> bool:
    packet = getattr(torch.ops.aten, _OPERATORS.get(name, name), None)
    if packet is None or not hasattr(packet, "overloads"):
        return False
    overloads = packet.overloads()
    return bool(overloads) and torch.Tag.pointwise in getattr(packet, overloads[0]).tags


def _step(node: fx.Node, env, symbols):
    name = _name(node)
    out = _info_of(node, symbols)
    args = _args(node, env)
    if not _touched(node, env):
        return out
    if not isinstance(out, (_Info, tuple)) and not any(isinstance(a, _Info) for a in args):
        return out  # arithmetic on sizes: a number, checked where it is used
    where = f"{name} ({node.name})"
    augmented = name.startswith("i") and name[1:] in _OPERATORS  # operator.iadd, x += y
    inplace = augmented or (name.endswith("_") and not name.startswith("_")
                            and name not in _CONVERSIONS)
    self = args[0] if args else None
    if inplace and isinstance(self, _Info) and self.from_input and _padded(self):
        raise Unsafe(f"{where} writes into a padded input (the caller's tensor is not padded)")
    op = name[1:] if augmented else name[:-1] if inplace else name
    if op == "getitem":
        return _getitem(node, args, out, where)
    if op in ("size", "sym_size", "dim", "numel", "sym_numel", "stride"):
        return out
    _refuse_sizes_as_numbers(node, env, op, where)
    if op in _CONVERSIONS:
        return _keep(out, self, fill=True)
    if op == "dropout":
        return _keep(out, self)
    if op in _MOVES:
        return _keep(out, self, fill=True)
    if op in _RESHAPES:
        _check_reshape(node, where)
        return _keep(out, self, fill=True)
    if op in _CREATIONS:
        return out
    if op in _SCANS or op == "stack":
        return out
    if op in _REDUCTIONS:
        _check_reduction(node, op, args, where)
        return _keep(out, self, fill=True) \
            if op in ("split", "chunk", "unbind", "select", "narrow") else out
    if op in ("linear", "matmul", "mm", "bmm", "addmm", "baddbmm"):
        _check_contraction(node, op, args, where)
        return out
    if op in ("layer_norm", "rms_norm"):
        shape = node.args[1] if len(node.args) > 1 else node.kwargs["normalized_shape"]
        n = len(shape) if isinstance(shape, (tuple, list)) else 1
        ndim = _value(node.args[0]).dim()
        _refuse_dims(args[0], range(ndim - n, ndim), where, "normalizes over")
        return out
    if op == "embedding":
        if _padded(args[1]):
            raise Unsafe(f"{where}: a padded embedding table")
        return out
    if op == "scaled_dot_product_attention":
        _check_attention(node, env, where)
        return out
    if op in ("cross_entropy", "nll_loss"):
        _check_loss(node, env, where)
        return out
    if op in ("where", "masked_fill") or _pointwise(op):
        return out
    raise Unsafe(f"{where} is not known to ignore padded positions")


def _keep(out, src, fill=False):
    """``out``'s padded dims, with ``src``'s input-ness (and its fill, for a view or a
    conversion: the padded part holds the same value)."""
    if not isinstance(out, _Info) or not isinstance(src, _Info):
        return out
    return _Info(out.padded, out.merged, src.fill if fill else None, src.from_input)


def _refuse_sizes_as_numbers(node, env, op, where):
    # A size passed to a view or factory shapes the result; anywhere else it is a number,
    # and padding would change it.
    if op in _RESHAPES or op in _MOVES or op in _CREATIONS - {"full", "full_like", "new_full",
                                                                "arange"}:
        return
    values = list(node.args) + list(node.kwargs.values())
    if op in ("full", "new_full", "full_like"):
        values = [node.args[-1] if node.args else None, node.kwargs.get("fill_value")]
    if op == "arange":  # its end is a size; a start or step from one changes every value
        values = [node.args[0], *node.args[2:]] if len(node.args) > 1 else []
        values += [node.kwargs.get("start"), node.kwargs.get("step")]
    if any(env.get(n) == "size" for n in _nodes(values)):
        raise Unsafe(f"{where} uses a padded size as a number")


def _dims(arg, ndim: int) -> list[int]:
    if arg is None:
        return list(range(ndim))
    dims = arg if isinstance(arg, (tuple, list)) else [arg]
    return [d % max(ndim, 1) for d in dims if isinstance(d, int)]


def _refuse_dims(info, dims, where, verb, fill_ok=None):
    if not isinstance(info, _Info):
        return
    bad = (info.padded | info.merged) & set(dims)
    if bad and not (fill_ok is not None and info.fill is not None and info.fill == fill_ok
                    and not info.merged & set(dims)):
        raise Unsafe(f"{where} {verb} a padded dimension")


def _check_reduction(node, op, args, where):
    x = args[0]
    v = _value(node.args[0]) if isinstance(node.args[0], fx.Node) else None
    if not isinstance(x, _Info) or not isinstance(v, torch.Tensor):
        if op == "cat":  # a list of tensors
            dim = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else 0)
            for info, t in zip(args[0], [_value(a) for a in node.args[0]], strict=True):
                if isinstance(t, torch.Tensor):
                    _refuse_dims(info, _dims(dim, t.dim()), where, "concatenates along")
            return
        raise Unsafe(f"{where} on padded values")
    position = 2 if op in ("split", "chunk", "roll", "topk", "kthvalue", "split_with_sizes",
                           "norm") else 1
    dim = node.kwargs.get("dims" if op in ("flip", "roll") else "dim",
                          node.args[position] if len(node.args) > position else None)
    if dim is None and op in ("split", "chunk", "unbind", "narrow", "select",
                              "split_with_sizes"):
        dim = 0
    if dim is None and op in ("topk", "kthvalue", "sort", "argsort", "mode"):
        dim = -1
    _refuse_dims(x, _dims(dim, v.dim()), where, "reduces or reorders along",
                 fill_ok=_REDUCTIONS[op])


def _check_contraction(node, op, args, where):
    tensors = [(a, _value(n)) for a, n in zip(args, node.args, strict=False)
               if isinstance(a, _Info) and isinstance(n, fx.Node)]
    if op in ("addmm", "baddbmm"):
        tensors = tensors[1:]
    (a, va), (b, vb) = tensors[0], tensors[1]
    _refuse_dims(a, [va.dim() - 1], where, "contracts")
    if op == "linear":
        _refuse_dims(b, range(vb.dim()), where, "has a padded weight in")
    else:
        _refuse_dims(b, [max(vb.dim() - 2, 0)], where, "contracts")
    if len(tensors) > 2 and op == "linear":
        _refuse_dims(tensors[2][0], range(tensors[2][1].dim()), where, "has a padded bias in")


def _check_attention(node, env, where):
    q, k, v = (_arg(node, env, i, n) for i, n in enumerate(("query", "key", "value")))
    vq, vk = _arg_value(node, 0, "query"), _arg_value(node, 1, "key")
    for t in (q, k, v):
        _refuse_dims(t, [vq.dim() - 1], where, "contracts")
    keys = vk.dim() - 2
    if not any(isinstance(t, _Info) and keys in t.padded | t.merged for t in (k, v)):
        return  # keys are not padded: a padded query reads only real keys
    mask = _arg(node, env, 3, "attn_mask")
    causal = _arg(node, env, 5, "is_causal", False)
    queries = vq.dim() - 2
    if causal and mask is None and isinstance(q, _Info) and queries in q.padded \
            and _same(vq.shape[queries], vk.shape[keys]):
        return  # a real query sees keys up to its own position only
    if not causal and isinstance(mask, _Info) and mask.fill is not None:
        masking = False if _arg_value(node, 3, "attn_mask").dtype == torch.bool else -math.inf
        if mask.fill == masking and type(mask.fill) is type(masking):
            return  # the mask's pad value masks the padded keys out
    raise Unsafe(f"{where} attends to padded keys (use is_causal=True, or pass a mask "
                 f"padded with False or -inf)")


def _check_loss(node, env, where):
    x, target = _arg(node, env, 0, "input"), _arg(node, env, 1, "target")
    ignore = _arg(node, env, 4, "ignore_index", -100)
    reduction = _arg(node, env, 6, "reduction", "mean")
    if isinstance(x, _Info) and 1 in x.padded | x.merged and _arg_value(node, 0, "input").dim() > 1:
        raise Unsafe(f"{where}: padded classes")
    if not _padded(target):
        raise Unsafe(f"{where} reduces padded inputs with real targets")
    if target.fill != ignore:
        raise Unsafe(f"{where}: targets padded with {target.fill}, not ignore_index={ignore} "
                     f"(name the targets in the buckets' 'pad' option)")
    if reduction not in ("mean", "sum", "none"):
        raise Unsafe(f"{where}: reduction {reduction!r}")


def _check_reshape(node, where):
    src, dst = _value(node.args[0]), _value(node)
    if not isinstance(src, torch.Tensor) or not isinstance(dst, torch.Tensor):
        raise Unsafe(f"{where} on padded values")
    # A padded (or merged) dimension survives a reshape when what lies inside it (the sizes
    # after it) is the same before and after: it is then split from or merged with the
    # dimensions before it only.
    for d, n in enumerate(src.shape):
        if not _symbolic(n):
            continue
        inner = math.prod(src.shape[d + 1:])
        ok = any(_symbolic(m) and _same(math.prod(dst.shape[e + 1:]), inner)
                 and n.node.expr.free_symbols <= m.node.expr.free_symbols
                 for e, m in enumerate(dst.shape))
        if not ok:
            raise Unsafe(f"{where} mixes a padded dimension with the ones after it")


def _symbolic(n) -> bool:
    return isinstance(n, torch.SymInt) and bool(n.node.expr.free_symbols)


def _same(a, b) -> bool:
    expr = lambda x: x.node.expr if isinstance(x, torch.SymInt) else x  # noqa: E731
    try:
        return bool((expr(a) - expr(b)) == 0) or expr(a) == expr(b)
    except TypeError:
        return False


def _getitem(node, args, out, where):
    src = args[0]
    if isinstance(src, tuple):  # an element of a split, a max's (values, indices)
        i = node.args[1]
        return src[i] if isinstance(i, int) and -len(src) <= i < len(src) else out
    if not isinstance(src, _Info):
        return out
    index = node.args[1] if isinstance(node.args[1], tuple) else (node.args[1],)
    dim, ndim = 0, _value(node.args[0]).dim()
    n_real = sum(1 for i in index if i is not None and i is not Ellipsis)
    for i in index:
        if i is Ellipsis:
            dim += ndim - n_real
            continue
        if i is None:
            continue
        if dim in src.padded | src.merged and not _reads_from_start(i):
            raise Unsafe(f"{where} indexes a padded dimension from its end or by a tensor")
        dim += 1
    return _keep(out, src, fill=True)


def _reads_from_start(i) -> bool:
    if isinstance(i, slice):
        return (i.stop is None and i.step in (None, 1)
                and (i.start is None or isinstance(i.start, int) and i.start >= 0))
    return isinstance(i, int) and i >= 0

