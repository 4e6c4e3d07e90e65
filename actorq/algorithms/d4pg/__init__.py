"""D4PG (Acme's TF D4PG learner): continuous actions, a deterministic policy and a distributional critic.

Policy (what actors run): ``LayerNormMLP(policy_layers, activate_final=True) -> NearZeroInitializedLinear ->
TanhToSpec``; the TF networks are :func:`actorq.algorithms.d4pg.tf_networks.make_networks`, the learner
:mod:`actorq.algorithms.d4pg.tf_learner`, the torch twin :class:`actorq.algorithms.d4pg.torch_policy.D4PGPolicy`,
the variable mapping below (tabulated in :mod:`actorq.networks.mapping`). Actors explore with Gaussian noise whose
sigma is spread over the exploration streams; evaluation acts with the policy's action; an actor kernel must stay
within a fraction of the action range. Its config section is ``d4pg:`` (:class:`D4PGSettings`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from actorq.algorithms.base import (
    Algorithm,
    PolicyNetwork,
    Ref,
    VerificationResult,
    check_positive,
    check_widths,
)

BOUNDS = {"fp32": 1e-4, "fp16": 3e-3, "int8": 0.03}
"""Kernel verification: max |a - a_fp32| / (high - low) per precision (fp32 kernels: reassociation only)."""


@dataclass(frozen=True)
class D4PGSettings:
    """The YAML section ``d4pg:``: what D4PG uses besides the shared sections (replay, batch size, target period,
    publishing, ``network.policy_layers``)."""

    policy_lr: float = 1e-4
    """Policy learning rate."""
    critic_lr: float = 1e-4
    """Critic learning rate."""
    critic_layers: tuple[int, ...] = (512, 512, 256)
    """Hidden widths of the critic (learner only). The paper used hidden size 512."""
    vmin: float = -150.0
    """Lower bound of the distributional critic's support."""
    vmax: float = 150.0
    """Upper bound of the critic's support."""
    num_atoms: int = 51
    """Atoms of the critic's value distribution."""
    sigma_max: float = 0.2
    """Largest exploration sigma: actor stream i of N explores with Gaussian ``sigma_max * (i + 1) / N``, evenly
    over (0, sigma_max] (the paper: 0 to 0.2; the zero end is left out so that no stream is noise-free)."""


def exploration_sigma(stream: int, streams: int, sigma_max: float) -> float:
    """Gaussian exploration sigma of stream ``stream`` of ``streams``: spread evenly over (0, sigma_max].

    sigma_i = sigma_max * (i + 1) / N. The paper spread sigma "uniformly between 0 and 0.2"; we leave out the
    zero end so that no stream's experience is entirely noise-free (a sigma-0 actor only repeats the policy).
    """
    return float(sigma_max * (stream + 1) / streams)


class D4PG(Algorithm):
    """Acme's D4PG with ActorQ's quantized actors."""

    name = "d4pg"
    discrete = False
    summary = "D4PG (Acme): continuous control, deterministic policy, distributional critic"
    section = D4PGSettings
    legacy_keys = {
        "learner.policy_lr": "policy_lr",
        "learner.critic_lr": "critic_lr",
        "network.critic_layers": "critic_layers",
        "network.vmin": "vmin",
        "network.vmax": "vmax",
        "network.num_atoms": "num_atoms",
        "actor.sigma_max": "sigma_max",
    }
    network = PolicyNetwork(first_layer_norm=True, activation="elu", bounded_output=True, tf_scope="policy")
    learner_builder = Ref("actorq.algorithms.d4pg.tf_learner", "build")
    tf_networks = Ref("actorq.algorithms.d4pg.tf_networks", "make_networks")
    torch_policy = Ref("actorq.algorithms.d4pg.torch_policy", "make")
    verification_bounds = BOUNDS

    def validate(self, settings: D4PGSettings) -> None:
        check_positive("d4pg.policy_lr", settings.policy_lr)
        check_positive("d4pg.critic_lr", settings.critic_lr)
        check_positive("d4pg.sigma_max", settings.sigma_max, allow_zero=True)
        check_widths("d4pg.critic_layers", settings.critic_layers)
        if settings.num_atoms < 2:
            raise ValueError(f"d4pg.num_atoms={settings.num_atoms} must be >= 2")
        if settings.vmin >= settings.vmax:
            raise ValueError(f"d4pg.vmin={settings.vmin} must be below d4pg.vmax={settings.vmax}")

    def mapping_rows(self, layers: tuple[int, ...], prefix: str) -> list[tuple[str, str, bool]]:
        torso = f"{prefix}feedforward_mlp_torso"
        rows = [
            (f"{torso}/linear/w", "torso.0.weight", True),
            (f"{torso}/linear/b", "torso.0.bias", False),
            (f"{torso}/layer_norm/scale", "norm.weight", False),
            (f"{torso}/layer_norm/offset", "norm.bias", False),
        ]
        for i in range(len(layers) - 1):
            rows += [
                (f"{torso}/mlp/linear_{i}/w", f"torso.{i + 1}.weight", True),
                (f"{torso}/mlp/linear_{i}/b", f"torso.{i + 1}.bias", False),
            ]
        rows += [
            (f"{prefix}near_zero_initialized_linear/w", "head.weight", True),
            (f"{prefix}near_zero_initialized_linear/b", "head.bias", False),
        ]
        return rows

    def exploration_levels(self, stream_ids: list[int], streams: int, config: Any) -> np.ndarray:
        sigma_max = self.settings(config).sigma_max
        return np.array([exploration_sigma(i, streams, sigma_max) for i in stream_ids], dtype=np.float32)

    def explore(
        self,
        outputs: np.ndarray,
        rng: np.random.Generator,
        levels: np.ndarray,
        action_low: np.ndarray | None,
        action_high: np.ndarray | None,
    ) -> list[Any]:
        n = outputs.shape[0]
        noise = rng.standard_normal(outputs.shape).astype(np.float32) * levels[:n, None]
        return list(np.clip(outputs + noise, action_low, action_high).astype(np.float32))

    def greedy(self, outputs: np.ndarray) -> np.ndarray:
        return np.asarray(outputs, np.float32).reshape(-1)

    def verify(
        self, got: np.ndarray, ref: np.ndarray, precision: str, action_range: np.ndarray
    ) -> VerificationResult:
        diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
        error = float((diff / np.maximum(action_range, 1e-12)).max())
        bound = BOUNDS[precision]
        return VerificationResult(
            error <= bound, error, f"max error {error:.3g} of the action range (bound {bound:g})"
        )


ALGORITHM = D4PG()
"""The instance the registry holds."""
