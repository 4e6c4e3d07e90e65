"""Loading Stable-Baselines3 / RL Baselines3 Zoo models without unpickling (issue 12).

Every test builds its own small SB3 zips in a temp dir (no ../shared): fresh models of each algorithm, the
SB3 1.x data layout, zips whose fields exist only in pickled form, hostile pickles.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import zipfile
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from stable_baselines3 import A2C, DDPG, DQN, PPO, SAC, TD3
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize
from torch import nn

from actorq.studies import cli, envs, fidelity, safe_pickle, sb3_zip, zoo, zoo_env

CASES = [
    ("a2c", A2C, "CartPole-v1", dict(net_arch=dict(pi=[16, 8], vf=[12]))),
    ("ppo", PPO, "CartPole-v1", dict(net_arch=dict(pi=[16], vf=[16]), activation_fn=nn.ReLU)),
    ("ppo", PPO, "Pendulum-v1", dict(net_arch=dict(pi=[8, 8], vf=[8]))),
    ("dqn", DQN, "CartPole-v1", dict(net_arch=[24, 24])),
    ("ddpg", DDPG, "Pendulum-v1", dict(net_arch=[16, 8])),
    ("td3", TD3, "Pendulum-v1", dict(net_arch=dict(pi=[16], qf=[8, 8]), activation_fn=nn.Tanh)),
    ("sac", SAC, "Pendulum-v1", dict(net_arch=[16, 16])),
]


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


def _save(cls: type, env_id: str, tmp: Path, name: str = "model.zip", **policy_kwargs: object) -> tuple:
    extra = {"buffer_size": 64} if cls in (DQN, DDPG, TD3, SAC) else {}
    model = cls("MlpPolicy", env_id, seed=0, device="cpu", policy_kwargs=policy_kwargs or None, **extra)
    with (
        torch.no_grad()
    ):  # fresh weights are near zero: spread them so a wrong activation changes the actions
        for p in model.policy.parameters():
            p.mul_(3.0)
    path = tmp / name
    model.save(path)
    return model, path


def _obs(model: object, n: int = 64) -> np.ndarray:
    space = model.observation_space
    return np.random.default_rng(0).uniform(-2, 2, (n, *space.shape)).astype(space.dtype)


def _rewrite_data(path: Path, change: callable) -> None:
    """Edit the zip's data JSON in place (keeping the other members)."""
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    data = json.loads(members["data"])
    change(data)
    members["data"] = json.dumps(data).encode()
    with zipfile.ZipFile(path, "w") as zf:
        for n, b in members.items():
            zf.writestr(n, b)


def _trap_payload(marker: Path) -> str:
    """A base64 pickle that creates ``marker`` if anything ever unpickles it."""

    class Trap:
        def __reduce__(self) -> tuple:
            return (os.system, (f"touch {marker}",))

    return base64.b64encode(pickle.dumps(Trap())).decode()


def _poison_pickled_fields(path: Path, tmp_path: Path) -> Path:
    """Replace every pickled blob in the zip's data with one that creates a file if unpickled; returns that file."""
    marker = tmp_path / "unpickled"
    _rewrite_data(
        path,
        lambda d: [
            v.__setitem__(":serialized:", _trap_payload(marker))
            for v in d.values()
            if isinstance(v, dict) and ":serialized:" in v
        ],
    )
    return marker


@pytest.mark.parametrize(("algo", "cls", "env_id", "kwargs"), CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_each_algorithm_loads_weights_only(
    algo: str, cls: type, env_id: str, kwargs: dict, tmp_path: Path
) -> None:
    original, path = _save(cls, env_id, tmp_path, **kwargs)
    marker = _poison_pickled_fields(path, tmp_path)
    loaded = sb3_zip.load_zip(path)
    assert loaded.algo == algo and not marker.exists()
    assert type(loaded.model) is cls
    ref = original.policy.state_dict()
    got = loaded.model.policy.state_dict()
    assert ref.keys() == got.keys() and all(torch.equal(ref[k], got[k]) for k in ref)
    a, _ = original.predict(_obs(original), deterministic=True)
    b, _ = loaded.model.predict(_obs(original), deterministic=True)
    np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-6)
    mods = zoo.deployed_modules(loaded.model)
    assert sum(isinstance(m, nn.Linear) for mod in mods.values() for m in mod.modules()) >= 2


