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


@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.parametrize("cls,env_id,kw", [
    ("PPO", "CartPole-v1", dict(batch_size=16, n_epochs=2)),
    ("PPO", "Pendulum-v1", dict(batch_size=16, n_epochs=2, use_sde=True, clip_range_vf=0.2,
                                target_kl=0.05)),
    ("A2C", "CartPole-v1", {}),
    ("A2C", "Pendulum-v1", dict(use_rms_prop=False, gae_lambda=0.9)),
])
def test_on_policy_train_step_matches_cpu(cls, env_id, kw):
    cls = getattr(sb3, cls)
    cpu, tpu = _pair(cls, env_id, n_steps=32, **kw)
    # fill the rollout on CPU (sampling differs between devices), then hand tpu a copy
    _, callback = cpu._setup_learn(32)
    cpu.collect_rollouts(cpu.env, callback, cpu.rollout_buffer, n_rollout_steps=32)
    tpu._setup_learn(32)
    tpu.rollout_buffer = copy.deepcopy(cpu.rollout_buffer)
    tpu.rollout_buffer.device = tpu.device
    for m in (cpu, tpu):
        np.random.seed(0)  # the minibatches' permutation
        torch.manual_seed(0)
        m.train()
    assert_same(_weights(tpu), _weights(cpu), rtol=1e-4, atol=1e-5)


@pytest.mark.slow  # (~6 s warm, more from a cold compile cache)
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


@pytest.mark.slow
@pytest.mark.parametrize("cls,env_id", [("DQN", "CartPole-v1"), ("SAC", "Pendulum-v1"),
                                        ("TD3", "Pendulum-v1")])
def test_off_policy_train_step_matches_cpu(cls, env_id, monkeypatch):
    cls = getattr(sb3, cls)
    # TD3's target smoothing and SAC's reparametrised actions draw from the device's own
    # generator (a different stream on tpu, as on CUDA): no smoothing, and SAC's noise from CPU
    kw = dict(target_policy_noise=0.0) if cls is sb3.TD3 else {}
    cpu, tpu = _pair(cls, env_id, learning_starts=0, batch_size=16, buffer_size=200, **kw)
    generator = torch.Generator()

    def rsample(self, sample_shape=torch.Size()):  # noqa: B008
        shape = self._extended_shape(sample_shape)
        return self.loc + torch.randn(shape, generator=generator).to(self.loc.device) * self.scale

    monkeypatch.setattr(torch.distributions.Normal, "rsample", rsample)
    if hasattr(cpu, "q_net_target"):
        tpu.q_net_target.load_state_dict(cpu.q_net_target.state_dict())
    _, callback = cpu._setup_learn(40)
    cpu.collect_rollouts(cpu.env, callback, cpu.train_freq._replace(frequency=40),
                         cpu.replay_buffer, cpu.action_noise, cpu.learning_starts)
    tpu._setup_learn(40)
    tpu.replay_buffer = copy.deepcopy(cpu.replay_buffer)
    tpu.replay_buffer.device = tpu.device
    for m in (cpu, tpu):
        # the minibatch indices come from numpy's generator
        np.random.seed(0)
        generator.manual_seed(0)
        m.train(gradient_steps=3, batch_size=16)
    assert_same(_weights(tpu), _weights(cpu), rtol=1e-4, atol=1e-4)


def test_custom_policy_and_vecnormalize_match_cpu():
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
    from stable_baselines3.common.vec_env import VecNormalize

    class Extractor(BaseFeaturesExtractor):
        def __init__(self, space):
            super().__init__(space, features_dim=8)
            self.net = torch.nn.Sequential(torch.nn.Linear(space.shape[0], 8),
                                           torch.nn.LayerNorm(8), torch.nn.GELU())

        def forward(self, obs):
            return self.net(obs)

    policy_kwargs = dict(features_extractor_class=Extractor,
                         net_arch=dict(pi=[16, 16], vf=[8]), activation_fn=torch.nn.Tanh)
    out = []
    for device in ("cpu", "tpu"):
        env = VecNormalize(make_vec_env("Pendulum-v1", n_envs=2, seed=0))
        model = sb3.PPO("MlpPolicy", env, device=device, seed=0, n_steps=8, batch_size=16,
                        policy_kwargs=policy_kwargs)
        if device == "cpu":
            state = model.policy.state_dict()
        else:
            model.policy.load_state_dict(state)
        obs = model.env.reset()
        o = torch.as_tensor(obs, device=model.device)
        with torch.no_grad():
            values, log_prob, entropy = model.policy.evaluate_actions(
                o, torch.linspace(-1, 1, 2, device=model.device)[:, None])
        out.append((torch.as_tensor(obs), values, log_prob, entropy,
                    torch.as_tensor(model.predict(obs, deterministic=True)[0])))
    assert_same(out[1], out[0], rtol=1e-5, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("cls,env_id", [("PPO", "CartPole-v1"), ("A2C", "CartPole-v1"),
                                        ("DQN", "CartPole-v1"), ("SAC", "Pendulum-v1"),
                                        ("TD3", "Pendulum-v1")])
def test_learn_runs_on_tpu(cls, env_id):
    cls = getattr(sb3, cls)
    kw = dict(n_steps=64) if cls in (sb3.PPO, sb3.A2C) else dict(learning_starts=50)
    model = cls("MlpPolicy", env_id, device="tpu", seed=0, **kw)
    model.learn(300)
    assert all(p.device.type == "tpu" for p in model.policy.parameters())
    assert np.isfinite(model.predict(model.env.reset(), deterministic=True)[0]).all()
