"""The learner settings ``actorq bench learner`` compares: variant syntax (``plain+onednn+intra=2``) and the config
each variant's worker runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from actorq.config import ConfigError, ExperimentConfig, replace

PLAIN = {
    "learner.onednn": False,
    "learner.jit_compile": False,
    "learner.jit_optimizer": False,
    "learner.einsum_dense": False,
    "learner.intra_op_threads": 0,
    "learner.inter_op_threads": 0,
    "learner.prefetch_size": 4,
    "learner.sample_parallelism": 2,
}
"""The learner as ActorQ ran it before these settings existed: TensorFlow's defaults, Acme's fused step."""

TOKENS = {
    "onednn": "learner.onednn",
    "xla": "learner.jit_compile",
    "xopt": "learner.jit_optimizer",
    "einsum": "learner.einsum_dense",
    "intra": "learner.intra_op_threads",
    "inter": "learner.inter_op_threads",
    "prefetch": "learner.prefetch_size",
    "parallel": "learner.sample_parallelism",
}
"""Variant syntax: ``config`` (the config's own learner settings) or ``plain`` (:data:`PLAIN`), then ``+``-joined
tokens applied on top: ``onednn``, ``xla`` (whole update), ``xopt`` (optimizer only), ``einsum`` (dense forward
as einsum) (on; ``=0`` off), ``intra=N``, ``inter=N``, ``prefetch=N``, ``parallel=N``; e.g.
``plain+onednn+intra=2``. A variant that does not start with ``config`` or ``plain`` starts from ``plain``."""


BOOL_TOKENS = ("onednn", "xla", "xopt", "einsum")
"""Tokens that switch a setting on (or off with ``=0``)."""


@dataclass(frozen=True)
class LearnerVariant:
    """A named set of ``learner.*`` overrides."""

    name: str
    changes: tuple[tuple[str, Any], ...]


def parse_variant(text: str) -> LearnerVariant:
    """``plain+onednn+intra=2`` -> its overrides (see :data:`TOKENS`); raises ConfigError on unknown tokens."""
    parts = [p.strip() for p in text.split("+") if p.strip()]
    if not parts:
        raise ConfigError(f"variant {text!r} is empty")
    changes: dict[str, Any] = {}
    if parts[0] == "config":
        parts = parts[1:]
    else:
        changes.update(PLAIN)
        if parts[0] == "plain":
            parts = parts[1:]
    for part in parts:
        key, eq, value = part.partition("=")
        if key not in TOKENS:
            raise ConfigError(
                f"variant {text!r}: unknown token {key!r}; use config or plain, then +-joined "
                f"{', '.join(k + ('' if k in BOOL_TOKENS else '=N') for k in TOKENS)}"
            )
        if key in BOOL_TOKENS:
            changes[TOKENS[key]] = value.lower() not in ("0", "false", "off") if eq else True
        else:
            try:
                changes[TOKENS[key]] = int(value)
            except ValueError:
                raise ConfigError(f"variant {text!r}: {key} needs a whole number, e.g. {key}=2") from None
    return LearnerVariant(text, tuple(changes.items()))


def bench_config(config: ExperimentConfig, variant: LearnerVariant | None = None) -> ExperimentConfig:
    """The config a bench worker runs: the variant's learner settings, no rate limiter, no checkpoints."""
    changes = dict(variant.changes) if variant else {}
    changes.update(
        {"replay.samples_per_insert": 0.0, "learner.checkpoint_period_s": 0.0, "learner.max_steps": 0}
    )
    return replace(config, **changes)
