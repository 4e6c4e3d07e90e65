from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from actorq.config import (
    ConfigError,
    ExperimentConfig,
    config_from_dict,
    load_config,
    replace,
    save_config,
    to_dict,
)

# configs/<algo>/*.yaml; configs/experiments/ holds grid files (`actorq grid`, tests/unit/launchers/test_grid.py).
CONFIGS = [
    p
    for p in sorted(Path(__file__).resolve().parents[2].glob("configs/*/*.yaml"))
    if p.parent.name != "experiments"
]


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_shipped_configs_load(path):
    config = load_config(path)
    assert config.paper, f"{path} should say what the paper used"
    # configs/<algo>/<suite or game family>_<task>.yaml
    assert (
        path.name.startswith(("dmc_", "gym_", "atari_", "minatar_")) and path.parent.name == config.algorithm
    )


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_shipped_configs_tasks_are_made_and_their_spaces_fit_their_algorithm(path):
    from actorq.envs import check_task

    spec = check_task(load_config(path))
    frames = path.name.startswith(("atari_", "minatar_"))
    assert (spec.obs_dtype == np.uint8) == frames and (len(spec.obs_shape) == 3) == frames


def test_unknown_key_is_an_error_naming_valid_keys():
    with pytest.raises(ConfigError, match=r"unknown config key\(s\) actor.precison.*valid keys under actor"):
        config_from_dict({"actor": {"precison": "int8"}})


def test_bad_values_name_the_choices():
    with pytest.raises(ConfigError, match="actor.precision='int4'.*fp32, fp16, int8"):
        config_from_dict({"actor": {"precision": "int4"}})
    with pytest.raises(ConfigError, match="quantizer.comm_bits=3"):
        config_from_dict({"quantizer": {"comm_bits": 3}})
    with pytest.raises(ConfigError, match="expected int"):
        config_from_dict({"actor": {"num_actors": "many"}})
    with pytest.raises(ConfigError, match="must be > 0"):
        config_from_dict({"actor": {"num_actors": 0}})
    with pytest.raises(ConfigError, match="continuous .* actions and algorithm dqn learns discrete"):
        config_from_dict({"algorithm": "dqn", "env": {"suite": "dmc", "task": "cartpole:balance"}})
    with pytest.raises(ConfigError, match="env.make_kwargs: expected a mapping"):
        config_from_dict({"env": {"suite": "gym", "task": "CartPole-v1", "make_kwargs": [1]}})
    with pytest.raises(ConfigError, match="env.make_kwargs and env.wrappers are Gymnasium's"):
        config_from_dict({"env": {"suite": "dmc", "wrappers": ["flatten"]}})


def test_env_make_kwargs_and_wrappers_load_from_yaml_and_overrides(tmp_path):
    config = config_from_dict(
        {"algorithm": "dqn", "env": {"suite": "gym", "task": "MinAtar/Breakout-v1"}},
        ["env.make_kwargs.sticky_action_prob=0.0", "env.wrappers=frame_stack:2,resize:84x84"],
    )
    assert config.env.make_kwargs == {"sticky_action_prob": 0.0}
    assert config.env.wrappers == (
        "frame_stack:2",
        "resize:84x84",
    )  # names are not split on "x" as widths are
    path = tmp_path / "c.yaml"
    save_config(config, path)
    assert load_config(path) == config


def test_overrides_and_round_trip(tmp_path):
    config = config_from_dict(
        {}, ["actor.num_actors=3", "network.policy_layers=[64,64]", "target_return=900"]
    )
    assert config.actor.num_actors == 3 and config.network.policy_layers == (64, 64)
    assert config.target_return == 900.0
    path = tmp_path / "c.yaml"
    save_config(config, path)
    assert load_config(path) == config
    assert yaml.safe_load(path.read_text())["actor"]["num_actors"] == 3


def test_override_syntax_error():
    with pytest.raises(ConfigError, match="section.key=value"):
        config_from_dict({}, ["actor.num_actors"])


def test_replace_dotted_and_comm_bits_auto():
    config = ExperimentConfig()
    assert config.comm_bits == 8  # int8 actors default to 8-bit messages
    fp32 = replace(config, **{"actor.precision": "fp32"})
    assert fp32.comm_bits == 32 and fp32.actor.num_actors == config.actor.num_actors
    assert replace(config, **{"quantizer.comm_bits": 4}).comm_bits == 4
    assert to_dict(config)["network"]["policy_layers"] == [2048, 2048, 2048]


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("actor: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("max_minutes=nan", "max_minutes"),
        ("target_return=inf", "target_return"),
        ("d4pg.policy_lr=-1", "d4pg.policy_lr"),
        ("evaluator.period_s=-5", "evaluator.period_s"),
        ("learner.target_update_period=0", "learner.target_update_period"),
        ("evaluator.episodes=0", "evaluator.episodes"),
        ("d4pg.critic_layers=[]", "d4pg.critic_layers"),
        ("d4pg.num_atoms=1", "d4pg.num_atoms"),
        ("d4pg.vmin=200", "d4pg.vmin"),
        ("d4pg.sigma_max=-0.1", "d4pg.sigma_max"),
        ("replay.port=70000", "replay.port"),
        ("actor.kernel=bogus", "actor.kernel"),
    ],
)
def test_out_of_range_values_are_refused_naming_the_key(override, key):
    with pytest.raises(ConfigError, match=re.escape(key)):
        load_config("configs/d4pg/dmc_cartpole_balance.yaml", [override])
