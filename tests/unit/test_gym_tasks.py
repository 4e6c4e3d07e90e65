"""Any Gymnasium task by name or import path: its spaces decide what runs, refusals name the space and the
algorithms that take it, ALE games get the standard preprocessing, and ``actorq tasks`` reads the registries."""

from __future__ import annotations

import sys

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from actorq.cli import main
from actorq.config import EnvConfig, config_from_dict
from actorq.envs import (
    UnknownTaskError,
    UnsupportedSpaceError,
    check_task,
    environment_spec,
    make_environment,
)
from actorq.envs.spaces import action_kind, observation_layout
from tests import user_env

TAKERS = {"discrete": ["dqn"], "continuous": ["d4pg", "ddpg"]}.get


def gym_config(task: str, algorithm: str = "dqn", **env):
    return config_from_dict({"algorithm": algorithm, "env": {"suite": "gym", "task": task, **env}})


def test_observations_keep_frames_and_flatten_everything_else_in_gymnasiums_order():
    frames = observation_layout(spaces.Box(0, 255, (4, 84, 84), np.uint8))
    assert frames.shape == (4, 84, 84) and frames.dtype == np.uint8
    assert frames.convert(np.full((4, 84, 84), 7, np.uint8)).dtype == np.uint8
    minatar = observation_layout(spaces.Box(0, 1, (10, 10, 4), bool))  # bool channels: 0/1 uint8 frames
    assert minatar.shape == (10, 10, 4) and minatar.convert(np.ones((10, 10, 4), bool)).max() == 1
    grid = observation_layout(spaces.Box(-1.0, 1.0, (2, 3), np.float64))
    assert grid.shape == (6,) and grid.dtype == np.float32
    np.testing.assert_array_equal(grid.convert(np.arange(6.0).reshape(2, 3)), np.arange(6, dtype=np.float32))
    # Dict: keys sorted (Gymnasium sorts a plain dict's), each flattened in turn; Discrete one-hot.
    space = spaces.Dict({"b": spaces.Discrete(3), "a": spaces.Box(0.0, 1.0, (2,), np.float32)})
    layout = observation_layout(space)
    np.testing.assert_array_equal(layout.convert({"b": 2, "a": np.array([0.5, 0.25])}), [0.5, 0.25, 0, 0, 1])
    pair = observation_layout(spaces.Tuple((spaces.MultiBinary(2), spaces.Discrete(2, start=1))))
    np.testing.assert_array_equal(pair.convert((np.array([1, 0]), 2)), [1, 0, 0, 1])


@pytest.mark.parametrize(
    "space",
    [spaces.Text(5), spaces.Sequence(spaces.Discrete(2)), spaces.Graph(spaces.Box(0, 1, (2,)), None)],
)
def test_observation_spaces_without_a_fixed_size_are_refused_by_name(space):
    with pytest.raises(
        UnsupportedSpaceError, match=rf"observation space {type(space).__name__}.*Box observations"
    ):
        observation_layout(space)


def test_action_spaces_no_algorithm_takes_are_refused_naming_those_that_take_others():
    assert action_kind(spaces.Discrete(4), TAKERS) == "discrete"
    assert action_kind(spaces.Box(-2.0, 2.0, (3,)), TAKERS) == "continuous"
    with pytest.raises(UnsupportedSpaceError, match=r"MultiDiscrete.*Discrete \(dqn\) or Box \(d4pg, ddpg\)"):
        action_kind(spaces.MultiDiscrete([2, 3]), TAKERS)
    with pytest.raises(UnsupportedSpaceError, match="unbounded dimensions.*d4pg, ddpg"):
        action_kind(spaces.Box(-np.inf, np.inf, (2,)), TAKERS)


