"""Typed, frozen experiment configuration, loaded from YAML and overridable on the command line.

Every field carries a docstring (the string literal under it). ``load_config(path, overrides)`` reads a YAML file
whose keys are exactly these dataclass fields (nested sections for nested dataclasses), applies ``section.key=value``
overrides, validates, and returns an :class:`ExperimentConfig`. Unknown keys and invalid values raise
:class:`ConfigError` naming the key and listing what is allowed.

The choices and dataclasses are defined in :mod:`actorq.config.schema`; coercion, overrides and load/save in
:mod:`actorq.config.loading`; the checks in :mod:`actorq.config.validation`. Import from ``actorq.config``, which
re-exports them.

The algorithm's own settings are the section named after it, defined and checked by its package
(:mod:`actorq.algorithms`); the other sections are shared by every algorithm. Example YAML::

    algorithm: d4pg
    env: {suite: dmc, task: "cartpole:balance"}
    actor: {precision: int8, num_actors: 2}
    d4pg: {critic_lr: 3.0e-4}
"""

from actorq.config.loading import (
    ConfigError,
    apply_overrides,
    config_from_dict,
    flat_keys,
    load_config,
    parse_override,
    replace,
    save_config,
    schema_defaults,
    to_dict,
    validate,
)
from actorq.config.schema import (
    AUTO_COMM_BITS,
    BYTES_PER_WEIGHT,
    COMM_BITS,
    KERNELS,
    LAUNCHERS,
    PRECISIONS,
    SUITES,
    TRACKERS,
    ActorConfig,
    AffinityConfig,
    EnvConfig,
    EvaluatorConfig,
    ExperimentConfig,
    LearnerConfig,
    NetworkConfig,
    QuantizerConfig,
    RayConfig,
    ReplayConfig,
    TrackingConfig,
    error_buffer,
)

__all__ = [
    "AffinityConfig",
    "AUTO_COMM_BITS",
    "BYTES_PER_WEIGHT",
    "COMM_BITS",
    "KERNELS",
    "LAUNCHERS",
    "PRECISIONS",
    "SUITES",
    "TRACKERS",
    "TrackingConfig",
    "ActorConfig",
    "ConfigError",
    "flat_keys",
    "EnvConfig",
    "EvaluatorConfig",
    "error_buffer",
    "ExperimentConfig",
    "LearnerConfig",
    "NetworkConfig",
    "QuantizerConfig",
    "RayConfig",
    "ReplayConfig",
    "apply_overrides",
    "config_from_dict",
    "load_config",
    "parse_override",
    "replace",
    "save_config",
    "schema_defaults",
    "to_dict",
    "validate",
]
