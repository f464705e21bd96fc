"""One torchrun worker: each collective, DDP, FSDP2, tensor parallelism and DTensor on tpu
tensors (strict and fused eager) and on CPU tensors in the same process group; writes what
it saw as JSON into the folder its argument names."""

from __future__ import annotations

import copy
import json
import os
import sys
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed import _functional_collectives as funcol
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
from torch.distributed.tensor import Shard, distribute_tensor
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    SequenceParallel,
    loss_parallel,
    parallelize_module,
)

import torchtpu
import torchtpu.compile  # noqa: F401 (the "tpu" torch.compile backend)


def collectives(device: str, rank: int, world: int) -> dict:
    t = lambda *v: torch.tensor(v, dtype=torch.float32, device=device)  # noqa: E731
    out = {}
    x = t(1.0, 2.0, 3.0) * (rank + 1)
    dist.all_reduce(x)
    out["all_reduce"] = x.tolist()
    x = t(1.0, -2.0) * (rank + 1)
    dist.all_reduce(x, op=dist.ReduceOp.MAX)
    out["all_reduce_max"] = x.tolist()
    gathered = [torch.zeros(2, device=device) for _ in range(world)]
    dist.all_gather(gathered, t(rank, rank * 10))
    out["all_gather"] = [g.tolist() for g in gathered]
    flat = torch.zeros(2 * world, device=device)
    dist.all_gather_into_tensor(flat, t(rank, rank + 0.5))
    out["all_gather_into_tensor"] = flat.tolist()
    part = torch.zeros(2, device=device)
    dist.reduce_scatter_tensor(part, torch.arange(2.0 * world, device=device) * (rank + 1))
    out["reduce_scatter_tensor"] = part.tolist()
    # transposed (strided) inputs and outputs
    flat = torch.zeros(3, 2 * world, device=device).t()
    dist.all_gather_into_tensor(flat, torch.arange(6.0, device=device).view(3, 2).t() + rank)
    out["all_gather_into_tensor_strided"] = flat.tolist()
    part = torch.zeros(3, 2, device=device).t()
    dist.reduce_scatter_tensor(part, torch.arange(6.0 * world, device=device).view(3, -1).t())
    out["reduce_scatter_tensor_strided"] = part.tolist()
    b = t(rank, rank)
    dist.broadcast(b, src=world - 1)
    out["broadcast"] = b.tolist()
    a2a = torch.zeros(world, device=device)
    dist.all_to_all_single(a2a, torch.arange(world, dtype=torch.float32, device=device) + 10 * rank)
    out["all_to_all_single"] = a2a.tolist()
    if rank == 0:
        dist.send(t(7.0, 8.0), dst=1)
    elif rank == 1:
        got = torch.zeros(2, device=device)
        dist.recv(got, src=0)
        out["recv"] = got.tolist()
    # Both ranks post a send and a receive before waiting (a ring step): waited for at once,
    # each send blocked until the other rank's receive, which it never reached.
    got = torch.zeros(2, device=device)
    peer = 1 - rank
    works = dist.batch_isend_irecv([dist.P2POp(dist.isend, t(rank, rank + 10.0), peer),
                                    dist.P2POp(dist.irecv, got, peer)])
    for w in works:
        w.wait()
    out["batch_isend_irecv"] = got.tolist()
    if rank == 0:
        dist.send(t(5.0), dst=1)
    elif rank == 1:
        got = torch.zeros(1, device=device)
        out["recv_from_any"] = [dist.recv(got), got.tolist()]  # the sender's rank, asked
    work = dist.all_reduce(t(1.0), async_op=True)
    work.wait()
    out["work_future"] = [(v.device.type, v.tolist()) for v in work.get_future().value()]
    r = funcol.all_reduce(t(rank, 1.0), "sum", dist.group.WORLD)
    out["functional_all_reduce"] = (r.device.type, r.tolist())
    dist.barrier()
    return out


def _model(device: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(),
                               torch.nn.Linear(8, 2)).to(device)


def _train(model, parameters, device: str, rank: int) -> None:
    opt = torch.optim.AdamW(parameters, lr=0.05)
    torch.manual_seed(rank)  # each rank its own batch
    x = torch.randn(5, 4)
    for _ in range(3):
        opt.zero_grad()
        model(x.to(device)).square().mean().backward()
        opt.step()


