"""Validating a built config: value ranges, choices, the algorithm's own section, the ``ray`` section, affinity.

Every check raises :class:`~actorq.config.errors.ConfigError` naming the key and what is allowed, before any process
starts (:func:`validate` is the last step of :func:`actorq.config.load_config`).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
import re
from typing import Any

from actorq import algorithms
from actorq.algorithms.torso import TORSOS
from actorq.config.errors import ConfigError
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
from actorq.status import ROLE_NAMES


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
