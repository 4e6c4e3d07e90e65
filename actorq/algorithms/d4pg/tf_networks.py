"""D4PG's TF networks, built exactly as Acme's TF D4PG agent builds them (TensorFlow; never torch).

Mirrors ``acme.agents.tf.d4pg.networks.make_default_networks``:

* policy: ``LayerNormMLP(policy_layers, activate_final=True)`` (Linear -> LayerNorm(eps 1e-5, scale and
  offset) -> tanh -> [Linear -> elu] * (len-1)) -> ``NearZeroInitializedLinear(act_dim)`` -> ``TanhToSpec``
  (``(tanh(x) + 1) / 2 * (max - min) + min``);
* critic: ``CriticMultiplexer()`` (concatenates observation and action) -> ``LayerNormMLP(critic_layers,
  activate_final=True)`` -> ``DiscreteValuedHead(vmin, vmax, num_atoms)``.

Each network is built inside a fixed name scope (``policy``, ``critic``), so its variable names are deterministic:
they are the left column of the mapping (:meth:`actorq.algorithms.d4pg.D4PG.mapping_rows`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import sonnet as snt
import tensorflow as tf
from acme import specs
from acme.tf import networks as acme_networks
from acme.tf import utils as tf2_utils

from actorq.algorithms.d4pg import ALGORITHM

POLICY_SCOPE = ALGORITHM.network.tf_scope
CRITIC_SCOPE = "critic"


def make_networks(
    action_spec: specs.BoundedArray,
    policy_layers: Sequence[int],
    critic_layers: Sequence[int],
    vmin: float,
    vmax: float,
    num_atoms: int,
) -> dict[str, Any]:
    """Acme's D4PG policy and distributional critic, with stable variable names.

    Args:
        action_spec: Bounded continuous action spec (TanhToSpec maps the policy output into it).
        policy_layers: Hidden widths of the policy torso.
        critic_layers: Hidden widths of the critic torso.
        vmin: Lowest atom of the critic's value distribution.
        vmax: Highest atom.
        num_atoms: Number of atoms.

    Returns:
        ``{"policy": snt.Sequential, "critic": snt.Sequential, "observation": tf2_utils.batch_concat}`` like
        Acme's ``make_default_networks``. The policy takes a flat ``[B, obs_dim]`` observation (LayerNormMLP
        batch-concatenates nested observations, so a flat vector passes through unchanged).
    """
    num_dimensions = int(np.prod(action_spec.shape, dtype=int))
    # Sonnet modules take their variable-name prefix from the name scope active when they are constructed.
    with tf.name_scope(POLICY_SCOPE):
        policy_modules = [
            acme_networks.LayerNormMLP(list(policy_layers), activate_final=True),
            acme_networks.NearZeroInitializedLinear(num_dimensions),
            acme_networks.TanhToSpec(action_spec),
        ]
    policy = snt.Sequential(policy_modules, name=POLICY_SCOPE)
    with tf.name_scope(CRITIC_SCOPE):
        critic_modules = [
            acme_networks.CriticMultiplexer(),
            acme_networks.LayerNormMLP(list(critic_layers), activate_final=True),
            acme_networks.DiscreteValuedHead(vmin, vmax, num_atoms),
        ]
    critic = snt.Sequential(critic_modules, name=CRITIC_SCOPE)
    return {"policy": policy, "critic": critic, "observation": tf2_utils.batch_concat}
