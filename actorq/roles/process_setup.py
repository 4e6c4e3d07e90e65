"""What a role's own process sets before TensorFlow or torch load: its CPU cores and the learner's TF environment
(both are process-wide, so a role sharing its process, in-process, sets neither)."""

from __future__ import annotations

import logging
import os

from actorq.config import ExperimentConfig
from actorq.config.shards import shard_cpus
from actorq.errors import ActorQError
from actorq.usage import CHILD_ENV

log = logging.getLogger(__name__)

ONEDNN_ENV = "TF_ENABLE_ONEDNN_OPTS"
"""TensorFlow reads this once, when it loads: oneDNN's CPU kernels on (1) or off (0)."""


def learner_environment(config: ExperimentConfig) -> dict[str, str]:
    """Environment variables the learner's process needs before TensorFlow loads (``learner.onednn``)."""
    return {ONEDNN_ENV: "1" if config.learner.onednn else "0"}


def apply_learner_environment(config: ExperimentConfig) -> None:
    """Set :func:`learner_environment` in this process; warn when TensorFlow is already loaded (too late)."""
    import sys

    wanted = learner_environment(config)
    stale = {k: v for k, v in wanted.items() if os.environ.get(k) != v}
    os.environ.update(wanted)
    if stale and "tensorflow" in sys.modules:
        log.warning(
            "TensorFlow was loaded before the learner's settings %s: they do not apply in this process "
            "(start the learner in its own process, e.g. the local launcher or `actorq role learner`)",
            stale,
        )


class AffinityError(ActorQError, RuntimeError):
    """A role was given CPU cores (``affinity.<role>``) that this host does not let it use."""


def pin_role_cpus(config: ExperimentConfig, role: str, index: int = 0) -> tuple[int, ...]:
    """Restrict this process to ``affinity.<role>``'s cores (before TF/torch size their thread pools); returns them.

    ``index``: the replay shard, which picks its own core from ``affinity.replay`` when there are several shards
    (:func:`actorq.config.shards.shard_cpus`); other roles' indexes are ignored.

    Raises:
        AffinityError: A core that this host does not have (or does not allow this process).
    """
    cpus = tuple(getattr(config.affinity, role, ()))
    if role == "replay":
        cpus = shard_cpus(cpus, config.replay.shards, index)
    if not cpus:
        return ()
    allowed = sorted(os.sched_getaffinity(0))
    missing = sorted(set(cpus) - set(allowed))
    if missing:
        raise AffinityError(
            f"affinity.{role}={list(cpus)}: CPU(s) {missing} are not available on this host (it allows "
            f"{allowed}); set affinity.{role} to some of those, or [] for any core"
        )
    os.sched_setaffinity(0, cpus)
    log.info("%s pinned to CPU(s) %s", role, list(cpus))
    return cpus


def quiet_tensorflow() -> None:
    """Silence TF's C++ start-up chatter before it is imported (roles import reverb, which imports TF)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", CHILD_ENV["TF_CPP_MIN_LOG_LEVEL"])