def ddp(device: str, rank: int, compiled: bool = False) -> list:
    model = _model(device)
    if rank == 1:  # DDP starts from rank 0's parameters
        with torch.no_grad():
            model[0].weight.add_(1.0)
    # A cuda script's form, tpu:{LOCAL_RANK}: DDP moves each batch there.
    device_ids = [torch.device(device).index] if torch.device(device).index else None
    wrapped = torch.nn.parallel.DistributedDataParallel(model, device_ids=device_ids)
    run = torch.compile(wrapped, backend="tpu") if compiled else wrapped
    _train(run, wrapped.parameters(), device, rank)
    return _parameters(model)


def _parameters(model) -> list:
    """Each parameter's values, whole (a DTensor's gathered), as a flat list."""
    return [(p.full_tensor() if hasattr(p, "full_tensor") else p).detach().cpu().flatten()
            .tolist() for p in model.parameters()]


def fsdp2(device: str, rank: int) -> list:
    mesh = init_device_mesh(device, (dist.get_world_size(),))
    model = _model(device)
    for layer in (model[0], model[2], model):
        fully_shard(layer, mesh=mesh)
    _train(model, model.parameters(), device, rank)
    return _parameters(model)


def tensor_parallel(device: str, rank: int) -> list:
    """Megatron-style column- then row-parallel linears under a replicated one, so ops meet
    the row-parallel output (functional collectives' pending tensor) beside plain tensors.
    Every rank has the same batch."""
    mesh = init_device_mesh(device, (dist.get_world_size(),))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 4),
                                torch.nn.GELU(), torch.nn.Linear(4, 2)).to(device)
    parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    # DTensor and plain parameters in one list: the per-parameter step (on cuda, too, the
    # multi-tensor one refuses the mix)
    opt = torch.optim.AdamW(model.parameters(), lr=0.05, foreach=False)
    x = torch.randn(5, 4, generator=torch.Generator().manual_seed(0)).to(device)
    for _ in range(3):
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
    return _parameters(model)


class _NormedMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(4)
        self.up = torch.nn.Linear(4, 8)
        self.down = torch.nn.Linear(8, 4)
        self.head = torch.nn.Linear(4, 6, bias=False)

    def forward(self, x):
        return self.head(x + self.down(torch.relu(self.up(self.norm(x)))))


