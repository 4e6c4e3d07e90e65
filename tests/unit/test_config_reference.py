"""docs/config.md is the schema's own reference (current, every key valid), and ``actorq config`` prints a config
as a run resolves it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from actorq import algorithms
from actorq.cli import main
from actorq.config import config_from_dict, flat_keys, load_config, to_dict
from actorq.config.reference import render, sections

ROOT = Path(__file__).resolve().parents[2]
BASE = {"gym": {"suite": "gym", "task": "CartPole-v1"}, "dmc": {"suite": "dmc", "task": "cartpole:balance"}}


def test_the_page_is_current():
    assert (ROOT / "docs" / "config.md").read_text() == render(), (
        "docs/config.md is stale: run `python -m actorq.config.reference docs/config.md`"
    )


def test_every_listed_key_is_valid_with_its_default():
    for _title, _intro, keys in sections():
        for key in keys:
            section = key.name.split(".")[0]
            algorithm = section if section in algorithms.names() else "d4pg"  # the schema defaults are d4pg's
            env = BASE["gym" if algorithms.get(algorithm).discrete else "dmc"]
            override = f"{key.name}={yaml.safe_dump(key.default, default_flow_style=True).strip().removesuffix('...').strip()}"
            config = config_from_dict({"algorithm": algorithm, "env": env}, [override])
            assert config is not None, override


def test_every_schema_key_is_listed():
    listed = {key.name for _t, _i, keys in sections() for key in keys}
    for name in algorithms.names():
        env = BASE["gym" if algorithms.get(name).discrete else "dmc"]
        flat = flat_keys(to_dict(config_from_dict({"algorithm": name, "env": env})))
        assert set(flat) <= listed, sorted(set(flat) - listed)


def test_config_prints_the_resolved_config(capsys):
    path = ROOT / "configs" / "dqn" / "gym_cartpole.yaml"
    assert main(["config", str(path), "actor.num_actors=3"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert config_from_dict(printed) == load_config(path, ["actor.num_actors=3"])
    assert printed["actor"]["num_actors"] == 3 and "tracking" in printed and "dqn" in printed


@pytest.mark.parametrize(
    "argv", [["config", "--defaults", "algorithm=ddpg"], ["config", "CFG", "--defaults"]]
)
def test_config_defaults(capsys, argv):
    argv = [a.replace("CFG", str(ROOT / "configs" / "ddpg" / "gym_pendulum.yaml")) for a in argv]
    assert main(argv) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["algorithm"] == "ddpg" and printed["ddpg"] == to_dict(algorithms.get("ddpg").section())


def test_config_of_a_missing_file_or_a_typo_is_one_error_line(capsys):
    assert main(["config", "nope.yaml"]) == 2
    assert main(["config", str(ROOT / "configs/dqn/gym_cartpole.yaml"), "actor.precison=int8"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error:") and "did you mean actor.precision?" in err[-1]
