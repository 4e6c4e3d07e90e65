"""DDPG's TF networks (TensorFlow; never torch): a deterministic tanh policy and a scalar critic.

* policy: ``snt.nets.MLP([*policy_layers, act_dim], relu)`` named ``mlp`` -> ``TanhToSpec`` (``(tanh(x) + 1) / 2 *
  (max - min) + min``), built in the name scope ``policy``: variables ``policy/mlp/linear_{i}/{w,b}``, the left
  column of :meth:`actorq.algorithms.ddpg.DDPG.mapping_rows`;
* critic: ``CriticMultiplexer()`` -> ``LayerNormMLP(critic_layers, activate_final=True)`` ->
  ``NearZeroInitializedLinear(1)``: one Q-value per (observation, action), as Acme's DDPG learner squeezes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import sonnet as snt
import tensorflow as tf
from acme import specs
from acme.tf import networks as acme_networks

from actorq.algorithms.ddpg import ALGORITHM

POLICY_SCOPE = ALGORITHM.network.tf_scope
CRITIC_SCOPE = "critic"


def make_networks(
    action_spec: specs.BoundedArray, policy_layers: Sequence[int], critic_layers: Sequence[int]
) -> dict[str, Any]:
    """DDPG's policy and critic with stable variable names: ``{"policy": ..., "critic": ...}``.

    Args:
        action_spec: Bounded continuous action spec (TanhToSpec maps the policy output into it).
        policy_layers: Hidden widths of the policy.
        critic_layers: Hidden widths of the critic torso.
    """
    num_dimensions = int(np.prod(action_spec.shape, dtype=int))
    # Sonnet modules take their variable-name prefix from the name scope active when they are constructed.
    with tf.name_scope(POLICY_SCOPE):
        policy_modules = [
            snt.nets.MLP([*policy_layers, num_dimensions], activation=tf.nn.relu, name="mlp"),
            acme_networks.TanhToSpec(action_spec),
        ]
    policy = snt.Sequential(policy_modules, name=POLICY_SCOPE)
    with tf.name_scope(CRITIC_SCOPE):
        critic_modules = [
            acme_networks.CriticMultiplexer(),
            acme_networks.LayerNormMLP(list(critic_layers), activate_final=True),
            acme_networks.NearZeroInitializedLinear(1),
        ]
    critic = snt.Sequential(critic_modules, name=CRITIC_SCOPE)
    return {"policy": policy, "critic": critic}
