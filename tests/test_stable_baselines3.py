"""stable-baselines3 with ``device="tpu"``: the deterministic parts (policy forward, one
``train()`` on the same buffer, save/load across devices) match the same model on CPU."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

pytest.importorskip("gymnasium")
sb3 = pytest.importorskip("stable_baselines3")

from conftest import assert_same  # noqa: E402

# sb3 warns that MLP policies run best on CPU for any non-CPU device
pytestmark = pytest.mark.filterwarnings("ignore:You are trying to run")


def _pair(cls, env_id, **kwargs):
    """The same model on CPU and on tpu: same seed, the CPU weights copied over."""
    cpu = cls("MlpPolicy", env_id, device="cpu", seed=0, **kwargs)
    tpu = cls("MlpPolicy", env_id, device="tpu", seed=0, **kwargs)
    tpu.policy.load_state_dict(cpu.policy.state_dict())
    return cpu, tpu


def _weights(model):
    return [v.detach().cpu() for v in model.policy.state_dict().values()]


def test_ppo_policy_forward_matches_cpu():
    cpu, tpu = _pair(sb3.PPO, "CartPole-v1", n_steps=16, batch_size=16)
    obs = np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32)
    actions = torch.tensor([0, 1, 1, 0, 1, 0, 0, 1])
    out = []
    for m in (cpu, tpu):
        o = torch.as_tensor(obs, device=m.device)
        with torch.no_grad():
            values, log_prob, entropy = m.policy.evaluate_actions(o, actions.to(m.device))
        act, _ = m.predict(obs, deterministic=True)
        out.append((values, log_prob, entropy, torch.as_tensor(act)))
    assert_same(out[1], out[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cls", ["PPO", "A2C"])
def test_on_policy_train_step_matches_cpu(cls):
    cls = getattr(sb3, cls)
    kw = dict(n_steps=16, batch_size=16, n_epochs=2) if cls is sb3.PPO else dict(n_steps=16)
    cpu, tpu = _pair(cls, "CartPole-v1", **kw)
    # fill the rollout on CPU (sampling differs between devices), then hand tpu a copy
    _, callback = cpu._setup_learn(16)
    cpu.collect_rollouts(cpu.env, callback, cpu.rollout_buffer, n_rollout_steps=16)
    tpu._setup_learn(16)
    tpu.rollout_buffer = copy.deepcopy(cpu.rollout_buffer)
    tpu.rollout_buffer.device = tpu.device
    for m in (cpu, tpu):
        torch.manual_seed(0)
        m.train()
    assert_same(_weights(tpu), _weights(cpu), rtol=1e-4, atol=1e-5)


def test_save_on_tpu_loads_on_cpu_and_back(tmp_path):
    model = sb3.PPO("MlpPolicy", "CartPole-v1", device="tpu", seed=0, n_steps=16,
                    batch_size=16)
    obs = np.random.default_rng(1).normal(size=(5, 4)).astype(np.float32)
    expected, _ = model.predict(obs, deterministic=True)
    model.save(tmp_path / "m.zip")
    on_cpu = sb3.PPO.load(tmp_path / "m.zip", device="cpu")
    assert on_cpu.device.type == "cpu"
    assert_same(_weights(on_cpu), _weights(model))
    on_cpu.save(tmp_path / "c.zip")
    back = sb3.PPO.load(tmp_path / "c.zip", device="tpu")
    assert back.device.type == "tpu"
    for m in (on_cpu, back):
        np.testing.assert_array_equal(m.predict(obs, deterministic=True)[0], expected)