def _sb3_v1_layout(path: Path) -> None:
    """Rewrite a 2.x zip's space fields the way SB3 1.x (gym) wrote them."""

    def change(d: dict) -> None:
        for name in ("observation_space", "action_space"):
            sp = d[name]
            sp[":type:"] = sp[":type:"].replace("gymnasium.", "gym.")
            if "_shape" in sp:
                sp["shape"] = sp.pop("_shape")
            if "n" in sp:
                sp["n"] = int(sp["n"])
            for k in ("low_repr", "high_repr", "start"):
                sp.pop(k, None)

    _rewrite_data(path, change)


def test_sb3_1x_layout_and_zoo_directory(tmp_path: Path) -> None:
    agent = tmp_path / "dqn" / "CartPole-v1"
    agent.mkdir(parents=True)
    original, path = _save(DQN, "CartPole-v1", agent, name="CartPole-v1.zip", net_arch=[32])
    _sb3_v1_layout(path)
    model, meta = zoo.load_policy(agent)  # algo from the folder, env from the file name
    assert meta["algo"] == "dqn" and meta["env_id"] == "CartPole-v1" and meta["env"].env_id == "CartPole-v1"
    assert meta["env"].source_id is None and meta["evaluations"] is None
    a, _ = original.predict(_obs(original), deterministic=True)
    np.testing.assert_array_equal(model.predict(_obs(original), deterministic=True)[0], a)


def test_field_only_in_pickled_form_is_refused_by_name(tmp_path: Path) -> None:
    _, path = _save(PPO, "CartPole-v1", tmp_path)
    _rewrite_data(
        path,
        lambda d: d.__setitem__(
            "observation_space", {":type:": "<class 'gymnasium.spaces.box.Box'>", ":serialized:": "gAR9lC4="}
        ),
    )
    with pytest.raises(
        sb3_zip.ZipLoadError, match=r"observation_space\.shape/dtype are only stored in pickled form"
    ):
        sb3_zip.load_zip(path)


def test_pickled_policy_kwargs_needs_config(tmp_path: Path) -> None:
    original, path = _save(
        PPO, "CartPole-v1", tmp_path, net_arch=dict(pi=[16], vf=[16]), activation_fn=nn.ReLU
    )
    _rewrite_data(
        path,
        lambda d: d.__setitem__("policy_kwargs", {":type:": "<class 'dict'>", ":serialized:": "gAR9lC4="}),
    )
    with pytest.raises(sb3_zip.ZipLoadError, match="policy_kwargs is only stored in pickled form"):
        sb3_zip.load_zip(path)
    # The zoo's config.yml text rebuilds it (parsed, never evaluated).
    (tmp_path / "config.yml").write_text(
        "!!python/object/apply:collections.OrderedDict\n- - - policy\n    - MlpPolicy\n"
        "  - - policy_kwargs\n    - dict(activation_fn=nn.ReLU, net_arch=dict(pi=[16], vf=[16]))\n"
    )
    model, _ = zoo.load_policy(tmp_path, env_id="CartPole-v1")
    assert isinstance(model.policy.mlp_extractor.policy_net[1], nn.ReLU)
    np.testing.assert_array_equal(
        model.predict(_obs(original), deterministic=True)[0],
        original.predict(_obs(original), deterministic=True)[0],
    )