def sequence_and_loss_parallel(device: str, rank: int) -> list:
    """LayerNorm over sequence shards, then column/row-parallel linears and a vocabulary-
    parallel head under ``loss_parallel`` (cross entropy over sharded logits), on a 2-D
    (data, tensor) mesh with FSDP2 over the data dimension."""
    mesh = init_device_mesh(device, (1, dist.get_world_size()), mesh_dim_names=("dp", "tp"))
    torch.manual_seed(0)
    model = _NormedMLP().to(device)
    parallelize_module(model, mesh["tp"], {
        "norm": SequenceParallel(),
        "up": ColwiseParallel(input_layouts=Shard(1)),
        "down": RowwiseParallel(output_layouts=Shard(1)),
        "head": ColwiseParallel(input_layouts=Shard(1), use_local_output=False)})
    fully_shard(model, mesh=mesh["dp"])
    opt = torch.optim.AdamW(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(0)
    world = dist.get_world_size()
    x = torch.randn(2, 2 * world, 4, generator=g)[:, 2 * rank:2 * rank + 2].to(device)  # my shard
    target = torch.randint(0, 6, (4 * world,), generator=g).to(device)
    for _ in range(3):
        opt.zero_grad()
        with loss_parallel():
            logits = model(x).redistribute(placements=[Shard(-1)]).flatten(0, 1)
            torch.nn.functional.cross_entropy(logits, target).backward()
        opt.step()
    return _parameters(model)


def pipeline(device: str, rank: int, schedule: str) -> list:
    """A two-stage pipeline (a stage per rank) trained with a torch.distributed.pipelining
    schedule: activations and gradients cross ranks by send/recv into receive buffers that
    require grad."""
    torch.manual_seed(0)
    layers = [torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4), torch.nn.ReLU(),
              torch.nn.Linear(4, 2)]
    mine = torch.nn.Sequential(*(layers[:2] if rank == 0 else layers[2:])).to(device)
    world = dist.get_world_size()
    stage = PipelineStage(mine, rank, world, torch.device(device))
    schedule_class = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}[schedule]
    run = schedule_class(stage, n_microbatches=4,
                         loss_fn=lambda out, target: (out - target).square().mean())
    g = torch.Generator().manual_seed(1)
    x, target = torch.randn(8, 4, generator=g).to(device), torch.randn(8, 2, generator=g)
    opt = torch.optim.SGD(mine.parameters(), lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        if rank == 0:
            run.step(x)
        else:
            run.step(target=target.to(device))
        opt.step()
    return _parameters(mine)


def dtensor(device: str) -> list:
    mesh = init_device_mesh(device, (dist.get_world_size(),))
    torch.manual_seed(0)
    a = torch.randn(4, 6).to(device)
    d = distribute_tensor(a, mesh, [Shard(0)])
    return [d.to_local().device.type, (d * 2).sum(0).full_tensor().cpu().tolist()]


def sync_batch_norm(device: str, rank: int, world: int) -> dict:
    """SyncBatchNorm over ranks holding 2, 3, ... samples against BatchNorm over all of them
    on CPU: [what this rank got, what it should get] per quantity."""
    torch.manual_seed(0)
    sizes = [2 + r for r in range(world)]
    x_all = torch.randn(sum(sizes), 3, 4, 4) * 2 + 1
    dy_all = torch.randn_like(x_all)
    bn = torch.nn.BatchNorm2d(3)
    with torch.no_grad():
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-1, 1)
    sync = torch.nn.SyncBatchNorm.convert_sync_batchnorm(
        torch.nn.Sequential(copy.deepcopy(bn))).to(device)
    x = x_all.clone().requires_grad_()
    expected = bn(x)
    (expected * dy_all).sum().backward()
    mine = slice(sum(sizes[:rank]), sum(sizes[:rank + 1]))
    xl = x_all[mine].to(device).requires_grad_()
    got = sync(xl)
    (got * dy_all[mine].to(device)).sum().backward()
    for p in sync.parameters():
        dist.all_reduce(p.grad)  # each rank's share of the whole batch's gradient
    pairs = {"out": (got, expected[mine]), "input_grad": (xl.grad, x.grad[mine]),
             "weight_grad": (sync[0].weight.grad, bn.weight.grad),
             "bias_grad": (sync[0].bias.grad, bn.bias.grad),
             "running_mean": (sync[0].running_mean, bn.running_mean),
             "running_var": (sync[0].running_var, bn.running_var)}
    return {k: [t.detach().cpu().flatten().tolist() for t in pair] for k, pair in pairs.items()}


def main() -> None:
    dist.init_process_group("tpu", timeout=timedelta(seconds=60))  # a hang fails, soon
    rank, world = dist.get_rank(), dist.get_world_size()
    seen = {}
    for device in ("cpu", f"tpu:{os.environ['LOCAL_RANK']}"):
        kind = device.split(":")[0]
        seen[kind] = {"collectives": collectives(device, rank, world),
                      "ddp": ddp(device, rank), "fsdp2": fsdp2(kind, rank),
                      "tensor_parallel": tensor_parallel(kind, rank),
                      "sequence_and_loss_parallel": sequence_and_loss_parallel(kind, rank),
                      "pipeline_gpipe": pipeline(device, rank, "gpipe"),
                      "pipeline_1f1b": pipeline(device, rank, "1f1b"),
                      "dtensor": dtensor(kind)}
        if kind == "tpu":  # CPU has no SyncBatchNorm (its kernels are CUDA's)
            seen[kind]["sync_batch_norm"] = sync_batch_norm(kind, rank, world)
    with torchtpu.set_eager_mode("fused"):
        seen["tpu_fused"] = {"collectives": collectives("tpu", rank, world),
                             "ddp": ddp("tpu", rank),
                             "sync_batch_norm": sync_batch_norm("tpu", rank, world)}
    seen["tpu_compiled"] = {"ddp": ddp("tpu", rank, compiled=True)}
    dist.destroy_process_group()

    dist.init_process_group()  # no backend named: one is made per device type met
    x = torch.ones(2, device="tpu") * (rank + 1)
    dist.all_reduce(x)
    seen["no_backend_named"] = x.tolist()
    dist.destroy_process_group()
    # A file each: torchrun interleaves its workers' output.
    Path(sys.argv[1], f"rank{rank}.json").write_text(json.dumps(seen))


if __name__ == "__main__":
    main()
