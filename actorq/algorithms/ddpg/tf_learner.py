"""DDPG's learner builder: Acme's TF DDPG learner on the ``ddpg:`` settings (TensorFlow; never torch).

:data:`actorq.algorithms.ddpg.DDPG.learner_builder` names :func:`build`; ``actorq.learners.make_learner`` resolves
it in the learner's process. Checkpointing, the split/compiled update and the published weights are
:class:`actorq.learners.AcmeLearner`'s; the private members it relies on are the actor-critic ones of
:mod:`actorq.learners.acme_adapter`, checked on Acme's DDPG class when a learner is built.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acme import specs as acme_specs
from acme.agents.tf.ddpg import learning as ddpg_learning
from acme.utils import counting

from actorq.algorithms.ddpg import ALGORITHM
from actorq.algorithms.ddpg.tf_networks import make_networks
from actorq.config import ExperimentConfig
from actorq.learners import AcmeLearner
from actorq.learners.actor_critic import build_actor_critic
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
    ddpg = ALGORITHM.settings(config)
    nets = make_networks(spec.actions, config.network.policy_layers, ddpg.critic_layers)
    rates = (ddpg.policy_lr, ddpg.critic_lr)
    data = {"dataset": make_dataset(replay_address, config)}
    return build_actor_critic(
        ddpg_learning.DDPGLearner,
        config,
        spec,
        nets["policy"],
        nets["critic"],
        rates,
        data,
        counter,
        results,
        checkpoint_dir,
    )
