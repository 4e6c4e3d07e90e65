"""``actorq train``'s convenience flags come from the config dataclasses (actorq/config/flags.py): each names a
real config key, takes the field's type, shows the field's docstring as help, and sets exactly its key."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from actorq.config import ExperimentConfig
from actorq.config.flags import ConfigFlag, add_config_flags, field_docs, flag_overrides, resolve_key
from actorq.launchers.train import TRAIN_FLAGS, add_arguments

# The flag names users and the README already type: generating them must keep every one.
EXISTING = {
    "--precision": "actor.precision",
    "--comm-bits": "quantizer.comm_bits",
    "--actors": "actor.num_actors",
    "--launcher": "launcher",
    "--max-minutes": "max_minutes",
    "--max-actor-steps": "max_actor_steps",
    "--target-return": "target_return",
    "--seed": "seed",
    "--ray-address": "ray.address",
    "--ray-bind": "ray.bind",
    "--ray-connect-timeout-s": "ray.connect_timeout_s",
    "--track": "tracking.backend",
}


def _parser() -> argparse.ArgumentParser:
    return add_arguments(argparse.ArgumentParser())


def test_the_existing_flags_map_to_their_keys() -> None:
    assert {f.flag: f.key for f in TRAIN_FLAGS} == EXISTING


def test_every_config_field_has_a_docstring() -> None:
    def walk(cls: type) -> list[str]:
        docs, missing = field_docs(cls), []
        for field in dataclasses.fields(cls):
            missing += [] if field.name in docs else [f"{cls.__name__}.{field.name}"]
            if dataclasses.is_dataclass(field.default_factory if callable(field.default_factory) else None):
                missing += walk(field.default_factory)
        return missing

    assert walk(ExperimentConfig) == []


@pytest.mark.parametrize("item", TRAIN_FLAGS, ids=lambda f: f.flag)
def test_help_is_the_field_docstring(item: ConfigFlag) -> None:
    cls, field, _ = resolve_key(item.key)
    action = next(a for a in _parser()._actions if item.flag in a.option_strings)
    assert action.help == f"{field_docs(cls)[field.name]} ({item.key})".replace("%", "%%")
    assert action.default is None  # the config file's value stands unless the flag is given


def test_flags_set_their_keys_with_the_field_types() -> None:
    args = _parser().parse_args(
        [
            "c.yaml",
            "--actors",
            "3",
            "--seed",
            "5",
            "--max-minutes",
            "1.5",
            "--target-return",
            "195",
            "--precision",
            "fp16",
        ]
    )
    assert flag_overrides(args, TRAIN_FLAGS) == {
        "actor.num_actors": 3,
        "seed": 5,
        "max_minutes": 1.5,
        "target_return": 195.0,
        "actor.precision": "fp16",
    }
    assert flag_overrides(_parser().parse_args(["c.yaml"]), TRAIN_FLAGS) == {}


def test_a_wrong_type_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        _parser().parse_args(["c.yaml", "--actors", "two"])
    assert exit_.value.code == 2 and "--actors: invalid int value: 'two'" in capsys.readouterr().err


def test_a_key_the_schema_lacks_fails_when_the_parser_is_built() -> None:
    with pytest.raises(KeyError, match=r"'actor.num_actor'.*ActorConfig has no field 'num_actor'"):
        add_config_flags(argparse.ArgumentParser(), [ConfigFlag("--actors", "actor.num_actor")])
    with pytest.raises(TypeError, match="section.key=value"):
        add_config_flags(argparse.ArgumentParser(), [ConfigFlag("--layers", "network.policy_layers")])
