"""A test-only third algorithm, to show that a new algorithm is one module plus its configs.

Softmax DQN: DQN's learner, networks and Q-values, but its actors explore by sampling an action from
``softmax(Q / temperature)`` (Boltzmann exploration) with temperatures spread over the exploration streams, and its
kernels are held to half of DQN's Q-value bounds. Nothing outside this module knows it exists: the test registers
it, loads a config with ``algorithm: softmax_dqn`` and runs every role through the in-process launcher.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from actorq.algorithms import dqn
from actorq.algorithms.base import Algorithm, PolicyNetwork, Ref, VerificationResult

NAME = "softmax_dqn"


@dataclass(frozen=True)
class SoftmaxDQNSettings:
    """Softmax DQN's own settings (its learner's are DQN's)."""

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
    learner_builder = Ref("actorq.learners", "build_dqn_learner")
    tf_networks = Ref("actorq.networks.tf_nets", "make_dqn_network")
    torch_policy = Ref("actorq.networks.torch_nets", "q_network")
    verification_bounds = {k: v / 2 for k, v in dqn.BOUNDS.items()}

    def __init__(self) -> None:
        self.calls = {"explore": 0, "greedy": 0, "verify": 0, "mapping_rows": 0}

    def settings(self, config: Any) -> SoftmaxDQNSettings:
        return SoftmaxDQNSettings()

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
}
"""Its config (what a ``configs/softmax_dqn/gym_cartpole.yaml`` would hold), with tiny networks for tests."""
