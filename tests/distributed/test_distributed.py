"""torch.distributed on tpu: two torchrun workers on this machine, each running the same
collectives, DDP (eager and compiled), FSDP2, tensor parallelism and DTensor on CPU tensors
(gloo) and on tpu tensors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

# One xdist worker takes the module, so the two torchrun workers behind `seen` run once.
pytestmark = pytest.mark.xdist_group("distributed")

WORKER = Path(__file__).with_name("collectives_worker.py")
ROOT = Path(__file__).resolve().parents[2]


def _torchrun(script: Path, *args: str) -> None:
    """Two workers of ``script`` on this machine."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         str(script), *args], capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-4000:]


@pytest.fixture(scope="module")
def seen(tmp_path_factory) -> dict:
    """Each rank's results, as its worker wrote them."""
    folder = tmp_path_factory.mktemp("ranks")
    _torchrun(WORKER, str(folder))
    return {int(f.stem[4:]): json.loads(f.read_text()) for f in folder.glob("rank*.json")}


def test_both_workers_ran(seen):
    assert sorted(seen) == [0, 1]


@pytest.mark.parametrize("mode", ["tpu", "tpu_fused"])
def test_collectives_give_what_gloo_gives_on_cpu(seen, mode):
    for rank in (0, 1):
        cpu, tpu = dict(seen[rank]["cpu"]["collectives"]), dict(seen[rank][mode]["collectives"])
        assert tpu.pop("work_future") == [["tpu", [2.0]]]  # the future holds tpu tensors
        assert tpu.pop("functional_all_reduce") == ["tpu", [1.0, 2.0]]
        cpu.pop("work_future"), cpu.pop("functional_all_reduce")
        assert tpu == cpu
    assert seen[0]["tpu"]["collectives"]["all_reduce"] == [3.0, 6.0, 9.0]
    assert seen[1]["tpu"]["collectives"]["recv"] == [7.0, 8.0]
    assert seen[1][mode]["collectives"]["recv_from_any"] == [0, [5.0]]
    assert seen[0][mode]["collectives"]["batch_isend_irecv"] == [1.0, 11.0]
    assert seen[0]["tpu"]["collectives"]["reduce_scatter_tensor"] == [0.0, 3.0]


@pytest.mark.parametrize("mode, wrapper", [("tpu", "ddp"), ("tpu_fused", "ddp"),
                                           ("tpu_compiled", "ddp"), ("tpu", "fsdp2"),
                                           ("tpu", "tensor_parallel"),
                                           ("tpu", "sequence_and_loss_parallel")])
def test_data_parallel_training_matches_cpu(seen, mode, wrapper):
    for rank in (0, 1):
        for got, expected in zip(seen[rank][mode][wrapper], seen[rank]["cpu"][wrapper],
                                 strict=True):
            torch.testing.assert_close(torch.tensor(got), torch.tensor(expected),
                                       rtol=1e-5, atol=1e-6)
    # every rank ends with the same parameters (DDP broadcast rank 0's at the start)
    assert seen[0][mode][wrapper] == seen[1][mode][wrapper]


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_pipeline_schedules_train_each_stage_as_on_cpu(seen, schedule):
    for rank in (0, 1):  # rank r holds stage r
        got, expected = seen[rank]["tpu"][f"pipeline_{schedule}"], seen[rank]["cpu"][
            f"pipeline_{schedule}"]
        assert len(got) == len(expected) == 2 * (rank + 1)  # stage 0: one linear, 1: two
        for g, e in zip(got, expected, strict=True):
            torch.testing.assert_close(torch.tensor(g), torch.tensor(e), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["tpu", "tpu_fused"])
def test_sync_batch_norm_normalises_over_every_ranks_batch(seen, mode):
    # Ranks hold 2 and 3 samples: statistics are weighted by count, as BatchNorm over all 5.
    for rank in (0, 1):
        for name, (got, expected) in seen[rank][mode]["sync_batch_norm"].items():
            torch.testing.assert_close(torch.tensor(got), torch.tensor(expected), rtol=1e-5,
                                       atol=1e-5, msg=lambda m, name=name: f"{name}: {m}")


def test_dtensor_shards_live_on_tpu(seen):
    for rank in (0, 1):
        assert seen[rank]["tpu"]["dtensor"][0] == "tpu"
        torch.testing.assert_close(torch.tensor(seen[rank]["tpu"]["dtensor"][1]),
                                   torch.tensor(seen[rank]["cpu"]["dtensor"][1]))


def test_a_group_without_a_backend_named_reduces_tpu_tensors(seen):
    assert seen[0]["no_backend_named"] == seen[1]["no_backend_named"] == [3.0, 3.0]


def test_the_hugging_face_trainer_runs_ranks_data_parallel(tmp_path):
    # accelerate knew no distributed setup for tpu: each rank trained alone (NOT_PARALLEL).
    runs = {}
    for device in ("cpu", "tpu"):
        _torchrun(WORKER.with_name("trainer_worker.py"), device, str(tmp_path / device))
        runs[device] = json.loads((tmp_path / device).read_text())
    assert runs["tpu"]["parallel_mode"] == "ParallelMode.DISTRIBUTED"
    assert runs["tpu"]["device"] == "tpu" and len(runs["tpu"]["losses"]) == 3
    assert runs["tpu"]["losses"] == pytest.approx(runs["cpu"]["losses"], rel=1e-5)


def test_ddp_refuses_the_unused_parameter_search_on_tpu_clearly():
    # Its reducer needs pinned host memory, which a Python backend cannot give: PyTorch
    # failed at the first backward with an error about PrivateUse1HooksInterface.
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("tpu", store=dist.HashStore(), rank=0, world_size=1)
    try:
        for option in ("find_unused_parameters", "static_graph"):
            with pytest.raises(RuntimeError, match=f"torchtpu: DistributedDataParallel.{option}"):
                DDP(torch.nn.Linear(2, 2).to("tpu"), **{option: True})
        DDP(torch.nn.Linear(2, 2), find_unused_parameters=True)  # CPU's is PyTorch's own
        layer = torch.nn.Linear(2, 2).to("tpu")
        DDP(layer)(torch.ones(1, 2, device="tpu")).sum().backward()
        assert layer.weight.grad.tolist() == [[1.0, 1.0], [1.0, 1.0]]
    finally:
        dist.destroy_process_group()

