"""DQN (Acme's TF DQN learner): discrete actions, a Q-network, optionally prioritized replay.

Policy (what actors run): ``snt.nets.MLP([*policy_layers, num_actions])`` (relu, linear output); the TF network is
:func:`actorq.networks.tf_nets.make_dqn_network`, the torch twin :class:`actorq.networks.torch_nets.QNetwork`.
Actors explore epsilon-greedily with epsilons spread log-uniformly over the exploration streams (as Ape-X);
evaluation takes the argmax; an actor kernel must keep the greedy actions and stay within a fraction of max |Q|.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from actorq.algorithms.base import Algorithm, PolicyNetwork, Ref, VerificationResult

BOUNDS = {"fp32": 1e-4, "fp16": 3e-3, "int8": 0.10}
"""Kernel verification: max |Q - Q_fp32| / max |Q_fp32| per precision."""
MIN_AGREEMENT = 0.99
"""int8: fraction of decisive probes whose greedy action must agree with fp32."""
DECISIVE_GAP = 0.06
"""A probe is decisive when its fp32 top-2 Q gap exceeds this fraction of max |Q| (2x the int8 error scale): a
near-tie may flip under any 8-bit rounding and says nothing about the kernel."""


@dataclass(frozen=True)
class DQNSettings:
    """The settings DQN uses besides the shared ones (replay, batch size, target period, publishing)."""

    learning_rate: float
    """Adam learning rate (YAML ``learner.learning_rate``)."""
    huber_loss_parameter: float
    """Huber loss delta (``learner.huber_loss_parameter``)."""
    max_gradient_norm: float
    """Clip gradients to this global norm; 0 disables (``learner.max_gradient_norm``)."""
    importance_sampling_exponent: float
    """Prioritized replay's importance-sampling exponent beta (``replay.importance_sampling_exponent``)."""
    epsilon_min: float
    """Smallest per-stream epsilon (``actor.epsilon_min``)."""
    epsilon_max: float
    """Largest per-stream epsilon (``actor.epsilon_max``)."""


def exploration_epsilon(stream: int, streams: int, eps_min: float, eps_max: float) -> float:
    """Epsilon of exploration stream ``stream`` of ``streams``: log-uniform from eps_max (stream 0) to eps_min.

    epsilon_i = eps_max * (eps_min / eps_max) ** (i / (N - 1)), as Ape-X spreads epsilons; eps_max when N == 1.
    """
    if streams == 1 or eps_max == 0:
        return eps_max
    return float(eps_max * (max(eps_min, 1e-8) / eps_max) ** (stream / (streams - 1)))


def epsilon_greedy(outputs: np.ndarray, rng: np.random.Generator, epsilons: np.ndarray) -> list[np.int32]:
    """Row ``j``'s argmax, or a uniformly random action with probability ``epsilons[j]``."""
    n = outputs.shape[0]
    greedy = np.argmax(outputs, axis=-1)
    explore = rng.random(n) < epsilons[:n]
    random = rng.integers(outputs.shape[-1], size=n)
    return [np.int32(a) for a in np.where(explore, random, greedy)]


def verify_q_values(
    got: np.ndarray, ref: np.ndarray, precision: str, bounds: dict[str, float]
) -> VerificationResult:
    """Relative max Q error within ``bounds[precision]``; int8 also keeps the greedy action on decisive probes."""
    diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    scale = max(float(np.abs(ref).max()), 1e-12)
    error = float(diff.max() / scale)
    bound = bounds[precision]
    if precision != "int8" or ref.shape[1] < 2:
        return VerificationResult(
            error <= bound, error, f"max Q error {error:.3g} of max |Q| (bound {bound:g})"
        )
    top2 = np.sort(ref, axis=1)[:, -2:]
    decisive = (top2[:, 1] - top2[:, 0]) > DECISIVE_GAP * scale
    agree = np.argmax(got, axis=1) == np.argmax(ref, axis=1)
    agreement = float(agree[decisive].mean()) if decisive.any() else 1.0
    return VerificationResult(
        error <= bound and agreement >= MIN_AGREEMENT,
        error,
        f"max Q error {error:.3g} of max |Q| (bound {bound:g}); greedy actions agree on {agreement:.1%} of "
        f"{int(decisive.sum())} decisive probes (bound {MIN_AGREEMENT:.0%}; {agree.mean():.1%} of all "
        f"{len(agree)}, near ties unbounded)",
    )


class DQN(Algorithm):
    """Acme's DQN with ActorQ's quantized actors."""

    name = "dqn"
    discrete = True
    summary = "DQN (Acme): discrete actions, Q-network, epsilon-greedy actors"
    section = DQNSettings
    network = PolicyNetwork(
        first_layer_norm=False, activation="relu", bounded_output=False, tf_scope="q_network"
    )
    learner_builder = Ref("actorq.learners", "build_dqn_learner")
    tf_networks = Ref("actorq.networks.tf_nets", "make_dqn_network")
    torch_policy = Ref("actorq.networks.torch_nets", "q_network")
    verification_bounds = BOUNDS

    def settings(self, config: Any) -> DQNSettings:
        return DQNSettings(
            learning_rate=config.learner.learning_rate,
            huber_loss_parameter=config.learner.huber_loss_parameter,
            max_gradient_norm=config.learner.max_gradient_norm,
            importance_sampling_exponent=config.replay.importance_sampling_exponent,
            epsilon_min=config.actor.epsilon_min,
            epsilon_max=config.actor.epsilon_max,
        )

    def mapping_rows(self, layers: tuple[int, ...], prefix: str) -> list[tuple[str, str, bool]]:
        if not prefix:
            raise ValueError("the DQN Q-network's variables always live under the MLP's name scope")
        rows: list[tuple[str, str, bool]] = []
        for i in range(len(layers)):
            rows += [
                (f"{prefix}linear_{i}/w", f"torso.{i}.weight", True),
                (f"{prefix}linear_{i}/b", f"torso.{i}.bias", False),
            ]
        n = len(layers)
        return rows + [
            (f"{prefix}linear_{n}/w", "head.weight", True),
            (f"{prefix}linear_{n}/b", "head.bias", False),
        ]

    def exploration_levels(self, stream_ids: list[int], streams: int, config: Any) -> np.ndarray:
        s = self.settings(config)
        return np.array([exploration_epsilon(i, streams, s.epsilon_min, s.epsilon_max) for i in stream_ids])

    def explore(
        self,
        outputs: np.ndarray,
        rng: np.random.Generator,
        levels: np.ndarray,
        action_low: np.ndarray | None,
        action_high: np.ndarray | None,
    ) -> list[Any]:
        return epsilon_greedy(outputs, rng, levels)

    def greedy(self, outputs: np.ndarray) -> np.int32:
        return np.int32(np.argmax(outputs))

    def verify(
        self, got: np.ndarray, ref: np.ndarray, precision: str, action_range: np.ndarray
    ) -> VerificationResult:
        return verify_q_values(got, ref, precision, BOUNDS)


ALGORITHM = DQN()
"""The instance the registry holds."""