def test_unknown_activation_and_non_mlp_policy_refused(tmp_path: Path) -> None:
    _, path = _save(PPO, "CartPole-v1", tmp_path)
    _rewrite_data(path, lambda d: d["policy_kwargs"].update({"activation_fn": "<class 'evil.Activation'>"}))
    with pytest.raises(sb3_zip.ZipLoadError, match=r"policy_kwargs\.activation_fn"):
        sb3_zip.load_zip(path)
    _, path = _save(PPO, "CartPole-v1", tmp_path, name="cnn.zip")
    _rewrite_data(
        path,
        lambda d: d["policy_class"].update({"__init__": "<function ActorCriticCnnPolicy.__init__ at 0x1>"}),
    )
    with pytest.raises(sb3_zip.ZipLoadError, match="CnnPolicy needs an image observation_space"):
        sb3_zip.load_zip(path)
    _rewrite_data(
        path, lambda d: d["policy_class"].update({"__init__": "<function MultiInputPolicy.__init__ at 0x1>"})
    )
    with pytest.raises(sb3_zip.ZipLoadError, match="only MlpPolicy and CnnPolicy"):
        sb3_zip.load_zip(path)


class _ImageEnv(gym.Env):
    """Atari-shaped observations (84x84x4 uint8), as `actorq zoo train` makes for Atari with frame stacking."""

    observation_space = gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)
    action_space = gym.spaces.Discrete(4)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, False, False, {}


@pytest.mark.parametrize("cls", [PPO, A2C, DQN], ids=lambda c: c.__name__)
def test_image_policies_load_weights_only(cls: type, tmp_path: Path) -> None:
    """CnnPolicy (NatureCNN) zips, e.g. Atari agents, are rebuilt without unpickling, computing the same actions."""
    kwargs = {"buffer_size": 10} if cls is DQN else {}
    original = cls("CnnPolicy", _ImageEnv(), device="cpu", seed=0, **kwargs)
    path = tmp_path / "cnn.zip"
    original.save(path)
    marker = _poison_pickled_fields(path, tmp_path)
    loaded = sb3_zip.load_zip(path)
    assert loaded.algo == cls.__name__.lower() and not marker.exists()
    assert loaded.policy_kwargs["normalize_images"] is True
    ref, got = original.policy.state_dict(), loaded.model.policy.state_dict()
    assert ref.keys() == got.keys() and all(torch.equal(ref[k], got[k]) for k in ref)
    obs = np.stack([original.observation_space.sample() for _ in range(4)])
    np.testing.assert_array_equal(
        loaded.model.predict(obs, deterministic=True)[0], original.predict(obs, deterministic=True)[0]
    )


def test_qrdqn_needs_sb3_contrib_or_loads(tmp_path: Path) -> None:
    try:
        from sb3_contrib import QRDQN
    except ImportError:
        _, path = _save(DQN, "CartPole-v1", tmp_path)
        _rewrite_data(path, lambda d: d["policy_class"].update({"__module__": "sb3_contrib.qrdqn.policies"}))
        with pytest.raises(sb3_zip.ZipLoadError, match="sb3-contrib"):
            sb3_zip.load_zip(path)
        return
    original = QRDQN(
        "MlpPolicy", "CartPole-v1", buffer_size=64, policy_kwargs=dict(net_arch=[16], n_quantiles=5)
    )
    original.save(tmp_path / "q.zip")
    loaded = sb3_zip.load_zip(tmp_path / "q.zip")
    assert loaded.algo == "qrdqn" and loaded.policy_kwargs["n_quantiles"] == 5
    obs = _obs(original)
    np.testing.assert_array_equal(
        loaded.model.predict(obs, deterministic=True)[0], original.predict(obs, deterministic=True)[0]
    )


def _hostile_pickles(marker: Path) -> list[bytes]:
    class System:
        def __reduce__(self) -> tuple:
            return (os.system, (f"touch {marker}",))

    class Eval:
        def __reduce__(self) -> tuple:
            return (eval, (f"open({str(marker)!r}, 'w')",))

    # A hostile object hidden inside an otherwise well-formed VecNormalize-like state.
    inner = pickle.dumps({"obs_rms": System()})
    return [pickle.dumps(System()), pickle.dumps(Eval()), inner, pickle.dumps(System(), protocol=2)]


