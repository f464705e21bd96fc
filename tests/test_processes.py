"""tpu in other processes: forked children refuse it, spawned ones receive tensors."""

from __future__ import annotations

import pytest
import torch
from conftest import assert_same


def test_a_forked_child_exits_and_refuses_what_fused_eager_recorded():
    # The child has the parent's XLA clients but not their threads: destroying them at exit
    # crashed (SIGSEGV) or hung, and computing the parent's recorded ops hung.
    import subprocess
    import sys

    script = """
import os, sys, torch, torchtpu
torchtpu.set_eager_mode("fused")
x = torch.ones(2, device="tpu") + 1
pid = os.fork()
if pid == 0:
    try:
        torch.tpu.synchronize()
    except RuntimeError as e:
        sys.exit(3 if "forked" in str(e) else 4)
    sys.exit(5)
print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), x.tolist())
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.split("\n")[0] == "3 [2.0, 2.0]"


def test_tpu_tensors_passed_to_a_spawned_process(tmp_path):
    # Pickled as a CPU copy shared through a file descriptor, gone (the copy freed) by the
    # time the spawned child read it: "unable to resize file", and a parent waiting forever.
    import subprocess
    import sys

    script = """
import torch, torchtpu, torch.multiprocessing as mp
def child(rank, t, p, q):
    q.put((t.device.type, t.dtype, (t * 2).cpu().tolist(), isinstance(p, torch.nn.Parameter),
           p.device.type))
if __name__ == "__main__":
    q = mp.get_context("spawn").Queue()
    t = torch.arange(4.0).to("tpu").bfloat16()
    mp.spawn(child, args=(t[1:], torch.nn.Parameter(torch.ones(2, device="tpu")), q))
    print(q.get(timeout=60))
"""
    path = tmp_path / "spawns.py"  # a spawned child imports its function from the file
    path.write_text(script)
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                         timeout=300, check=True)
    assert out.stdout.strip() == "('tpu', torch.bfloat16, [2.0, 4.0, 6.0], True, 'tpu')"


class _Rows(torch.utils.data.Dataset):
    def __init__(self, device):
        self.device = device

    def __len__(self):
        return 8

    def __getitem__(self, i):
        return torch.full((3,), float(i), device=self.device)


def test_dataloader_workers_fork_and_a_worker_refuses_tpu():
    # A worker is a forked child: XLA's runtime does not survive the fork. Using tpu there
    # raises (as cuda does) instead of hanging, so JAX's warning at each fork is not shown.
    torch.ones(1, device="tpu").add(1).cpu()  # the runtime is up before the workers fork
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        batches = [b.to("tpu") for b in torch.utils.data.DataLoader(
            _Rows("cpu"), batch_size=4, num_workers=2)]
    assert_same(torch.cat(batches), torch.arange(8.0).repeat_interleave(3).view(8, 3))
    with pytest.raises(RuntimeError, match="cannot be used in a forked subprocess"):
        list(torch.utils.data.DataLoader(_Rows("tpu"), batch_size=4, num_workers=1))


def test_a_tpu_tensor_sent_to_another_process_warns_it_is_a_copy():
    # Hogwild-style code (model.share_memory(), children stepping it) would run and train
    # nothing: cuda's tensors are shared between processes, tpu's are copied.
    import pickle
    from multiprocessing.reduction import ForkingPickler

    t = torch.ones(3, device="tpu")
    with pytest.warns(UserWarning, match="arrives as a copy"):
        data = ForkingPickler.dumps(t)
    assert_same(pickle.loads(data), t)
