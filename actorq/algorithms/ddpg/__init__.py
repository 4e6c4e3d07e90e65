"""DDPG (Acme's TF DDPG learner): continuous actions, a deterministic tanh policy and a plain (scalar) critic.

Chosen as the third algorithm because it is the cheapest of Acme's TF continuous-control agents: one Q-value per
state-action instead of D4PG's value distribution or DMPO's distributional, stochastic policy, so a learner step
costs least and a small config learns Pendulum on two cores within minutes.

Policy (what actors run), as the DDPG paper's: ``snt.nets.MLP([*policy_layers, act_dim])`` (relu hidden layers,
linear output) -> ``TanhToSpec``; critic ``CriticMultiplexer -> LayerNormMLP(critic_layers, activate_final=True) ->
NearZeroInitializedLinear(1)`` (Acme's DDPG example's). TF networks: :mod:`actorq.algorithms.ddpg.tf_networks`;
learner: :mod:`actorq.algorithms.ddpg.tf_learner`; torch twin: :class:`actorq.algorithms.ddpg.torch_policy.DDPGPolicy`.
Actors explore, evaluate and verify their kernels exactly as D4PG's (Gaussian noise spread over the streams up to
``ddpg.sigma_max``, the policy's action, a fraction of the action range): those rules are D4PG's, inherited.
Its config section is ``ddpg:`` (:class:`DDPGSettings`).
"""

from __future__ import annotations

from dataclasses import dataclass

from actorq.algorithms.base import PolicyNetwork, Ref, check_positive, check_widths
from actorq.algorithms.d4pg import D4PG


@dataclass(frozen=True)
class DDPGSettings:
    """The YAML section ``ddpg:``: what DDPG uses besides the shared sections (replay, batch size, target period,
    publishing, ``network.policy_layers``)."""

    policy_lr: float = 1e-4
    """Policy learning rate (Acme's DDPG default)."""
    critic_lr: float = 1e-4
    """Critic learning rate (Acme's DDPG default)."""
    critic_layers: tuple[int, ...] = (512, 512, 256)
    """Hidden widths of the critic (learner only)."""
    sigma_max: float = 0.3
    """Largest exploration sigma: actor stream i of N explores with Gaussian ``sigma_max * (i + 1) / N`` (Acme's
    DDPG uses one sigma, 0.3)."""


class DDPG(D4PG):
    """Acme's DDPG with ActorQ's quantized actors (acting, evaluation and kernel bound as D4PG's)."""

    name = "ddpg"
    discrete = False
    summary = "DDPG (Acme): continuous control, deterministic tanh policy, scalar critic"
    section = DDPGSettings
    legacy_keys = {}
    network = PolicyNetwork(first_layer_norm=False, activation="relu", bounded_output=True, tf_scope="policy")
    learner_builder = Ref("actorq.algorithms.ddpg.tf_learner", "build")
    tf_networks = Ref("actorq.algorithms.ddpg.tf_networks", "make_networks")
    torch_policy = Ref("actorq.algorithms.ddpg.torch_policy", "make")

    def validate(self, settings: DDPGSettings) -> None:
        check_positive("ddpg.policy_lr", settings.policy_lr)
        check_positive("ddpg.critic_lr", settings.critic_lr)
        check_positive("ddpg.sigma_max", settings.sigma_max, allow_zero=True)
        check_widths("ddpg.critic_layers", settings.critic_layers)

    def mapping_rows(self, layers: tuple[int, ...], prefix: str) -> list[tuple[str, str, bool]]:
        mlp = f"{prefix}mlp"
        rows: list[tuple[str, str, bool]] = []
        for i in range(len(layers)):
            rows += [
                (f"{mlp}/linear_{i}/w", f"torso.{i}.weight", True),
                (f"{mlp}/linear_{i}/b", f"torso.{i}.bias", False),
            ]
        n = len(layers)
        return rows + [
            (f"{mlp}/linear_{n}/w", "head.weight", True),
            (f"{mlp}/linear_{n}/b", "head.bias", False),
        ]


ALGORITHM = DDPG()
"""The instance the registry holds."""