@pytest.mark.parametrize(
    ("task", "algorithm", "message"),
    [
        (
            "Hopper-v4",
            "dqn",
            r"Box\(-1.0, 1.0, \(3,\), float32\) and algorithm dqn .* Box actions .*: d4pg, ddpg",
        ),
        ("CartPole-v1", "d4pg", r"Discrete\(2\) and algorithm d4pg .* Discrete actions .*: dqn"),
        ("CartPole-v1", "ddpg", r"Discrete\(2\) and algorithm ddpg"),
    ],
)
def test_an_algorithm_that_does_not_take_the_tasks_actions_is_refused_before_any_process(
    task, algorithm, message
):
    with pytest.raises(UnsupportedSpaceError, match=message):
        check_task(gym_config(task, algorithm))


def test_the_train_command_refuses_a_mismatch_with_exit_2_and_no_run_directory(tmp_path, capsys):
    config = tmp_path / "hopper.yaml"
    config.write_text("algorithm: dqn\nenv: {suite: gym, task: Hopper-v4}\n")
    code = main(["train", str(config), "--run-dir", str(tmp_path / "run"), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith("error: ") and "d4pg, ddpg" in err[-1]
    assert not (tmp_path / "run").exists()
    code = main(["train", str(config), "env.task=no_such_pkg.envs:MyEnv", "--run-dir", str(tmp_path / "r2")])
    assert code == 2 and "no module named 'no_such_pkg'" in capsys.readouterr().err
    assert not (tmp_path / "r2").exists()


def test_a_users_class_factory_or_registered_id_by_import_path():
    spec = environment_spec(EnvConfig("gym", "tests.user_env:Corridor", make_kwargs={"length": 4}))
    assert (
        spec.discrete and spec.num_actions == 2 and spec.obs_shape == (5,)
    )  # position, then 4 visited cells
    env = make_environment(EnvConfig("gym", "tests.user_env:Corridor", make_kwargs={"max_steps": 3}), seed=0)
    ts, steps = env.reset(), 0
    while not ts.last():
        ts, steps = env.step(np.int32(0)), steps + 1
    assert steps == 3 and ts.discount == 1.0  # its own truncation
    registered = make_environment(EnvConfig("gym", f"tests.user_env:{user_env.ENV_ID}"))
    assert registered.step_limit == 50 and registered.observation_spec().shape == (7,)
    with pytest.raises(UnknownTaskError, match="has no environment class or factory 'Nope'"):
        make_environment(EnvConfig("gym", "tests.user_env:Nope"))
    with pytest.raises(UnknownTaskError, match="no module named 'my_pkg'.*PYTHONPATH"):
        make_environment(EnvConfig("gym", "my_pkg.envs:MyEnv"))
    with pytest.raises(UnknownTaskError, match="making the environment failed: TypeError"):
        check_task(gym_config("tests.user_env:Corridor", make_kwargs={"colour": "red"}))


def test_an_installed_plugins_ids_are_found_through_its_entry_point(tmp_path, monkeypatch):
    dist = tmp_path / "corridor_plugin-0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: corridor-plugin\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text("[actorq.envs]\ncorridor = tests.user_env:register_plugin_ids\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert user_env.PLUGIN_ID not in gymnasium.registry
    try:
        assert environment_spec(EnvConfig("gym", user_env.PLUGIN_ID)).obs_shape == (9,)
    finally:
        gymnasium.registry.pop(user_env.PLUGIN_ID, None)


def test_every_ale_game_gets_the_standard_preprocessing_and_training_only_clipping():
    spec = environment_spec(EnvConfig("gym", "ALE/Breakout-v5"))
    assert spec.obs_shape == (4, 84, 84) and spec.obs_dtype == np.uint8 and spec.discrete
    training = make_environment(EnvConfig("gym", "ALE/Breakout-v5"), seed=3)
    chain = _wrappers(training.gym_env)
    assert chain[:3] == ["ClipReward", "FrameStackObservation", "AtariPreprocessing"]
    assert "ClipReward" not in _wrappers(
        make_environment(EnvConfig("gym", "ALE/Breakout-v5"), evaluation=True).gym_env
    )
    first = training.reset().observation
    again = make_environment(EnvConfig("gym", "ALE/Breakout-v5"), seed=3).reset().observation
    np.testing.assert_array_equal(first, again)  # seeded no-op starts repeat
    # A lost life: discount 0 while training, the episode goes on (Acme's zero_discount_on_life_loss).
    ts, lost = training.step(np.int32(1)), None
    for _ in range(2000):
        ts = training.step(np.int32(0))  # never moving: the ball is lost
        if ts.discount == 0.0:
            lost = ts
            break
    assert lost is not None and lost.mid()
    with pytest.raises(UnknownTaskError, match="frameskip"):
        make_environment(EnvConfig("gym", "ALE/Pong-v5", make_kwargs={"frameskip": 4}))


def _wrappers(env) -> list[str]:
    names = []
    while isinstance(env, gymnasium.Wrapper):
        names.append(type(env).__name__)
        env = env.env
    return names


def test_named_wrappers_apply_in_order_and_unknown_ones_list_the_choices():
    env = EnvConfig("gym", "CartPole-v1", wrappers=("frame_stack:3",))
    assert environment_spec(env).obs_shape == (12,)
    with pytest.raises(UnknownTaskError, match="unknown wrapper 'blur'.*frame_stack:N"):
        make_environment(EnvConfig("gym", "CartPole-v1", wrappers=("blur",)))
    with pytest.raises(UnknownTaskError, match="'frame_stack' must be written frame_stack:N"):
        make_environment(EnvConfig("gym", "CartPole-v1", wrappers=("frame_stack",)))
    clipped = EnvConfig("gym", "MountainCarContinuous-v0", wrappers=("clip_reward",))
    assert "ClipReward" in _wrappers(make_environment(clipped).gym_env)
    assert "ClipReward" not in _wrappers(make_environment(clipped, evaluation=True).gym_env)


def test_actorq_tasks_lists_gymnasiums_registry_and_dm_controls_suite(capsys):
    gymnasium.register("ActorqListed-v0", entry_point="tests.user_env:Corridor")
    try:
        assert main(["tasks"]) == 0
    finally:
        gymnasium.registry.pop("ActorqListed-v0")
    lines = {line.strip() for line in capsys.readouterr().out.splitlines()}
    assert {"ActorqListed-v0", "Hopper-v4", "ALE/Pong-v5", "MinAtar/Breakout-v1", "walker:walk"} <= lines
    assert (
        "frame_stack:N: the last N observations stacked on a new first axis (FrameStackObservation)" in lines
    )


def test_minatar_frames_are_uint8_channels_last():
    spec = environment_spec(EnvConfig("gym", "MinAtar/Breakout-v1"))
    assert spec.obs_shape == (10, 10, 4) and spec.obs_dtype == np.uint8 and spec.num_actions == 3
    assert "minatar" in sys.modules


def test_the_documented_ten_line_environment_trains_by_its_import_path(tmp_path, monkeypatch):
    from pathlib import Path

    usage = (Path(__file__).resolve().parents[2] / "docs" / "usage.md").read_text()
    code = usage.split("```python\n# my_pkg/envs.py")[1].split("```")[0]
    package = tmp_path / "my_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "envs.py").write_text("# my_pkg/envs.py" + code)
    assert len([line for line in code.splitlines() if line.strip()]) <= 11
    monkeypatch.syspath_prepend(str(tmp_path))
    config = gym_config("my_pkg.envs:Corridor", max_episode_steps=50)
    spec = check_task(config)
    assert spec.discrete and spec.obs_shape == (1,)
    env = make_environment(config.env, seed=0)
    ts, steps = env.reset(), 0
    while not ts.last():
        ts, steps = env.step(np.int32(1)), steps + 1
    assert steps == 5 and ts.reward == 1.0 and ts.discount == 0.0
    monkeypatch.delitem(sys.modules, "my_pkg.envs")
    monkeypatch.delitem(sys.modules, "my_pkg")
