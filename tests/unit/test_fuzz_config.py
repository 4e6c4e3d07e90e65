"""Fuzzing config loading: whatever a YAML file or mapping holds, the only error is ConfigError.

Three generators: arbitrary nested mappings (keys and values of any YAML type, including dates, sets and bytes that
``yaml.safe_load`` can produce), a valid config with one field replaced by an arbitrary value (so the cases reach
the type coercion and range validation instead of stopping at "unknown key"), and arbitrary file contents (YAML
text and raw bytes) through ``load_config`` with random overrides.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import typing
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from actorq import algorithms
from actorq.config import (
    COMM_BITS,
    LAUNCHERS,
    PRECISIONS,
    SUITES,
    ConfigError,
    ExperimentConfig,
    config_from_dict,
    load_config,
    to_dict,
)

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _paths(cls: type = ExperimentConfig, prefix: str = "") -> list[str]:
    """Every dotted field path of the config (``actor.precision``, ``seed``, ...)."""
    out = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            out += _paths(hints[f.name], prefix + f.name + ".")
        else:
            out.append(prefix + f.name)
    return out


# The algorithm's own section is typed by the algorithm (``settings: Any`` in ExperimentConfig): fuzzed through
# its YAML section, ``<algorithm>.<field>``, and checked against that algorithm's section dataclass.
PATHS = [p for p in _paths() if p != "settings"]
ALGORITHM_PATHS = [
    f"{name}.{f.name}"
    for name in algorithms.names()
    for f in dataclasses.fields(algorithms.get(name).section)
]
SECTIONS = sorted({p.split(".")[0] for p in PATHS + ALGORITHM_PATHS})
VALID = to_dict(ExperimentConfig())

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(
        ["fp32", "int8", "dqn", "d4pg", "gym", "dmc", "CartPole-v1", "cartpole:balance", "2x3", "1e9"]
    ),
    st.dates(),
    st.binary(max_size=8),
)
keys = st.one_of(
    st.sampled_from(SECTIONS + [p.rsplit(".", 1)[-1] for p in PATHS]), st.text(max_size=12), scalars
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.one_of(st.sampled_from(SECTIONS), st.text(max_size=8), st.integers()), inner, max_size=4
        ),
        st.frozensets(st.integers(), max_size=3),
    ),
    max_leaves=12,
)
overrides = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(PATHS + ALGORITHM_PATHS), st.text(max_size=12)).map("=".join),
        st.text(max_size=20),
    ),
    max_size=3,
)


# Counts that must be at least 1, checked here independently of validate(), so an accepted config is known sound.
COUNTS = (
    "actor.num_actors",
    "actor.envs_per_actor",
    "actor.update_period",
    "actor.threads",
    "learner.batch_size",
    "learner.publish_period",
    "replay.max_size",
    "replay.min_size",
    "replay.n_step",
    "evaluator.episodes",
)


def _get(config: ExperimentConfig, path: str):
    node = config
    for part in path.split("."):
        node = getattr(node, part)
    return node


def _has_type(value, hint) -> bool:
    if typing.get_origin(hint) is dict:  # env.make_kwargs: names to plain values
        return isinstance(value, dict) and all(isinstance(k, str) for k in value)
    if typing.get_origin(hint) is tuple:
        return isinstance(value, tuple) and all(_has_type(v, typing.get_args(hint)[0]) for v in value)
    if typing.get_args(hint):  # float | None
        return any(_has_type(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, float) and math.isfinite(value)
    return isinstance(value, hint) and (hint is bool or not isinstance(value, bool))


def _assert_sound(config: ExperimentConfig) -> None:
    """What an accepted config must be, whatever validate() does: typed, finite, in range, and it round-trips."""
    assert isinstance(config, ExperimentConfig)
    for path in PATHS:
        section, _, name = path.rpartition(".")
        owner = _get(config, section) if section else config
        hint = typing.get_type_hints(type(owner))[name]
        assert _has_type(_get(config, path), hint), f"accepted {path}={_get(config, path)!r}, not {hint}"
    assert (
        config.algorithm in algorithms.names() and config.env.suite in SUITES and config.launcher in LAUNCHERS
    )
    section = algorithms.get(config.algorithm).section
    assert isinstance(config.settings, section), (
        f"accepted settings {config.settings!r}, not {section.__name__}"
    )
    for name, hint in typing.get_type_hints(section).items():
        value = getattr(config.settings, name)
        assert _has_type(value, hint), f"accepted {config.algorithm}.{name}={value!r}, not {hint}"
    assert config.actor.precision in (*PRECISIONS, "auto")
    assert config.quantizer.comm_bits in (0, *COMM_BITS)
    for path in COUNTS:
        assert _get(config, path) >= 1, f"accepted {path}={_get(config, path)}"
    assert config.max_minutes >= 0 and config.max_actor_steps >= 0
    assert config_from_dict(to_dict(config)) == config


def _only_config_error(fn, *args) -> None:
    """``fn(*args)`` either raises ConfigError or returns a sound config (never any other error)."""
    try:
        result = fn(*args)
    except ConfigError:
        return
    _assert_sound(result)


@FUZZ
@given(data=st.dictionaries(keys, values, max_size=6), extra=overrides)
def test_arbitrary_mappings(data, extra):
    _only_config_error(config_from_dict, data, extra)


@FUZZ
@given(path=st.sampled_from(PATHS), value=values, extra=overrides)
# Always run: each of these must be refused, so a validate() that accepted everything fails here on every run.
@example(path="actor.num_actors", value=-1, extra=[])
@example(path="learner.batch_size", value=0, extra=[])
@example(path="actor.precision", value="int4", extra=[])
@example(path="launcher", value="cluster", extra=[])
@example(path="quantizer.comm_bits", value=3, extra=[])
@example(path="replay.discount", value=float("nan"), extra=[])
@example(path="max_minutes", value=-1.0, extra=[])
def test_valid_config_with_one_field_replaced(path, value, extra):
    data = yaml.safe_load(yaml.safe_dump(VALID))
    node = data
    for part in path.split(".")[:-1]:
        node = node[part]
    node[path.split(".")[-1]] = value
    _only_config_error(config_from_dict, data, extra)


@pytest.fixture(scope="module")
def config_file(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cfg") / "config.yaml"  # rewritten by every case


@FUZZ
@given(
    content=st.one_of(
        st.dictionaries(keys, values, max_size=5).map(lambda d: yaml.dump(d, allow_unicode=True)),
        st.text(max_size=200),
        st.binary(max_size=200),
        st.sampled_from([b"\xff\xfe\x00bad", b"a: [1, 2", b"!!python/object:os.system {}", b"- 1\n- 2", b""]),
    ),
    extra=overrides,
)
def test_arbitrary_files(config_file, content, extra):
    path: Path = config_file
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8", errors="surrogatepass")
    _only_config_error(load_config, path, extra)


def test_the_fuzzer_reaches_valid_configs_and_specific_errors():
    """Control: the same entry points accept a valid mapping and name the bad key of an invalid one."""
    assert config_from_dict(VALID, ["actor.num_actors=3"]).actor.num_actors == 3
    for data, needle in (
        ({"actor": {"num_actors": datetime.date(2020, 1, 1)}}, "actor.num_actors"),
        ({"replay": {"discount": float("nan")}}, "replay.discount"),
        ({"network": {"policy_layers": [{"a": 1}]}}, "network.policy_layers"),
    ):
        try:
            config_from_dict(data)
        except ConfigError as exc:
            assert needle in str(exc) or "date" in str(exc)
        else:
            raise AssertionError(f"{data} was accepted")
