"""PyTorch's collectives on tpu tensors, run by the process group's CPU backend.

A collective reaches torchtpu as a dispatcher op (``c10d::allreduce_`` for
``dist.all_reduce``, ``_c10d_functional::all_reduce`` for DTensor's and FSDP2's functional
form) holding tpu tensors. Each runs on host copies of them through the group's CPU backend
(gloo), waits, and writes what the collective wrote back into the tpu tensors; the ``Work``
it returns is complete, its future holding the tpu tensors (DDP's reducer reads them there).
Collectives are therefore synchronous (sends and receives complete when waited for, as
gloo's), and every byte crosses the host: correct on any platform, fast on none. XLA's own
collectives (DESIGN.md, Scaling out) would replace this.
"""

from __future__ import annotations

from datetime import timedelta

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import Work, _create_work_from_future, _resolve_process_group
from torch.utils._pytree import tree_leaves, tree_map

from ..tensor import TpuTensor

_CPU = torch.device("cpu")
# Waited for when the caller waits: two ranks that each post a send and a receive before
# waiting (batch_isend_irecv, a ring exchange) would deadlock if each op waited at once.
_POINT_TO_POINT = {"send", "recv_", "recv_any_source_"}
# c10d's ops write their first argument (the tensors reduced, gathered into, received),
# except these; their schemas do not say so.
_WRITING_NOTHING = {"send", "barrier", "monitored_barrier_", "check_for_nan"}
# Gloo gathers into (and scatters from) a tensor's first dimension only; NCCL, which
# SyncBatchNorm's all_gather_single into a (1, world * n) tensor expects, takes any shape
# holding world times the input's elements. Both run here on flat views.
_FLAT = {"_allgather_base_", "_reduce_scatter_base_"}


def _ops(namespace: str) -> list:
    ops = []
    for qualified in torch._C._dispatch_get_all_op_names():
        space, _, name = qualified.partition("::")
        if space == namespace:
            name, _, overload = name.partition(".")
            ops.append(getattr(getattr(getattr(torch.ops, space), name), overload or "default"))
    return ops


def handlers() -> dict:
    """Eager handlers for every c10d and functional-collective op, by op."""
    table = {}
    for op in _ops("c10d"):
        name = op._schema.name.split("::")[1]
        written = () if name in _WRITING_NOTHING else (0,)
        if name in _POINT_TO_POINT:
            table[op] = _point_to_point(op, written)
        else:
            table[op] = _collective(op, written, flat=name in _FLAT)
    for op in _ops("_c10d_functional"):
        if op._schema.name.endswith("::_wrap_tensor_autograd"):
            # Not a collective: a Python op wrapping a result as pending (an
            # AsyncCollectiveTensor), as on cuda. Only listed when its module was imported
            # before torchtpu, so without this the import order chose the behaviour.
            continue
        if op._schema.name.endswith("::wait_tensor"):
            table[op] = lambda args, kwargs: args[0]  # already waited for, below
        else:
            written = tuple(a.name for a in op._schema.arguments
                            if a.alias_info is not None and a.alias_info.is_write)
            table[op] = _functional(op, written)
    return table


class _OnHost:
    """Host copies of the tpu tensors among an op's arguments, and the way back."""

    def __init__(self):
        self.device_of: dict[int, TpuTensor] = {}

    def copy(self, a):
        if type(a) is not TpuTensor:
            return a
        # Contiguous: gloo reads a tensor's memory from its data pointer on (a strided
        # view's elements would be others), and the flat ops view it whole.
        host = a.cpu().contiguous()
        self.device_of[id(host)] = a
        return host

    def write_back(self, written) -> None:
        # A raw write, as a backend's into device memory, outside autograd: a receive
        # buffer may be a leaf that requires grad (a pipeline stage's input), and the
        # write may finish later, at Work.wait(), with grad mode on.
        with torch.no_grad():
            for host in tree_leaves(written):
                device = self.device_of.get(id(host))
                if device is not None:
                    device.copy_(host)

    def flattened(self, host: torch.Tensor) -> torch.Tensor:
        """A flat view of a host copy, standing for the same tpu tensor."""
        flat = host.view(-1)
        if id(host) in self.device_of:
            self.device_of[id(flat)] = self.device_of[id(host)]
        return flat

    def to_device(self, o):
        """A result as a tpu tensor: the one it was copied from, or a new one."""
        if not isinstance(o, torch.Tensor):
            return o
        device = self.device_of.get(id(o))
        return device if device is not None else o.to("tpu")


