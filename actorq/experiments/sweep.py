"""``actorq experiment --sweep KEY=V1,V2``: config values an experiment crosses with its precisions and seeds.

Each ``--sweep`` names one config key (``section.key`` as in overrides) and its values; several ``--sweep`` options
make their product. Every key and every value is checked against the config before any run starts (a sweep that
fails on its fifth hour is worse than one refused at once). A run's name carries its cell readably,
``<precision>-<key>=<value>-s<seed>`` (e.g. ``int8-replay.samples_per_insert=8-s0``), so values are restricted to
characters that are safe in a directory name.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

from actorq.config import ConfigError, ExperimentConfig, load_config
from actorq.experiments.orchestration import Sweep

PLANNED_KEYS = {
    "actor.precision": "--precisions",
    "seed": "--seeds / --first-seed",
    "max_minutes": "--max-minutes",
    "max_actor_steps": "--max-actor-steps",
    "actor.num_actors": "--actors",
}
"""Keys the plan itself sets, with the option to use instead of sweeping them."""
VALUE_PATTERN = re.compile(r"^[A-Za-z0-9_.+-]+$")
"""What a sweep value may contain: it becomes part of a run directory's name."""


def parse_sweep(text: str) -> tuple[str, list[str]]:
    """``"replay.samples_per_insert=1,8"`` -> ``("replay.samples_per_insert", ["1", "8"])``.

    Raises:
        ConfigError: Not ``KEY=V1[,V2...]``, a value twice, a value with characters a directory name can't hold,
            or a key the plan sets itself.
    """
    key, sep, raw = text.partition("=")
    key = key.strip()
    values = [v.strip() for v in raw.split(",") if v.strip()]
    if not sep or not key or not values:
        raise ConfigError(f"--sweep {text!r}: expected KEY=V1,V2,... (e.g. replay.samples_per_insert=1,8)")
    if key in PLANNED_KEYS:
        raise ConfigError(f"--sweep {text!r}: {key} is set by the plan; use {PLANNED_KEYS[key]} instead")
    bad = [v for v in values if not VALUE_PATTERN.match(v)]
    if bad:
        raise ConfigError(
            f"--sweep {text!r}: value(s) {', '.join(map(repr, bad))} may only use letters, digits and . _ + - "
            "(they become part of each run's directory name)"
        )
    if len(set(values)) != len(values):
        raise ConfigError(f"--sweep {text!r} names a value twice")
    return key, values


def plan_sweeps(config_path: str | Path, overrides: list[str], sweeps: list[str]) -> list[Sweep]:
    """The sweep cells (product of every ``--sweep``), each checked by loading the config with it.

    Returns ``[()]`` without sweeps (one cell: the config as it is).

    Raises:
        ConfigError: A malformed ``--sweep``, a key swept twice or also given as an override, an unknown key or a
            value the config rejects (the message names the key and value).
    """
    parsed = [parse_sweep(text) for text in sweeps]
    keys = [key for key, _ in parsed]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise ConfigError(f"--sweep {', '.join(twice)} given more than once: give all values in one --sweep")
    fixed = {o.partition("=")[0].strip() for o in overrides}
    clash = sorted(set(keys) & fixed)
    if clash:
        raise ConfigError(f"{', '.join(clash)} is both swept and overridden: drop the override or the sweep")
    for key, values in parsed:
        for value in values:  # one key at a time names the culprit; the product is checked below
            _load(config_path, overrides, [f"{key}={value}"])
    cells: list[Sweep] = [
        tuple(zip(keys, combo, strict=True)) for combo in itertools.product(*(v for _, v in parsed))
    ]
    for cell in cells if len(parsed) > 1 else []:  # keys can constrain each other (e.g. min_size vs buffer)
        _load(config_path, overrides, [f"{k}={v}" for k, v in cell])
    return cells


def _load(config_path: str | Path, overrides: list[str], extra: list[str]) -> ExperimentConfig:
    try:
        return load_config(config_path, [*overrides, *extra])
    except ConfigError as exc:
        raise ConfigError(f"--sweep {' '.join(extra)}: {exc}") from None
