"""Loading a config: YAML and ``section.key=value`` overrides coerced to the schema's types, then validated.

Unknown keys and invalid values raise :class:`ConfigError` naming the key and listing what is allowed; the
dataclasses and choices checked against are :mod:`actorq.config.schema`.
"""

from __future__ import annotations

import dataclasses
import difflib
import ipaddress
import json
import math
import re
import types
import typing
from pathlib import Path
from typing import Any

import yaml

from actorq import algorithms
from actorq.algorithms.torso import TORSOS
from actorq.config.schema import (
    COMM_BITS,
    KERNELS,
    LAUNCHERS,
    PRECISIONS,
    SUITES,
    TRACKERS,
    ExperimentConfig,
)
from actorq.config.shards import check_shards
from actorq.errors import UsageError
from actorq.status import ROLE_NAMES


class ConfigError(UsageError):
    """A configuration file or override is invalid; the message says which key and what is allowed."""


def _field_types(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Convert a YAML/CLI value to the annotated type, or raise ConfigError naming the key."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(value, inner[0], key)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping of {tp.__name__} fields, got {value!r}")
        return _build(tp, value, prefix=key + ".")
    if origin is dict:
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise ConfigError(f"{key}: expected a mapping of names to values, got {value!r}")
        return dict(value)
    if origin is tuple:
        if isinstance(value, str):  # "256x256" or "256,256" for widths; "a,b" for names
            value = [v.strip() for v in (value.replace("x", ",") if args[0] is int else value).split(",")]
            value = [v for v in value if v]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        return tuple(_coerce(v, args[0], key) for v in value)
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "1", "yes", "on", "false", "0", "no", "off"):
            return value.lower() in ("true", "1", "yes", "on")
        raise ConfigError(f"{key}: expected true/false, got {value!r}")
    if tp in (int, float):
        if isinstance(value, bool):
            raise ConfigError(f"{key}: expected a number, got {value!r}")
        try:
            number = float(value) if tp is float else int(str(value).replace("_", ""))
        except (TypeError, ValueError):
            raise ConfigError(f"{key}: expected {tp.__name__}, got {value!r}") from None
        return number
    if tp is str:
        if not isinstance(value, (str, int, float)):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        return str(value)
    return value


def _build(cls: type, data: dict[str, Any], prefix: str = "", own_section: str = "") -> Any:
    """``cls`` from a mapping of its fields; at the top (``own_section``: the algorithm's section name, read apart)
    the algorithm's ``settings`` field is not a YAML key and its section is."""
    ftypes = _field_types(cls)
    valid = set(ftypes) - {"settings"} | {own_section} if own_section else set(ftypes)
    unknown = sorted(set(data) - valid)
    if unknown:
        raise ConfigError(
            "; ".join(f"unknown config key {prefix}{k}{did_you_mean(k, valid, prefix)}" for k in unknown)
            + f"; valid keys{' under ' + prefix.rstrip('.') if prefix else ''}: {', '.join(sorted(valid))}"
        )
    return cls(**{k: _coerce(v, ftypes[k], prefix + k) for k, v in data.items()})


def did_you_mean(key: str, valid: set[str], prefix: str = "") -> str:
    """`` (did you mean X?)`` for the valid key closest to a mistyped one, or nothing when none is close."""
    close = difflib.get_close_matches(key, sorted(valid), n=1, cutoff=0.6)
    return f" (did you mean {prefix}{close[0]}?)" if close else ""


def to_dict(config: Any) -> dict[str, Any]:
    """Plain-dict (JSON/YAML-serialisable) form of a config dataclass; an experiment config's algorithm settings go
    under the algorithm's name, as :func:`config_from_dict` reads them."""
    out = dataclasses.asdict(config)
    if isinstance(config, ExperimentConfig):
        out[config.algorithm] = out.pop("settings")

    def fix(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: fix(v) for k, v in x.items()}
        if isinstance(x, tuple):
            return [fix(v) for v in x]
        return x

    return fix(out)


