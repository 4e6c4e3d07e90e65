"""DQN's learner builder: Acme's TF DQN learner on the ``dqn:`` settings (TensorFlow; never torch).

:data:`actorq.algorithms.dqn.DQN.learner_builder` names :func:`build`; ``actorq.learners.make_learner`` resolves
it in the learner's process. An algorithm whose section extends :class:`~actorq.algorithms.dqn.DQNSettings` may
name this builder too: it reads the config's algorithm's settings, not DQN's by name.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import sonnet as snt
from acme import specs as acme_specs
from acme.agents.tf.dqn import learning as dqn_learning
from acme.tf import utils as tf2_utils
from acme.utils import counting

from actorq import algorithms
from actorq.algorithms.dqn import DQNSettings
from actorq.algorithms.dqn.tf_networks import make_network
from actorq.config import ExperimentConfig
from actorq.learners import AcmeLearner, CompiledOptimizer, acme_adapter
from actorq.learners.dense import use_einsum_dense
from actorq.networks import tf_nets
from actorq.replay.experience import make_dataset
from actorq.replay.shards import PriorityRouter, priority_client


def build(
    config: ExperimentConfig,
    spec: acme_specs.EnvironmentSpec,
    replay_address: str,
    counter: counting.Counter,
    results: Any,
    checkpoint_dir: str | Path | None,
) -> AcmeLearner:
    """Acme's DQN learner reading from the Reverb server at ``replay_address`` (DQN's ``learner_builder``).

    Raises:
        TypeError: The config's algorithm's settings are not (an extension of) DQN's.
    """
    dqn = algorithms.get(config.algorithm).settings(config)
    if not isinstance(dqn, DQNSettings):
        raise TypeError(f"DQN's learner needs DQNSettings; {config.algorithm}'s are {type(dqn).__name__}")
    observations = spec.observations
    torso = algorithms.get(config.algorithm).torso(
        config.network.torso, observations.shape, observations.dtype
    )
    network = make_network(spec.actions.num_values, config.network.policy_layers, torso)
    if config.learner.einsum_dense:
        use_einsum_dense(network)
    # Frames from replay: an MLP reads them cast and flattened; a conv torso casts and scales them itself.
    if not torso.is_conv and tf_nets.needs_flattening(spec.observations):
        network = snt.Sequential([tf_nets.FlatObservation(), network])
    # Priority updates go back to the server that holds each item: with shards, a router the dataset teaches.
    priorities = priority_client(replay_address, config) if config.replay.prioritized else None
    router = priorities if isinstance(priorities, PriorityRouter) else None
    target = copy.deepcopy(network)
    for net in (network, target):
        tf2_utils.create_variables(net, [spec.observations])
    learner = dqn_learning.DQNLearner(
        network=network,
        target_network=target,
        discount=config.replay.discount,
        importance_sampling_exponent=dqn.importance_sampling_exponent,
        learning_rate=dqn.learning_rate,
        target_update_period=config.learner.target_update_period,
        dataset=make_dataset(replay_address, config, router),
        huber_loss_parameter=dqn.huber_loss_parameter,
        # Acme's DQN learner writes |TD error| priorities back to the table after every step.
        replay_client=priorities,
        counter=counter,
        logger=results,
        checkpoint=False,
        max_gradient_norm=dqn.max_gradient_norm or None,
    )
    objects = dict(learner.state)  # the real optimizer (Acme makes its Adam slots eagerly) is what is saved
    objects["counter"] = counter
    if config.learner.jit_optimizer:
        acme_adapter.wrap_dqn_optimizer(learner, CompiledOptimizer)
    return AcmeLearner(
        learner,
        network,
        counter,
        results,
        objects,
        checkpoint_dir,
        config.learner.checkpoint_period_s,
        acme_class=dqn_learning.DQNLearner,
        jit_compile=config.learner.jit_compile,
        target_pairs=(tuple(network.variables), tuple(target.variables)),
    )
