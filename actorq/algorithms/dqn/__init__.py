"""DQN (Acme's TF DQN learner): discrete actions, a Q-network, optionally prioritized replay.

Policy (what actors run): ``snt.nets.MLP([*policy_layers, num_actions])`` (relu, linear output), after the Nature
DQN CNN on image observations (``network.torso``, :mod:`actorq.algorithms.torso`); the TF network is
:func:`actorq.algorithms.dqn.tf_networks.make_network`, the learner :mod:`actorq.algorithms.dqn.tf_learner`, the
torch twin :class:`actorq.algorithms.dqn.torch_policy.QNetwork`. Actors explore epsilon-greedily with epsilons
spread log-uniformly over the exploration streams (as Ape-X); evaluation takes the argmax; an actor kernel must
keep the greedy actions and stay within a fraction of max |Q|. Its config section is ``dqn:`` (:class:`DQNSettings`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from actorq.algorithms.base import Algorithm, PolicyNetwork, Ref, VerificationResult, check_positive
from actorq.algorithms.torso import MLP, NATURE_CNN

BOUNDS = {"fp32": 1e-4, "fp16": 3e-3, "int8": 0.10}
"""Kernel verification: max |Q - Q_fp32| / max |Q_fp32| per precision."""
MIN_AGREEMENT = 0.99
"""int8: fraction of decisive probes whose greedy action must agree with fp32."""
DECISIVE_GAP = 0.06
"""A probe is decisive when its fp32 top-2 Q gap exceeds this fraction of max |Q| (2x the int8 error scale): a
near-tie may flip under any 8-bit rounding and says nothing about the kernel."""


@dataclass(frozen=True)
class DQNSettings:
    """The YAML section ``dqn:``: what DQN uses besides the shared sections (replay, batch size, target period,
    publishing, ``network.policy_layers``)."""

    learning_rate: float = 1e-3
    """Adam learning rate."""
    huber_loss_parameter: float = 1.0
    """Huber loss delta."""
    max_gradient_norm: float = 0.0
    """Clip gradients to this global norm; 0 disables."""
    importance_sampling_exponent: float = 0.2
    """Prioritized replay's importance-sampling exponent beta (with ``replay.prioritized``)."""
    epsilon_min: float = 0.01
    """Smallest per-stream epsilon (the streams' epsilons spread log-uniformly between epsilon_min and
    epsilon_max)."""
    epsilon_max: float = 0.3
    """Largest per-stream epsilon."""


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


def validate_settings(settings: DQNSettings, section: str) -> None:
    """DQN's checks of its section (also for algorithms that extend it); ``section`` prefixes the keys named."""
    check_positive(f"{section}.learning_rate", settings.learning_rate)
    check_positive(f"{section}.huber_loss_parameter", settings.huber_loss_parameter)
    check_positive(f"{section}.max_gradient_norm", settings.max_gradient_norm, allow_zero=True)
    if not 0 <= settings.importance_sampling_exponent <= 1:
        raise ValueError(
            f"{section}.importance_sampling_exponent={settings.importance_sampling_exponent} must be in [0, 1]"
        )
    if not 0 <= settings.epsilon_min <= settings.epsilon_max <= 1:
        raise ValueError(f"need 0 <= {section}.epsilon_min <= {section}.epsilon_max <= 1")


class DQN(Algorithm):
    """Acme's DQN with ActorQ's quantized actors."""

    name = "dqn"
    discrete = True
    summary = "DQN (Acme): discrete actions, Q-network, epsilon-greedy actors"
    section = DQNSettings
    legacy_keys = {
        "learner.learning_rate": "learning_rate",
        "learner.huber_loss_parameter": "huber_loss_parameter",
        "learner.max_gradient_norm": "max_gradient_norm",
        "replay.importance_sampling_exponent": "importance_sampling_exponent",
        "actor.epsilon_min": "epsilon_min",
        "actor.epsilon_max": "epsilon_max",
    }
    network = PolicyNetwork(
        first_layer_norm=False, activation="relu", bounded_output=False, tf_scope="q_network"
    )
    learner_builder = Ref("actorq.algorithms.dqn.tf_learner", "build")
    tf_networks = Ref("actorq.algorithms.dqn.tf_networks", "make_network")
    torch_policy = Ref("actorq.algorithms.dqn.torch_policy", "make")
    verification_bounds = BOUNDS
    checkpoint_policy = "network"  # Acme's DQNLearner.state names its online Q-network so
    torsos = (MLP, NATURE_CNN)

    def validate(self, settings: DQNSettings) -> None:
        validate_settings(settings, self.name)

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