def parse_override(text: str) -> tuple[list[str], Any]:
    """Split ``section.key=value`` into a key path and a YAML-parsed value."""
    if "=" not in text:
        raise ConfigError(f"override {text!r} is not of the form section.key=value (e.g. actor.num_actors=4)")
    key, raw = text.split("=", 1)
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.strip().split("."), value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``section.key=value`` overrides to a raw config mapping (returns a new mapping)."""
    try:  # a deep copy that also rejects what YAML allows but a config can't hold (dates, sets, bytes)
        data = json.loads(json.dumps(data))
    except (TypeError, ValueError, RecursionError) as exc:
        raise ConfigError(f"config values must be numbers, strings, lists or mappings: {exc}") from None
    for text in overrides:
        path, value = parse_override(text)
        node = data
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {text!r}: {part} is not a section")
        node[path[-1]] = value
    return data


def validate(config: ExperimentConfig) -> ExperimentConfig:
    """Check value ranges and choices; raise ConfigError with the allowed values."""

    def choice(key: str, value: Any, allowed: tuple) -> None:
        if value not in allowed:
            raise ConfigError(f"{key}={value!r} is not valid; choose one of: {', '.join(map(str, allowed))}")

    def positive(key: str, value: float, allow_zero: bool = False) -> None:
        if value < 0 or (value == 0 and not allow_zero):
            raise ConfigError(f"{key}={value!r} must be {'>= 0' if allow_zero else '> 0'}")

    _check_finite(config)
    choice("algorithm", config.algorithm, algorithms.names())
    config = _validate_settings(config)
    choice("env.suite", config.env.suite, SUITES)
    choice("actor.precision", config.actor.precision, (*PRECISIONS, "auto"))
    if config.actor.precision == "auto":
        choice("actor.kernel", config.actor.kernel or "auto", ("auto",))
    else:
        choice(
            f"actor.kernel (precision {config.actor.precision})",
            config.actor.kernel or "auto",
            ("auto", *KERNELS[config.actor.precision]),
        )
    choice("launcher", config.launcher, LAUNCHERS)
    if config.quantizer.comm_bits != 0:
        choice("quantizer.comm_bits", config.quantizer.comm_bits, COMM_BITS)
    _check_dmc_actions(config)
    positive("actor.num_actors", config.actor.num_actors)
    positive("actor.envs_per_actor", config.actor.envs_per_actor)
    positive("actor.update_period", config.actor.update_period)
    positive("actor.threads", config.actor.threads)
    positive("learner.batch_size", config.learner.batch_size)
    positive("learner.publish_period", config.learner.publish_period)
    positive("learner.intra_op_threads", config.learner.intra_op_threads, allow_zero=True)
    positive("learner.inter_op_threads", config.learner.inter_op_threads, allow_zero=True)
    positive("learner.prefetch_size", config.learner.prefetch_size)
    positive("learner.sample_parallelism", config.learner.sample_parallelism)
    positive("replay.max_size", config.replay.max_size)
    positive("replay.min_size", config.replay.min_size)
    positive("replay.n_step", config.replay.n_step)
    positive("replay.samples_per_insert", config.replay.samples_per_insert, allow_zero=True)
    positive("max_minutes", config.max_minutes, allow_zero=True)
    positive("max_actor_steps", config.max_actor_steps, allow_zero=True)
    for key, (value, allow_zero) in {
        "learner.target_update_period": (config.learner.target_update_period, False),
        "learner.checkpoint_period_s": (config.learner.checkpoint_period_s, True),
        "learner.max_steps": (config.learner.max_steps, True),
        "evaluator.period_s": (config.evaluator.period_s, False),
        "evaluator.episodes": (config.evaluator.episodes, False),
        "quantizer.poll_interval_s": (config.quantizer.poll_interval_s, False),
        "replay.rate_limiter_timeout_s": (config.replay.rate_limiter_timeout_s, False),
        "replay.error_buffer": (config.replay.error_buffer, True),
        "replay.priority_exponent": (config.replay.priority_exponent, True),
        "env.max_episode_steps": (config.env.max_episode_steps, True),
        "log_period_s": (config.log_period_s, False),
        "seed": (config.seed, True),
    }.items():
        positive(key, value, allow_zero)
    if not 0 <= config.replay.port <= 65535:
        raise ConfigError(
            f"replay.port={config.replay.port} must be 0 (pick a free one) or a port up to 65535"
        )
    choice("network.torso", config.network.torso, TORSOS)
    supported = algorithms.get(config.algorithm).torsos
    if config.network.torso not in ("auto", *supported):
        raise ConfigError(
            f"network.torso={config.network.torso}: algorithm {config.algorithm} has no such torso (it has: "
            f"{', '.join(supported)}); use network.torso=auto or {supported[0]}"
        )
    widths = config.network.policy_layers
    if not widths or any(w <= 0 for w in widths):
        raise ConfigError(f"network.policy_layers={list(widths)} must be a non-empty list of positive widths")
    if not 0 < config.replay.discount <= 1:
        raise ConfigError(f"replay.discount={config.replay.discount} must be in (0, 1]")
    if config.replay.min_size > config.replay.max_size:
        raise ConfigError("replay.min_size must not exceed replay.max_size")
    _validate_ray(config)
    if config.tracking.backend:
        choice("tracking.backend", config.tracking.backend, TRACKERS)
    try:
        check_shards(config)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    for role in ROLE_NAMES:
        cpus = getattr(config.affinity, role)
        if any(c < 0 for c in cpus) or len(set(cpus)) != len(cpus):
            raise ConfigError(
                f"affinity.{role}={list(cpus)} must list distinct CPU numbers >= 0 (empty: any)"
            )
    return config


def _validate_settings(config: ExperimentConfig) -> ExperimentConfig:
    """The algorithm's own section: its type (its defaults when the config has none) and its own checks."""
    algo = algorithms.get(config.algorithm)
    if config.settings is None:
        config = dataclasses.replace(config, settings=algo.section())
    try:
        algo.validate(algo.settings(config))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return config