def test_restricted_unpickler_refuses_hostile_pickles(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    for i, blob in enumerate(_hostile_pickles(marker)):
        f = tmp_path / f"vecnormalize_{i}.pkl"
        f.write_bytes(blob)
        with pytest.raises(safe_pickle.UnsafePickleError, match="refusing"):
            safe_pickle.load_vecnormalize(f)
    assert not marker.exists()


def test_hostile_vecnormalize_stops_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    marker = tmp_path / "pwned"
    _save(PPO, "CartPole-v1", tmp_path, name="CartPole-v1.zip")
    (tmp_path / "vecnormalize.pkl").write_bytes(_hostile_pickles(marker)[0])
    exc = cli.main(["ptq", "--policy", str(tmp_path), "--bits", "fp32", "--out", str(tmp_path / "out")])
    assert exc == 2 and not marker.exists() and not (tmp_path / "out").exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error:") and "system" in err[-1] and "refusing" in err[-1]


def test_real_vecnormalize_statistics_are_read_and_applied(tmp_path: Path) -> None:
    venv = VecNormalize(make_vec_env("Pendulum-v1", n_envs=2, seed=0), clip_obs=3.0)
    venv.reset()
    for _ in range(20):
        venv.step(np.stack([venv.action_space.sample() for _ in range(2)]))
    venv.save(tmp_path / "vecnormalize.pkl")
    norm = safe_pickle.load_vecnormalize(tmp_path / "vecnormalize.pkl")
    np.testing.assert_allclose(norm.mean, venv.obs_rms.mean)
    np.testing.assert_allclose(norm.var, venv.obs_rms.var)
    assert norm.clip_obs == 3.0 and norm.epsilon == venv.epsilon
    spec = envs.EnvSpec("Pendulum-v1", obs_norm=norm)
    wrapped, raw = envs.make_env(spec, seed=5), envs.make_env("Pendulum-v1", seed=5)
    np.testing.assert_allclose(wrapped.reset(), norm.apply(raw.reset()), rtol=1e-5)


def test_zoo_config_is_read_safely(tmp_path: Path) -> None:
    cfg_path = tmp_path / "config.yml"
    cfg_path.write_text(
        "!!python/object/apply:collections.OrderedDict\n- - - policy_kwargs\n"
        "    - dict(log_std_init=-2, ortho_init=False, activation_fn=nn.Tanh, net_arch=[dict(pi=[64], vf=[64])])\n"
        "  - - normalize\n    - true\n"
    )
    cfg = zoo_env.read_config(cfg_path)
    assert zoo_env.config_policy_kwargs(cfg) == {
        "log_std_init": -2, "ortho_init": False, "activation_fn": "nn.Tanh", "net_arch": [{"pi": [64], "vf": [64]}],
    }  # fmt: skip
    cfg_path.write_text("!!python/object/apply:os.system\n- touch /tmp/actorq-should-not-exist\n")
    with pytest.raises(zoo_env.ZooConfigError, match="not a plain zoo config"):
        zoo_env.read_config(cfg_path)
    with pytest.raises(zoo_env.ZooConfigError, match="without running it"):
        zoo_env.config_policy_kwargs({"policy_kwargs": "dict(net_arch=__import__('os').system('x'))"})


def test_zoo_wrappers_applied_or_refused(tmp_path: Path) -> None:
    with pytest.raises(zoo_env.ZooConfigError, match="not supported"):
        zoo_env.wrapper_from_config({"env_wrapper": "utils.wrappers.DoneOnSuccessWrapper"})
    with pytest.raises(zoo_env.ZooConfigError, match="frame_stack"):
        zoo_env.wrapper_from_config({"frame_stack": 4})
    cfg = {"env_wrapper": [{"sb3_contrib.common.wrappers.TimeFeatureWrapper": {"max_steps": 200}}]}
    try:
        import sb3_contrib  # noqa: F401
    except ImportError:
        with pytest.raises(zoo_env.ZooConfigError, match="sb3-contrib"):
            zoo_env.wrapper_from_config(cfg)
        return
    env = zoo_env.wrapper_from_config(cfg)(gym.make("Pendulum-v1"))
    assert env.observation_space.shape == (4,)


def test_env_id_mapping() -> None:
    assert zoo_env.map_env_id("CartPole-v1") == "CartPole-v1"
    with pytest.raises(
        zoo_env.ZooConfigError,
        match=r"no environment 'CartPolf-v1' is registered; similar ids: \['CartPole-v1'",
    ):
        zoo_env.map_env_id("CartPolf-v1")
    with pytest.raises(zoo_env.ZooConfigError, match=r"installed versions: \['CartPole-v0', 'CartPole-v1'\]"):
        zoo_env.map_env_id("CartPole-v9")
    pendulum = gym.make("Pendulum-v1")
    with pytest.raises(zoo_env.ZooConfigError, match="differ from the policy's"):
        zoo_env.map_env_id("CartPole-v1", pendulum.observation_space, pendulum.action_space)
    # An id that is registered but cannot be built here moves to the next newer version with the same spaces.
    # mujoco is a pinned dependency (pyproject, requirements.in): Hopper-v4 must build; no skip hides its absence.
    hopper = gym.make("Hopper-v4")
    assert zoo_env.map_env_id("Hopper-v3", hopper.observation_space, hopper.action_space) == "Hopper-v4"


def test_fidelity_verdicts(tmp_path: Path) -> None:
    np.savez(tmp_path / "evaluations.npz", timesteps=np.array([10, 20]), results=np.array([[1.0, 3.0], [9.0, 11.0]]),
             ep_lengths=np.ones((2, 2)))  # fmt: skip
    zoo_eval = fidelity.zoo_final_evaluation(tmp_path / "evaluations.npz")
    assert zoo_eval == {"mean": 10.0, "std": 1.0, "episodes": 2, "timestep": 20, "n_evals": 2}
    assert fidelity.compare(10.5, 0.2, 5, zoo_eval, "E-v1", None)["verdict"] == "agree"
    assert fidelity.compare(14.0, 0.2, 5, zoo_eval, "E-v1", None)["verdict"] == "DISAGREE"
    drift = fidelity.compare(14.0, 0.2, 5, zoo_eval, "E-v4", "E-v3", model_timestep=25)
    assert drift["verdict"] == "version drift" and drift["trained_after_eval"]
    assert "E-v3 is not available here" in fidelity.describe(drift)


def test_cli_ptq_and_weights_on_a_zoo_directory(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    agent = tmp_path / "zoo" / "ppo" / "CartPole-v1"
    agent.mkdir(parents=True)
    _save(PPO, "CartPole-v1", agent, name="CartPole-v1.zip", net_arch=dict(pi=[16], vf=[16]))
    np.savez(
        agent / "evaluations.npz",
        timesteps=np.array([100]),
        results=np.full((1, 5), 9.0),
        ep_lengths=np.ones((1, 5)),
    )
    out = tmp_path / "ptq"
    assert (
        cli.main(
            [
                "ptq",
                "--policy",
                str(agent),
                "--bits",
                "fp32,8",
                "--episodes",
                "3",
                "--seeds",
                "1",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert "fidelity: ours fp32" in capsys.readouterr().out
    check = json.loads((out / "fidelity.json").read_text())
    assert (
        check["zoo_mean"] == 9.0 and check["ours_episodes"] == 3 and check["verdict"] in ("agree", "DISAGREE")
    )
    assert cli.main(["weights", "--policy", str(agent), "--bits", "8", "--out", str(tmp_path / "w")]) == 0
    assert (tmp_path / "w" / "weights.png").stat().st_size > 0
