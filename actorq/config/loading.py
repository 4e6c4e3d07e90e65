"""Loading a config: YAML and ``section.key=value`` overrides coerced to the schema's types, then validated.

Unknown keys and invalid values raise :class:`ConfigError` naming the key and listing what is allowed; the
dataclasses and choices checked against are :mod:`actorq.config.schema`.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from actorq import algorithms
from actorq.config.errors import ConfigError
from actorq.config.schema import (
    ExperimentConfig,
)
from actorq.config.validation import validate


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


def flat_keys(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested mapping (a config's :func:`to_dict`, a run summary) as one level of ``section.key`` keys, the form
    overrides use: what config comparisons, trackers' parameters and the report's config differences read."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, Mapping):
            out.update(flat_keys(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


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
