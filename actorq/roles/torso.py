"""The run's policy torso: ``network.torso`` resolved on the task's observations, the one rule every role (and the
launchers' config check) applies, so the learner, the quantizer, actors and the evaluator build one network.

Torch- and TensorFlow-free: the quantizer asks it too.
"""

from __future__ import annotations

from actorq import algorithms
from actorq.algorithms.torso import Torso
from actorq.config import ConfigError, ExperimentConfig
from actorq.envs import EnvironmentSpec, environment_spec


def run_torso(config: ExperimentConfig, spec: EnvironmentSpec | None = None) -> Torso:
    """The torso of this run's policy (:meth:`actorq.algorithms.base.Algorithm.torso` on the task's observation
    shape and dtype; ``spec`` saves building the environment again).

    Raises:
        ConfigError: ``network.torso`` can't read this task's observations (e.g. ``nature_cnn`` on a flat
            observation), or the algorithm has no such torso; the message says what to use.
    """
    spec = spec or environment_spec(config.env)
    shape = spec.obs_shape or (spec.obs_dim,)
    try:
        return algorithms.get(config.algorithm).torso(config.network.torso, shape, spec.obs_dtype)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