def _validate_ray(config: ExperimentConfig) -> None:
    """The ``ray`` section: resource names Ray accepts, non-negative counts, an address of the forms Ray joins."""
    ray = config.ray
    if ray.learner_gpus < 0:
        raise ConfigError(f"ray.learner_gpus={ray.learner_gpus!r} must be >= 0 (0: the learner runs on CPU)")
    if ray.max_restarts < 0:
        raise ConfigError(f"ray.max_restarts={ray.max_restarts!r} must be >= 0")
    for key, name in (
        ("ray.learner_resource", ray.learner_resource),
        ("ray.actor_resource", ray.actor_resource),
        ("ray.replay_resource", ray.replay_resource),
    ):
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", name) or name in _RAY_BUILTIN_RESOURCES:
            raise ConfigError(
                f"{key}={name!r} must be a custom resource name (letters, digits, _ . -; not "
                f"{', '.join(_RAY_BUILTIN_RESOURCES)}), e.g. learner_host"
            )
    if ray.learner_resource == ray.actor_resource:
        raise ConfigError(
            f"ray.learner_resource and ray.actor_resource are both {ray.learner_resource!r}: name two resources"
        )
    if ray.replay_resource in (ray.learner_resource, ray.actor_resource):
        raise ConfigError(
            f"ray.replay_resource={ray.replay_resource!r} is also the learner's or the actors' resource: name "
            "another (e.g. replay_host)"
        )
    address = ray.address.strip()
    if address and address != "auto" and not re.fullmatch(r"[A-Za-z0-9_.\-\[\]:]+:\d{1,5}", address):
        raise ConfigError(
            f"ray.address={ray.address!r} is not a Ray address: give HOST:PORT of the head's GCS (e.g. "
            "10.0.0.5:6379; Ray Client's ray:// is not supported), auto, or leave it empty to start a local cluster"
        )
    try:
        bind = ipaddress.ip_address(ray.bind)
    except ValueError:
        raise ConfigError(
            f"ray.bind={ray.bind!r} is not an IP address: give one of this host's addresses (127.0.0.1 keeps a "
            "local cluster on this box)"
        ) from None
    if bind.is_unspecified:
        raise ConfigError(
            f"ray.bind={ray.bind!r} means every interface, and Ray 2.48 has no authentication: give one of this "
            "host's addresses (127.0.0.1 keeps a local cluster on this box)"
        )
    if not 0 < ray.connect_timeout_s <= MAX_RAY_CONNECT_TIMEOUT_S:
        raise ConfigError(
            f"ray.connect_timeout_s={ray.connect_timeout_s!r} must be > 0 and <= {MAX_RAY_CONNECT_TIMEOUT_S:g} "
            "seconds (default 15)"
        )


MAX_RAY_CONNECT_TIMEOUT_S = 600.0
"""Longest ``ray.connect_timeout_s``: a head that has not answered in ten minutes is not coming."""
_RAY_BUILTIN_RESOURCES = ("CPU", "GPU", "memory", "object_store_memory")


def _check_finite(config: Any, prefix: str = "") -> None:
    """Every float field (nested sections included) must be a finite number: NaN or inf is never a setting."""
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            _check_finite(value, f"{prefix}{f.name}.")
        elif isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{prefix}{f.name}={value!r} must be a finite number")


def _check_dmc_actions(config: ExperimentConfig) -> None:
    """dm_control's tasks all take bounded continuous actions, known without making one (a Gymnasium task's spaces
    are read when the launching process makes it once: ``actorq.envs.check_task``)."""
    if config.env.suite != "dmc":
        return
    if config.env.make_kwargs or config.env.wrappers:
        raise ConfigError(
            "env.make_kwargs and env.wrappers are Gymnasium's: leave them out with env.suite=dmc"
        )
    if algorithms.get(config.algorithm).discrete:
        fitting = [n for n in algorithms.names() if not algorithms.get(n).discrete]
        raise ConfigError(
            f"env.suite=dmc tasks take continuous (bounded Box) actions and algorithm {config.algorithm} learns "
            f"discrete ones: use algorithm: {' or '.join(fitting)}"
        )


