"""The learner's networks, built exactly as Acme's TF D4PG and DQN agents build them (never imports torch).

D4PG mirrors ``acme.agents.tf.d4pg.networks.make_default_networks``:

* policy: ``LayerNormMLP(policy_layers, activate_final=True)`` (Linear -> LayerNorm(eps 1e-5, scale and
  offset) -> tanh -> [Linear -> elu] * (len-1)) -> ``NearZeroInitializedLinear(act_dim)`` -> ``TanhToSpec``
  (``(tanh(x) + 1) / 2 * (max - min) + min``);
* critic: ``CriticMultiplexer()`` (concatenates observation and action) -> ``LayerNormMLP(critic_layers,
  activate_final=True)`` -> ``DiscreteValuedHead(vmin, vmax, num_atoms)``.

DQN: ``snt.nets.MLP([*layers, num_actions])`` with relu between layers and a linear output.

Each network is built inside a fixed name scope (``policy``, ``critic``, ``q_network``), so its variable names
are deterministic: they are the left column of the table in :mod:`actorq.networks.mapping`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import sonnet as snt
import tensorflow as tf
from acme import specs
from acme.tf import networks as acme_networks
from acme.tf import utils as tf2_utils

from actorq import algorithms

logger = logging.getLogger(__name__)

POLICY_SCOPE = algorithms.get("d4pg").network.tf_scope
CRITIC_SCOPE = "critic"
Q_NETWORK_SCOPE = algorithms.get("dqn").network.tf_scope


def make_d4pg_networks(
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


def make_dqn_network(num_actions: int, layers: Sequence[int]) -> snt.Module:
    """The DQN Q-network: ``snt.nets.MLP([*layers, num_actions])`` (relu, linear output), named ``q_network``."""
    return snt.nets.MLP([*layers, int(num_actions)], activation=tf.nn.relu, name=Q_NETWORK_SCOPE)


def create_variables(module: snt.Module, obs_dim: int) -> None:
    """Create a policy's (or Q-network's) variables with one dummy call on a ``[1, obs_dim]`` batch."""
    module(tf.zeros([1, int(obs_dim)], tf.float32))


def policy_variables(policy_module: snt.Module) -> dict[str, np.ndarray]:
    """``{TF variable name without ':0': float32 numpy copy}`` of a policy or Q-network, in creation order.

    Raises:
        ValueError: The module has no variables yet (call :func:`create_variables` or run it once first).
    """
    variables = policy_module.variables
    if not variables:
        raise ValueError(f"module {policy_module.name!r} has no variables yet: call create_variables() first")
    out: dict[str, np.ndarray] = {}
    for v in variables:
        name = v.name[:-2] if v.name.endswith(":0") else v.name
        if name in out:
            raise ValueError(f"duplicate variable name {name!r}: build the network with make_*_network*")
        out[name] = np.asarray(v.numpy(), dtype=np.float32)
    return out