def _with_a_cpu_backend(group) -> None:
    """A group created without a backend named (``init_process_group()``) makes one lazily
    for each device type it meets: for tpu tensors, the "tpu" backend. The host copies run
    on that one too; gloo's own, if the group has it, serves them already."""
    group = dist.ProcessGroup.unbox(group) if isinstance(group, torch.ScriptObject) else group
    try:
        group._get_backend(_CPU)
    except RuntimeError:
        group._register_backend(_CPU, dist.ProcessGroup.BackendType.GLOO,
                                group._get_backend(torch.device("tpu")))


def _is_group(o) -> bool:
    return isinstance(o, torch.ScriptObject) and "ProcessGroup" in str(o._type())


def _is_work(o) -> bool:
    return isinstance(o, torch.ScriptObject) and "Work" in str(o._type())


def _on_host(args) -> tuple[_OnHost, list]:
    """A c10d op's arguments with host copies of its tpu tensors, its group able to run them."""
    for group in filter(_is_group, args):
        _with_a_cpu_backend(group)
    host = _OnHost()
    return host, [tree_map(host.copy, a) for a in args]


def _collective(op, written: tuple[int, ...], flat: bool = False):
    def handler(args, kwargs):
        host, args = _on_host(args)
        flat_args = [host.flattened(a) for a in args[:2]] + args[2:] if flat else args
        out = op(*flat_args, **kwargs)
        for work in filter(_is_work, tree_leaves(out)):
            work.wait()  # raises what the collective raised
        for i in written:
            host.write_back(args[i])
        out = tree_map(host.to_device, out)  # c10d's results are its arguments
        done = torch.futures.Future()
        done.set_result([t for t in tree_leaves(out) if isinstance(t, torch.Tensor)])
        work = _create_work_from_future(done).boxed()
        return tree_map(lambda o: work if _is_work(o) else o, out)

    return handler


class _InFlight(Work):
    """A send or receive running on host copies: waiting for it (or finding it completed)
    writes what it received back into the tpu tensors, once."""

    def __init__(self, host_work: Work, write_back) -> None:
        super().__init__()
        self._host_work, self._write_back = host_work, write_back
        # Held until finished: once only C++ holds it, its Python methods are gone and the
        # base class's wait never returns.
        _IN_FLIGHT.add(self)

    def _finish(self) -> None:
        if self._write_back is not None:
            write_back, self._write_back = self._write_back, None
            write_back()
            _IN_FLIGHT.discard(self)

    def wait(self, timeout: timedelta = timedelta(0)) -> bool:
        done = self._host_work.wait(timeout)  # raises what the op raised
        self._finish()
        return done

    def is_completed(self) -> bool:
        if not self._host_work.is_completed():
            return False
        self._finish()
        return True

    def is_success(self) -> bool:
        return self._host_work.is_success()

    def exception(self):
        return self._host_work.exception()

    def _source_rank(self) -> int:  # dist.recv(src=None) asks whom it received from
        return self._host_work._source_rank()

    def source_rank(self) -> int:
        return self._host_work.source_rank()

    def get_future(self) -> torch.futures.Future:
        self.wait()
        done = torch.futures.Future()
        done.set_result(None)
        return done


_IN_FLIGHT: set[_InFlight] = set()


def _point_to_point(op, written: tuple[int, ...]):
    def handler(args, kwargs):
        host, args = _on_host(args)  # kept alive by the closure below
        host_work = Work.unbox(op(*args, **kwargs))

        def write_back():
            for i in written:
                host.write_back(args[i])

        return _InFlight(host_work, write_back).boxed()

    return handler


def _functional(op, written: tuple[str, ...]):
    wait = torch.ops._c10d_functional.wait_tensor.default
    names = [a.name for a in op._schema.arguments]
    at = names.index("group_name") if "group_name" in names else None

    def handler(args, kwargs):
        group = args[at] if at is not None and at < len(args) else kwargs.get("group_name")
        if group is not None:
            _with_a_cpu_backend(_resolve_process_group(group))
        host = _OnHost()
        args, kwargs = tree_map(host.copy, list(args)), tree_map(host.copy, kwargs)
        out = op(*args, **kwargs)
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                wait(t)
        for name in written:
            i = names.index(name)
            host.write_back(kwargs[name] if name in kwargs else args[i])
        return tree_map(host.to_device, out)

    return handler
