"""``obs_bits``: the observation-reading layers of SB3 policies (actorq.studies.obs_layers), found by running them,
and their own activation bit width in PTQ (actorq.studies.ptq) and QAT (actorq.studies.qat_finetune, deployed by
actorq.studies.qat_deploy).

Models are fresh, untrained SB3 models with small networks (building one takes milliseconds); observations are
drawn uniformly so that every component varies.
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from stable_baselines3 import A2C, DDPG, DQN, PPO, SAC, TD3
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

from actorq.studies import envs, obs_layers, ptq, qat_deploy, qat_finetune, zoo
from actorq.studies import torch_fake_quant as tq


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


def _model(cls: type, env_id: str, **policy_kwargs: object) -> object:
    extra = {"buffer_size": 64} if cls in (DQN, DDPG, TD3, SAC) else {}
    return cls("MlpPolicy", env_id, seed=0, device="cpu", policy_kwargs=policy_kwargs or None, **extra)


class _ImageEnv(gym.Env):
    """Small images (NatureCNN's smallest input, 36x36), channels last as an env gives them."""

    observation_space = gym.spaces.Box(0, 255, (36, 36, 1), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple:
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action: int) -> tuple:
        return self.observation_space.sample(), 0.0, False, False, {}


def _obs(model: object, n: int = 256) -> np.ndarray:
    space = model.observation_space
    if isinstance(space, gym.spaces.Discrete):
        return np.random.default_rng(0).integers(0, space.n, n)
    if space.dtype == np.uint8:
        return np.random.default_rng(0).integers(0, 256, (n, *space.shape), dtype=np.uint8)
    return np.random.default_rng(0).uniform(-2, 2, (n, *space.shape)).astype(space.dtype)


DETECT = [
    ("ddpg", DDPG, "Pendulum-v1", dict(net_arch=[16, 8]), {"actor": ["mu.0"]}),
    ("td3", TD3, "Pendulum-v1", dict(net_arch=dict(pi=[16], qf=[8])), {"actor": ["mu.0"]}),
    ("sac", SAC, "Pendulum-v1", dict(net_arch=[16, 16]), {"actor": ["latent_pi.0"]}),
    ("dqn", DQN, "CartPole-v1", dict(net_arch=[24, 24]), {"q_net": ["q_net.0"]}),
    (
        "ppo",
        PPO,
        "CartPole-v1",
        dict(net_arch=dict(pi=[16, 8], vf=[12])),
        {"policy": ["mlp_extractor.policy_net.0", "mlp_extractor.value_net.0"]},
    ),
    (
        "a2c-separate-extractors",
        A2C,
        "Pendulum-v1",
        dict(net_arch=dict(pi=[16], vf=[16]), share_features_extractor=False),
        {"policy": ["mlp_extractor.policy_net.0", "mlp_extractor.value_net.0"]},
    ),
    # No hidden layers: the heads read the observation themselves.
    ("ppo-no-hidden", PPO, "CartPole-v1", dict(net_arch=dict(pi=[], vf=[])), {"policy": ["action_net", "value_net"]}),
    # A discrete observation reaches the network one-hot encoded: the preprocessed tensor is what is compared.
    ("ppo-discrete-obs", PPO, "FrozenLake-v1", dict(net_arch=dict(pi=[8], vf=[8])), {"policy": [
        "mlp_extractor.policy_net.0", "mlp_extractor.value_net.0"]}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("cls", "env_id", "kwargs", "expect"), [c[1:] for c in DETECT], ids=[c[0] for c in DETECT]
)
def test_observation_layers_are_the_ones_whose_input_is_the_observation(
    cls: type, env_id: str, kwargs: dict, expect: dict
) -> None:
    model = _model(cls, env_id, **kwargs)
    assert obs_layers.observation_layers(model, _obs(model)) == expect


def test_an_image_policy_reads_the_scaled_image_in_its_first_convolution() -> None:
    model = PPO("CnnPolicy", _ImageEnv(), seed=0, device="cpu", n_steps=8, batch_size=8)
    assert obs_layers.observation_layers(model, _obs(model)) == {"policy": ["features_extractor.cnn.0"]}


def test_detection_covers_target_networks_and_wrapped_layers_and_moves_no_range() -> None:
    model = _model(DDPG, "Pendulum-v1", net_arch=[16, 8])
    mods = zoo.qat_modules(model)
    for m in mods.values():
        tq.wrap_quant_layers(m, tq.QuantScheme.parse("8"), act_bits=8)
    model.policy.set_training_mode(True)  # as in a fine-tune: a training forward would move the EMA ranges
    found = obs_layers.observation_layers(model, _obs(model), mods)
    assert found == {"actor": ["mu.0"], "actor_target": ["mu.0"]}
    assert model.policy.actor.training  # the training mode is given back
    assert all(lo == float("inf") for m in mods.values() for lo, _ in tq.activation_ranges(m).values())


@pytest.mark.parametrize("cls", [PPO, SAC])
def test_detection_draws_no_random_numbers(cls: type) -> None:
    """The policies' forwards sample actions; a fine-tune and its control must stay on one RNG stream."""
    model = _model(cls, "Pendulum-v1", net_arch=[8])
    torch.manual_seed(3)
    obs_layers.observation_layers(model, _obs(model))
    assert torch.equal(torch.rand(4), (torch.manual_seed(3), torch.rand(4))[1])


class _Doubled(BaseFeaturesExtractor):
    """A features extractor that transforms the observation before any layer sees it."""

    def __init__(self, observation_space: gym.spaces.Box) -> None:
        super().__init__(observation_space, int(np.prod(observation_space.shape)))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return 2 * obs.flatten(1)


def test_policy_without_an_observation_layer_is_refused_by_name() -> None:
    model = _model(PPO, "CartPole-v1", net_arch=dict(pi=[8], vf=[8]), features_extractor_class=_Doubled)
    with pytest.raises(ValueError, match="no Linear/Conv layer of policy takes the observation"):
        obs_layers.observation_layers(model, _obs(model))


@pytest.mark.parametrize(
    ("bits", "acts", "msg"), [(1, True, "integer in"), (17, True, "integer in"), (8, False, "activations")]
)
def test_obs_bits_rule(bits: int, acts: bool, msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        obs_layers.check_obs_bits(bits, acts)
    obs_layers.check_obs_bits(None, False)
    obs_layers.check_obs_bits(8, None)


def _inputs(model: object, obs: np.ndarray) -> dict[str, tuple[tq.QuantLayer, torch.Tensor, torch.Tensor]]:
    """Every deployed QuantLayer with the input it got on ``obs`` and its output."""
    seen = {}
    hooks = [
        q.register_forward_hook(lambda m, a, y, k=f"{n}.{ln}": seen.__setitem__(k, (m, a[0], y)))
        for n, mod in zoo.deployed_modules(model).items()
        for ln, q in tq.quant_layers(mod)
    ]
    zoo.forward_modules(model, obs, zoo.deployed_modules(model))
    for h in hooks:
        h.remove()
    return seen


@pytest.mark.parametrize(
    ("cls", "env_id", "kwargs", "obs_layer"),
    [
        (DDPG, "Pendulum-v1", dict(net_arch=[16, 8]), "actor.mu.0"),
        (DQN, "CartPole-v1", dict(net_arch=[16, 16]), "q_net.q_net.0"),
    ],
)
def test_ptq_quantizes_the_observation_input_on_its_own_grid(
    cls: type, env_id: str, kwargs: dict, obs_layer: str
) -> None:
    model = _model(cls, env_id, **kwargs)
    obs = _obs(model, 512)
    rep = ptq.quantize_policy(model, tq.QuantScheme.parse("8"), act_bits=2, calib_obs=obs, obs_bits=6)
    assert rep["activation_bits"][obs_layer] == 6
    assert set(rep["activation_bits"]) == set(rep["activation_ranges"]) and len(rep["activation_bits"]) >= 3
    assert all(b == 2 for k, b in rep["activation_bits"].items() if k != obs_layer)
    for key, (q, x, y) in _inputs(model, obs).items():
        x_q = tq.fake_quant_activation(x, q._lo, q._hi, q.act_bits)
        # The layer's output is computed from exactly that fake-quantized input ...
        torch.testing.assert_close(y, nn.functional.linear(x_q, q.layer.weight, q.layer.bias), rtol=0, atol=0)
        levels = len(torch.unique(x_q))
        # ... which lies on a 2**bits grid: 6 bits for the observation (uniform draws fill most of its 64
        # levels), 2 bits for the hidden activations.
        assert levels <= 2**q.act_bits
        assert levels > 2**2 if key == obs_layer else q.act_bits == 2


def test_ptq_obs_bits_unset_changes_nothing() -> None:
    """Default obs_bits=None is the W+A PTQ as it was: every input at act_bits, bit-identical actions."""
    model = _model(SAC, "Pendulum-v1", net_arch=[16, 16])
    obs = _obs(model, 512)
    state = {k: v.clone() for k, v in model.policy.state_dict().items()}
    rep = ptq.quantize_policy(model, tq.QuantScheme.parse("4"), act_bits=3, calib_obs=obs)
    assert set(rep["activation_bits"].values()) == {3}
    got = model.predict(obs, deterministic=True)[0]
    ptq.unquantize_policy(model, state)
    # The W+A recipe written out: weights quantized in place, every layer's input wrapped at act_bits, calibrated.
    actor = zoo.deployed_modules(model)["actor"]
    tq.ptq_quantize_(actor, tq.QuantScheme.parse("4"))
    tq.wrap_quant_layers(actor, weight_scheme=None, act_bits=3)
    tq.set_calibrating(actor, True)
    for i in range(0, len(obs), 256):
        zoo.forward_modules(model, obs[i : i + 256], {"actor": actor})
    tq.set_calibrating(actor, False)
    np.testing.assert_array_equal(got, model.predict(obs, deterministic=True)[0])


def test_ptq_obs_bits_needs_activation_quantization_and_a_width() -> None:
    model = _model(DDPG, "Pendulum-v1", net_arch=[8])
    with pytest.raises(ValueError, match="activations are not quantized"):
        ptq.quantize_policy(model, tq.QuantScheme.parse("8"), obs_bits=8)
    with pytest.raises(ValueError, match="activations are not quantized"):
        ptq.PtqConfig(obs_bits=8)
    with pytest.raises(ValueError, match=r"integer in \[2, 16\]"):
        ptq.PtqConfig(quantize_activations=True, obs_bits=1)
    assert ptq.PtqConfig(quantize_activations=True, obs_bits=8).obs_bits == 8


def test_ptq_sweep_labels_rows_with_the_observation_width(tmp_path: Path) -> None:
    model = _model(DDPG, "Pendulum-v1", net_arch=[8])
    cfg = ptq.PtqConfig(
        precisions=["fp32", "fp16", "4"], episodes=1, seeds=1, quantize_activations=True, obs_bits=8,
        calib_steps=64, n_envs=1, max_episode_steps=20,
    )  # fmt: skip
    res = ptq.run_ptq(model, "Pendulum-v1", cfg, out=tmp_path)
    assert [r["activations"] for r in res["rows"]] == ["fp32", "fp32", "uint4 (obs uint8)"]
    assert res["layers"]["int4"]["activation_bits"] == {"actor.mu.0": 8, "actor.mu.2": 4}
    assert "uint4 (obs uint8)" in (tmp_path / "ptq.csv").read_text()


def test_wrap_refuses_a_width_for_a_layer_it_does_not_have() -> None:
    actor = _model(DDPG, "Pendulum-v1", net_arch=[8]).policy.actor
    with pytest.raises(ValueError, match=r"act_bits_for names \['mu.9'\]"):
        tq.wrap_quant_layers(actor, None, act_bits=4, act_bits_for={"mu.9": 8})
    assert not list(tq.quant_layers(actor))  # refused before wrapping anything


QAT_CASES = [
    ("ddpg", "Pendulum-v1", {"learning_starts": 50, "buffer_size": 1000, "policy_kwargs": {"net_arch": [16, 16]}},
     100, ["actor.mu.0", "actor_target.mu.0"]),
    ("ppo", "CartPole-v1", {"policy_kwargs": {"net_arch": dict(pi=[16], vf=[16])}}, 256,
     ["policy.mlp_extractor.policy_net.0", "policy.mlp_extractor.value_net.0"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("algo", "env_id", "overrides", "steps", "obs_in"), QAT_CASES, ids=[c[0] for c in QAT_CASES]
)
def test_qat_obs_bits_trains_and_deploys_the_observation_input_at_its_own_width(
    algo: str, env_id: str, overrides: dict, steps: int, obs_in: list[str]
) -> None:
    model = zoo.make_model(algo, env_id, seed=0, **overrides)
    recipe = qat_finetune.QatRecipe(finetune_steps=steps, calib_steps=300, obs_bits=8)
    model, info = qat_finetune.finetune_qat(model, env_id, 3, recipe)
    assert info["act_bits"] == 3 and info["obs_bits"] == 8 and info["obs_layers"] == obs_in
    widths = {
        f"{n}.{ln}": q.act_bits for n, m in zoo.qat_modules(model).items() for ln, q in tq.quant_layers(m)
    }
    assert {k for k, b in widths.items() if b == 8} == set(obs_in)  # target copies included
    assert {b for k, b in widths.items() if k not in obs_in} == {3}
    obs = envs.record_observations(model, env_id, 200, seed=3)
    check = qat_deploy.check_equal(model, obs)
    assert check["within_bound"], check["layers"]
    a_fq = qat_deploy.actions(model, obs)
    qat_deploy.deploy_integer(model)
    a_int = qat_deploy.actions(model, obs)
    if algo == "ppo":
        assert np.mean(a_fq == a_int) >= 0.99
    else:
        np.testing.assert_allclose(a_int, a_fq, atol=1e-4)
    deployed = {
        f"{n}.{ln}": m for n, mod in zoo.deployed_modules(model).items() for ln, m in mod.named_modules()
        if isinstance(m, qat_deploy.IntegerLinear)
    }  # fmt: skip
    for name, layer in deployed.items():
        codes = layer.quantize_input(torch.as_tensor(obs, dtype=torch.float32))
        assert layer.act_bits == (8 if name in obs_in else 3)
        if name in obs_in:  # the deployed observation input really uses the wider code range
            assert layer.x_qmax == 255 and len(torch.unique(codes)) > 8


def test_qat_obs_bits_needs_quantized_activations() -> None:
    model = zoo.make_model("ddpg", "Pendulum-v1", seed=0, policy_kwargs={"net_arch": [8]})
    recipe = qat_finetune.QatRecipe(finetune_steps=10, calib_steps=10, obs_bits=8)
    with pytest.raises(ValueError, match="activations are not quantized"):
        qat_finetune.finetune_qat(model, "Pendulum-v1", 4, recipe, act_bits=0)
