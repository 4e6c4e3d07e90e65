"""A test-only plugin algorithm, to show that an algorithm outside ``actorq`` is one module plus its config.

Softmax DQN: DQN's learner, networks and Q-values, but its actors explore by sampling an action from
``softmax(Q / temperature)`` (Boltzmann exploration) with temperatures spread over the exploration streams up to
its own setting ``softmax_dqn.temperature_max``, and its kernels are held to half of DQN's Q-value bounds. Nothing
inside ``actorq`` knows it exists: a test registers it in-process, or declares it as an entry point
(:data:`ENTRY_POINT`) of a distribution on ``PYTHONPATH`` so that every process of a run finds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from actorq.algorithms import dqn
from actorq.algorithms.base import Algorithm, PolicyNetwork, Ref, VerificationResult, check_positive

NAME = "softmax_dqn"
ENTRY_POINT = f"{NAME} = tests.softmax_dqn:ALGORITHM"
"""Its line under ``[actorq.algorithms]`` in a distribution's ``entry_points.txt``."""


@dataclass(frozen=True)
class SoftmaxDQNSettings(dqn.DQNSettings):
    """Softmax DQN's section ``softmax_dqn:``: DQN's settings (its learner is DQN's) plus its own."""

    temperature_max: float = 1.0
    """Largest exploration temperature: stream i of n samples with ``temperature_max * (i + 1) / n``."""


class SoftmaxDQN(Algorithm):
    """DQN with Boltzmann exploration; counts its calls so a test can see every role asked it."""

    name = NAME
    discrete = True
    summary = "Softmax DQN (test only): DQN's learner, Boltzmann exploration"
    section = SoftmaxDQNSettings
    network = PolicyNetwork(
        first_layer_norm=False, activation="relu", bounded_output=False, tf_scope="q_network"
    )
    learner_builder = Ref("actorq.algorithms.dqn.tf_learner", "build")
    tf_networks = Ref("actorq.algorithms.dqn.tf_networks", "make_network")
    torch_policy = Ref("actorq.algorithms.dqn.torch_policy", "make")
    verification_bounds = {k: v / 2 for k, v in dqn.BOUNDS.items()}

    def __init__(self) -> None:
        self.calls = {"explore": 0, "greedy": 0, "verify": 0, "mapping_rows": 0}

    def validate(self, settings: SoftmaxDQNSettings) -> None:
        dqn.validate_settings(settings, NAME)
        check_positive(f"{NAME}.temperature_max", settings.temperature_max)

    def mapping_rows(self, layers: tuple[int, ...], prefix: str) -> list[tuple[str, str, bool]]:
        self.calls["mapping_rows"] += 1
        return dqn.ALGORITHM.mapping_rows(layers, prefix)

    def exploration_levels(self, stream_ids: list[int], streams: int, config: Any) -> np.ndarray:
        t = self.settings(config).temperature_max
        return np.array([t * (i + 1) / streams for i in stream_ids])

    def explore(self, outputs, rng, levels, action_low, action_high) -> list[Any]:
        self.calls["explore"] += 1
        q = outputs / levels[: outputs.shape[0], None]
        p = np.exp(q - q.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        return [np.int32(rng.choice(p.shape[1], p=row)) for row in p]

    def greedy(self, outputs: np.ndarray) -> np.int32:
        self.calls["greedy"] += 1
        return np.int32(np.argmax(outputs))

    def verify(self, got, ref, precision, action_range) -> VerificationResult:
        self.calls["verify"] += 1
        return dqn.verify_q_values(got, ref, precision, self.verification_bounds)


CONFIG = {
    "algorithm": NAME,
    "env": {"suite": "gym", "task": "CartPole-v1"},
    "network": {"policy_layers": [32, 32]},
    "replay": {"min_size": 50, "max_size": 10000, "samples_per_insert": 0, "n_step": 1},
    "learner": {"batch_size": 16, "publish_period": 5, "checkpoint_period_s": 0},
    "actor": {"precision": "int8", "num_actors": 2, "update_period": 20},
    "evaluator": {"period_s": 1.0, "episodes": 1},
    "log_period_s": 0.5,
    "max_minutes": 3,
    "max_actor_steps": 600,
    NAME: {"temperature_max": 0.5},
}
"""Its config (what a ``configs/softmax_dqn/gym_cartpole.yaml`` would hold), with tiny networks for tests."""

ALGORITHM = SoftmaxDQN()
"""The instance its entry point names (a process that finds it by entry point uses this one)."""