def _migrate_legacy_keys(data: dict[str, Any], name: str) -> dict[str, Any]:
    """Move settings that configs kept in shared sections before algorithms had their own (``learner.policy_lr``)
    into the algorithm's section (``d4pg.policy_lr``), so recorded runs' ``config.yaml`` load; other algorithms'
    such keys (an old config wrote every field) are dropped. Any algorithm's ``legacy_keys`` say which."""
    legacy = {
        key: (n, algorithms.get(n).legacy_keys[key])
        for n in algorithms.names()
        for key in algorithms.get(n).legacy_keys
    }
    for key, (owner, field_name) in legacy.items():
        section, _, leaf = key.partition(".")
        node = data.get(section)
        if not isinstance(node, dict) or leaf not in node:
            continue
        value = node.pop(leaf)
        if owner == name:
            own = data.setdefault(name, {})
            if isinstance(own, dict):
                own.setdefault(field_name, value)
    return data


def _build_experiment(data: dict[str, Any]) -> ExperimentConfig:
    """An :class:`ExperimentConfig` from a raw mapping whose algorithm's section is under the algorithm's name."""
    data = dict(data)
    name = data.get("algorithm", ExperimentConfig.algorithm)
    if not isinstance(name, str) or name not in algorithms.names():
        raise ConfigError(f"algorithm={name!r} is not valid; choose one of: {', '.join(algorithms.names())}")
    if "settings" in data:
        raise ConfigError(f"the algorithm's settings go under its name ({name}: ...), not under settings")
    algo = algorithms.get(name)
    data = _migrate_legacy_keys(data, name)
    section = data.pop(name, None)
    settings = algo.section() if section is None else _coerce(section, algo.section, name)
    others = [n for n in algorithms.names() if n in data]
    if others:  # another algorithm's section would only be reported as unknown: say whose it is
        raise ConfigError(
            f"section {others[0]}: holds {others[0]}'s settings, but the algorithm is {name}: set "
            f"algorithm: {others[0]}, or put {name}'s settings under {name}:"
        )
    return dataclasses.replace(_build(ExperimentConfig, data, own_section=name), settings=settings)


def schema_defaults(algorithm: str) -> dict[str, Any]:
    """The plain-dict form of every field's default for ``algorithm`` (its own section included), unvalidated.

    What a run made before a field existed ran with, given that a new field's default keeps the behaviour from before
    it (as ``evaluator.each_version_once``'s and ``evaluator.evaluate_quantized``'s do): the report fills a key an
    older record lacks with it rather than calling the runs different.

    Raises:
        ConfigError: ``algorithm`` is not a registered algorithm.
    """
    return to_dict(_build_experiment({"algorithm": algorithm}))


def config_from_dict(data: dict[str, Any], overrides: list[str] | None = None) -> ExperimentConfig:
    """Build and validate a config from a raw mapping plus overrides."""
    if not isinstance(data, dict):
        raise ConfigError(f"a config must be a mapping of keys to values, got {type(data).__name__}")
    data = apply_overrides(data, overrides or [])
    return validate(_build_experiment(data))


def load_config(path: str | Path, overrides: list[str] | None = None) -> ExperimentConfig:
    """Load a YAML config file, apply ``section.key=value`` overrides, validate.

    Raises:
        ConfigError: missing file, bad YAML, unknown keys, wrong types or out-of-range values.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} not found; the shipped configs are under configs/<algo>/")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read: {exc}") from None
    try:
        return config_from_dict(data, overrides)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def replace(config: Any, **changes: Any) -> Any:
    """``dataclasses.replace`` that accepts dotted keys (``replace(cfg, **{"actor.precision": "fp16"})``)."""
    nested: dict[str, dict[str, Any]] = {}
    flat: dict[str, Any] = {}
    for key, value in changes.items():
        head, _, rest = key.partition(".")
        if rest:
            nested.setdefault(head, {})[rest] = value
        else:
            flat[key] = value
    for head, sub in nested.items():
        flat[head] = replace(getattr(config, head), **sub)
    return (
        validate(dataclasses.replace(config, **flat))
        if isinstance(config, ExperimentConfig)
        else (dataclasses.replace(config, **flat))
    )


def save_config(config: ExperimentConfig, path: str | Path) -> None:
    """Write the resolved config as YAML (every run directory gets one)."""
    Path(path).write_text(yaml.safe_dump(to_dict(config), sort_keys=False))
