"""DDPG's learner builder: Acme's TF DDPG learner on the ``ddpg:`` settings (TensorFlow; never torch).

:data:`actorq.algorithms.ddpg.DDPG.learner_builder` names :func:`build`; ``actorq.learners.make_learner`` resolves
it in the learner's process. Checkpointing, the split/compiled update and the published weights are
:class:`actorq.learners.AcmeLearner`'s; the private members it relies on are the actor-critic ones of
:mod:`actorq.learners.acme_adapter`, checked on Acme's DDPG class when a learner is built.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import sonnet as snt
from acme import specs as acme_specs
from acme.agents.tf.ddpg import learning as ddpg_learning
from acme.tf import utils as tf2_utils
from acme.utils import counting

from actorq.algorithms.ddpg import ALGORITHM
from actorq.algorithms.ddpg.tf_networks import make_networks
from actorq.config import ExperimentConfig
from actorq.learners import AcmeLearner, CompiledOptimizer, acme_adapter
from actorq.learners.dense import use_einsum_dense
from actorq.replay.experience import make_dataset


def build(
    config: ExperimentConfig,
    spec: acme_specs.EnvironmentSpec,
    replay_address: str,
    counter: counting.Counter,
    results: Any,
    checkpoint_dir: str | Path | None,
) -> AcmeLearner:
    """Acme's DDPG learner reading from the Reverb server at ``replay_address`` (DDPG's ``learner_builder``)."""
    acme_adapter.check_learner_class(ddpg_learning.DDPGLearner, acme_adapter.ACTOR_CRITIC_MEMBERS)
    ddpg = ALGORITHM.settings(config)
    nets = make_networks(spec.actions, config.network.policy_layers, ddpg.critic_layers)
    policy, critic = nets["policy"], nets["critic"]
    if config.learner.einsum_dense:
        use_einsum_dense(policy, critic)
    target_policy, target_critic = copy.deepcopy(policy), copy.deepcopy(critic)
    for net in (policy, target_policy):
        tf2_utils.create_variables(net, [spec.observations])
    for net in (critic, target_critic):
        tf2_utils.create_variables(net, [spec.observations, spec.actions])
    policy_opt = snt.optimizers.Adam(ddpg.policy_lr)
    critic_opt = snt.optimizers.Adam(ddpg.critic_lr)
    learner = ddpg_learning.DDPGLearner(
        policy_network=policy,
        critic_network=critic,
        target_policy_network=target_policy,
        target_critic_network=target_critic,
        discount=config.replay.discount,
        target_update_period=config.learner.target_update_period,
        dataset=make_dataset(replay_address, config),
        policy_optimizer=policy_opt,
        critic_optimizer=critic_opt,
        clipping=True,
        counter=counter,
        logger=results,
        checkpoint=False,
    )
    # Adam slots are created lazily; create them now so a checkpoint restore has somewhere to go (and so no
    # variable is created inside a compiled apply).
    acme_adapter.create_adam_slots(policy_opt, policy.trainable_variables)
    acme_adapter.create_adam_slots(critic_opt, critic.trainable_variables)
    if config.learner.jit_optimizer:
        acme_adapter.wrap_actor_critic_optimizers(learner, CompiledOptimizer)
    objects = {
        "counter": counter,
        "policy": policy,
        "critic": critic,
        "target_policy": target_policy,
        "target_critic": target_critic,
        "policy_optimizer": policy_opt,
        "critic_optimizer": critic_opt,
        "num_steps": acme_adapter.num_steps(learner),
    }
    # Acme's DDPG step copies online -> target in this order (observation networks are identities here).
    targets = (
        (*critic.variables, *policy.variables),
        (*target_critic.variables, *target_policy.variables),
    )
    return AcmeLearner(
        learner,
        policy,
        counter,
        results,
        objects,
        checkpoint_dir,
        config.learner.checkpoint_period_s,
        acme_class=ddpg_learning.DDPGLearner,
        jit_compile=config.learner.jit_compile,
        target_pairs=targets,
    )
