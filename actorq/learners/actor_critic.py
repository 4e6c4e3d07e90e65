"""Assembling an Acme actor-critic learner (D4PG, DDPG, ...) the way every ActorQ learner is run.

An actor-critic algorithm's ``tf_learner.build`` makes its networks and names its Acme learner class; the rest is
the same for all of them and lives here once: einsum dense layers where asked, target copies, variables created,
Adam optimizers with their slots made up front (a checkpoint restore needs somewhere to go, and no variable may be
created inside a compiled apply), the compiled optimizer where asked, the checkpointed objects and the
online -> target pairs for :class:`actorq.learners.AcmeLearner`.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import sonnet as snt
from acme import specs as acme_specs
from acme.tf import utils as tf2_utils
from acme.utils import counting

from actorq.config import ExperimentConfig
from actorq.learners import AcmeLearner, CompiledOptimizer, acme_adapter
from actorq.learners.dense import use_einsum_dense
from actorq.networks import tf_nets


def build_actor_critic(
    acme_class: type,
    config: ExperimentConfig,
    spec: acme_specs.EnvironmentSpec,
    policy: snt.Module,
    critic: snt.Module,
    learning_rates: tuple[float, float],
    data: dict[str, Any],
    counter: counting.Counter,
    results: Any,
    checkpoint_dir: str | Path | None,
) -> AcmeLearner:
    """Acme's ``acme_class`` over ``policy`` and ``critic``, wrapped as an :class:`AcmeLearner`.

    Args:
        acme_class: The Acme learner class (e.g. ``D4PGLearner``); checked first for the members ActorQ uses.
        config: The experiment config (discount, target period, compile and checkpoint settings).
        spec: The environment's spec, to create the networks' variables.
        policy: The online policy network (its variables are what the learner publishes).
        critic: The online critic network.
        learning_rates: Adam's learning rates for the policy and the critic.
        data: How the class takes its data: ``{"dataset_iterator": ...}`` (D4PG) or ``{"dataset": ...}`` (DDPG).
        counter: The learner's counter.
        results: The learner's logger.
        checkpoint_dir: Where the learner checkpoints (None: no checkpoints).

    Raises:
        acme_adapter.AcmeSurfaceError: ``acme_class`` lacks a member ActorQ relies on.
    """
    acme_adapter.check_learner_class(acme_class, acme_adapter.ACTOR_CRITIC_MEMBERS)
    if config.learner.einsum_dense:
        use_einsum_dense(policy, critic)
    target_policy, target_critic = copy.deepcopy(policy), copy.deepcopy(critic)
    observations = spec.observations
    if tf_nets.needs_flattening(
        observations
    ):  # frames from replay: Acme's observation network casts, flattens
        data = {
            **data,
            "observation_network": tf_nets.FlatObservation(),
            "target_observation_network": tf_nets.FlatObservation(),
        }
        observations = tf_nets.flat_spec(observations)
    for net in (policy, target_policy):
        tf2_utils.create_variables(net, [observations])
    for net in (critic, target_critic):
        tf2_utils.create_variables(net, [observations, spec.actions])
    policy_opt = snt.optimizers.Adam(learning_rates[0])
    critic_opt = snt.optimizers.Adam(learning_rates[1])
    learner = acme_class(
        policy_network=policy,
        critic_network=critic,
        target_policy_network=target_policy,
        target_critic_network=target_critic,
        discount=config.replay.discount,
        target_update_period=config.learner.target_update_period,
        policy_optimizer=policy_opt,
        critic_optimizer=critic_opt,
        clipping=True,
        counter=counter,
        logger=results,
        checkpoint=False,
        **data,
    )
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
    # Acme's D4PG and DDPG steps copy online -> target in this order (observation networks are identities here).
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
        acme_class=acme_class,
        jit_compile=config.learner.jit_compile,
        target_pairs=targets,
    )
