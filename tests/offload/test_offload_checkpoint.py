"""Checkpoints resume bit-identically, survive a kill mid-save, and export to HF."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from offload_testlib import make_steps, tiny_hf_llama
from safetensors.torch import load_file

from torchtpu.offload import checkpoint
from torchtpu.offload.config import OffloadConfig
from torchtpu.offload.engine import OffloadEngine

CFG = OffloadConfig(lr=1e-2, weight_decay=0.1, max_grad_norm=1.0)


def _engine(seed: int = 0) -> OffloadEngine:
    return OffloadEngine(tiny_hf_llama(seed=seed), "cpu", CFG, batch=2, seq=16, micro_batches=2)


def test_resume_is_bit_identical(tmp_path):
    steps = make_steps(5, 2)
    a = _engine()
    for mbs in steps[:3]:
        a.train_step(mbs)
    checkpoint.save(a, tmp_path / "ck.safetensors")
    losses_a = [a.train_step(mbs).loss for mbs in steps[3:]]
    a.synchronize()

    b = _engine(seed=123)  # different init: everything must come from the checkpoint
    checkpoint.load(b, tmp_path / "ck.safetensors")
    assert b.step_count == 3 and b.blocks[0].step == 3
    losses_b = [b.train_step(mbs).loss for mbs in steps[3:]]
    b.synchronize()
    assert losses_a == losses_b
    for ga, gb in zip([a.resident, *a.blocks], [b.resident, *b.blocks], strict=True):
        assert torch.equal(ga.weights, gb.weights)
        assert torch.equal(ga.exp_avg_sq, gb.exp_avg_sq)
    # plain safetensors, readable without us
    assert "blocks.0.exp_avg" in load_file(tmp_path / "ck.safetensors")


def test_failed_save_leaves_previous_checkpoint(tmp_path, monkeypatch):
    eng = _engine()
    eng.train_step(make_steps(1, 2)[0])
    path = tmp_path / "ck.safetensors"
    checkpoint.save(eng, path)
    old = path.read_bytes()
    eng.train_step(make_steps(1, 2, seed=5)[0])

    written = []

    def dying_write(f, data):
        if sum(written) > 4096:
            raise KeyboardInterrupt("killed mid-save")
        written.append(len(data))
        f.write(data)

    monkeypatch.setattr(checkpoint, "_write_bytes", dying_write)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.save(eng, path)
    assert path.read_bytes() == old
    assert list(tmp_path.iterdir()) == [path]  # the partial file was removed
    fresh = _engine(seed=7)
    checkpoint.load(fresh, path)
    assert fresh.step_count == 1


def test_save_killed_in_subprocess_leaves_previous_checkpoint(tmp_path):
    tests_dir = Path(__file__).parent
    script = textwrap.dedent(f"""
        import os, sys
        sys.path[:0] = [{str(tests_dir)!r}, {str(Path.cwd())!r}]
        from offload_testlib import make_steps, tiny_hf_llama
        from torchtpu.offload import checkpoint
        from torchtpu.offload.config import OffloadConfig
        from torchtpu.offload.engine import OffloadEngine
        eng = OffloadEngine(tiny_hf_llama(), "cpu", OffloadConfig(), batch=2, seq=16)
        eng.train_step(make_steps(1, 1)[0])
        path = {str(tmp_path / "ck.safetensors")!r}
        checkpoint.save(eng, path)
        eng.train_step(make_steps(1, 1, seed=9)[0])
        n = [0]
        def write(f, data):
            n[0] += 1
            if n[0] == 4:
                f.flush()
                os._exit(9)  # as abrupt as SIGKILL: no cleanup, no finally
            f.write(data)
        checkpoint._write_bytes = write
        checkpoint.save(eng, path)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert proc.returncode == 9, proc.stderr.decode()[-2000:]
    leftovers = [p.name for p in tmp_path.iterdir()]
    assert any(".tmp-" in n for n in leftovers)  # the kill really interrupted a write
    eng = OffloadEngine(tiny_hf_llama(seed=3), "cpu", OffloadConfig(), batch=2, seq=16)
    checkpoint.load(eng, tmp_path / "ck.safetensors")
    assert eng.step_count == 1
    checkpoint.save(eng, tmp_path / "ck.safetensors")  # the next save clears the debris
    assert [p.name for p in tmp_path.iterdir()] == ["ck.safetensors"]


def test_export_hf_loads_in_transformers(tmp_path):
    from transformers import LlamaForCausalLM

    eng = _engine()
    eng.train_step(make_steps(1, 2)[0])
    out = checkpoint.export_hf(eng, tmp_path / "hf")
    loaded = LlamaForCausalLM.from_pretrained(out)
    ours = eng.adapter.model.state_dict()
    theirs = loaded.state_dict()
    assert ours.keys() == theirs.keys()
    for k in ours:
        assert torch.equal(ours[k], theirs[k]), k
    assert not torch.equal(ours["model.layers.0.mlp.up_proj.weight"],
                           tiny_hf_llama().state_dict()["model.layers.0.mlp.up_proj.weight"])


def test_export_our_llama_loads_with_models_checkpoint(tmp_path):
    from torchtpu.models.checkpoint import load_pretrained
    from torchtpu.models.llama import Llama, LlamaConfig

    torch.manual_seed(0)
    model = Llama(LlamaConfig.tiny(n_layers=3, vocab_size=128, tie_word_embeddings=True))
    eng = OffloadEngine(model, "cpu", CFG, batch=2, seq=16)
    eng.train_step(make_steps(1, 1)[0])
    out = checkpoint.export_hf(eng, tmp_path / "hf")
    loaded = load_pretrained(out)
    for k, v in model.state_dict().items():
        assert torch.equal(v, loaded.state_dict()[k]), k
