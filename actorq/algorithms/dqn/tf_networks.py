"""DQN's TF Q-network, as Acme's TF DQN agent uses it (TensorFlow; never torch).

``snt.nets.MLP([*layers, num_actions])`` with relu between layers and a linear output, named ``q_network`` so its
variable names are deterministic: the left column of :meth:`actorq.algorithms.dqn.DQN.mapping_rows`.
"""

from __future__ import annotations

from collections.abc import Sequence

import sonnet as snt
import tensorflow as tf

from actorq.algorithms.dqn import ALGORITHM

Q_NETWORK_SCOPE = ALGORITHM.network.tf_scope


def make_network(num_actions: int, layers: Sequence[int]) -> snt.Module:
    """The DQN Q-network: ``snt.nets.MLP([*layers, num_actions])`` (relu, linear output), named ``q_network``."""
    return snt.nets.MLP([*layers, int(num_actions)], activation=tf.nn.relu, name=Q_NETWORK_SCOPE)
