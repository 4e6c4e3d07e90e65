"""A trained run's policy: its config, its learner's weights from a checkpoint, and the policy at a precision.

Every step is the run's own rule, reused: the learner checkpoint is read by :mod:`actorq.learners.checkpoint`
(TensorFlow), mapped to the actors' torch keys by :func:`actorq.networks.mapping.tf_to_torch_state` (as the
quantizer maps the learner's messages), quantized by the quantizer's :func:`~actorq.roles.quantizer.encode_policy`
at the precision asked for, and run by :func:`~actorq.roles.policy.build_policy`'s kernel, verified against fp32
on this machine. So the int8 policy evaluated or exported here is the one an int8 actor of the run would have
acted with at that learner step.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from actorq import algorithms
from actorq.actors.policy import ActorPolicy
from actorq.config import PRECISIONS, ExperimentConfig, load_config, replace
from actorq.errors import UsageError
from actorq.learners.checkpoint import read_policy
from actorq.networks.mapping import tf_to_torch_state
from actorq.quantize.codec import WeightMessage, decode_message
from actorq.roles.policy import build_policy
from actorq.roles.quantizer import encode_policy
from actorq.roles.torso import run_torso

log = logging.getLogger(__name__)

EVALUATED_PRECISIONS = (*PRECISIONS, "auto")
"""What ``--precision`` accepts: the actors' precisions and ``auto`` (the fastest that verifies here)."""


@dataclass(frozen=True)
class TrainedWeights:
    """One learner checkpoint of a run, as the actors' fp32 torch state."""

    run_dir: Path
    config: ExperimentConfig
    checkpoint: int
    """``N`` of the learner checkpoint ``ckpt-N`` read."""
    learner_step: int
    """Learner steps at that checkpoint (-1 when it does not record them)."""
    state: dict[str, np.ndarray]
    """``{torch key: float32 array}``: the learner's fp32 policy, keyed as the actors' policy is."""


def open_run(run_dir: str | Path) -> ExperimentConfig:
    """The resolved config of the ``actorq train`` run in ``run_dir`` (its ``config.yaml``).

    Raises:
        UsageError: ``run_dir`` is not a run directory (exit 2, before anything is loaded).
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UsageError(
            f"run directory {run_dir} does not exist: pass the RUN_DIR an `actorq train` printed"
        )
    if not (run_dir / "config.yaml").is_file():
        raise UsageError(f"{run_dir} has no config.yaml: pass the RUN_DIR of an `actorq train` run")
    return load_config(run_dir / "config.yaml")


def load_weights(run_dir: str | Path, checkpoint: int | None = None) -> TrainedWeights:
    """The run's learner weights at checkpoint ``checkpoint`` (default: the newest, the final weights).

    Raises:
        UsageError: Not a run directory, no such checkpoint, or weights that do not fit the run's policy.
    """
    config = open_run(run_dir)
    algorithm = algorithms.get(config.algorithm)
    read = read_policy(run_dir, algorithm.checkpoint_policy, checkpoint)
    torso = run_torso(config)  # the quantizer's mapping: a conv torso's rows first
    layers = tuple(config.network.policy_layers)
    state = tf_to_torch_state(
        config.algorithm, read.variables, layers, torso=torso if torso.is_conv else None
    )
    log.info("read learner checkpoint %d (learner step %d) of %s", read.number, read.learner_step, run_dir)
    return TrainedWeights(Path(run_dir), config, read.number, read.learner_step, state)


def precision_config(config: ExperimentConfig, precision: str) -> ExperimentConfig:
    """The run's config as an actor of ``precision`` would have had it.

    The run's own precision keeps its wire bits, codec and kernel; another precision gets its natural wire bits
    and ``actor.kernel: auto`` (a kernel named for the run's machine need not verify on this one).
    """
    if precision not in EVALUATED_PRECISIONS:
        raise UsageError(f"precision {precision!r} is not one of {', '.join(EVALUATED_PRECISIONS)}")
    if precision == config.actor.precision:
        return config
    return replace(config, **{"actor.precision": precision, "actor.kernel": "auto", "quantizer.comm_bits": 0})


def policy_at(weights: TrainedWeights, precision: str, batch: int = 1) -> ActorPolicy:
    """The run's policy at ``precision`` holding ``weights``: quantized by the quantizer's rule, computed by a
    kernel verified on this machine (on probes, then on these weights) at ``batch`` rows per forward."""
    config = precision_config(weights.config, precision)
    policy = build_policy(config, batch=batch)
    policy.apply(policy_message(weights, precision, policy.expected_shapes()))
    return policy


def policy_message(
    weights: TrainedWeights, precision: str, expected: dict[str, tuple[int, ...]] | None = None
) -> WeightMessage:
    """The weight message an actor of ``precision`` would get for ``weights`` (the quantizer's encoding, decoded
    and checked against ``expected`` shapes): its tensors carry the codes and quantization parameters."""
    config = precision_config(weights.config, precision)
    message = encode_policy(
        config, weights.state, version=0, learner_step=max(weights.learner_step, 0), key=None
    )
    return decode_message(message, expected=expected)


def fp32_reference(weights: TrainedWeights, batch: int = 1) -> ActorPolicy:
    """The learner's own fp32 function (no wire quantization), what every other precision is compared with."""
    policy = build_policy(replace(weights.config, **{"actor.kernel": "auto"}), precision="fp32", batch=batch)
    policy.load_state(weights.state, learner_step=max(weights.learner_step, 0))
    return policy
