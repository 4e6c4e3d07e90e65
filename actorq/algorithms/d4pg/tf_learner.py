"""D4PG's learner builder: Acme's TF D4PG learner on the ``d4pg:`` settings (TensorFlow; never torch).

:data:`actorq.algorithms.d4pg.D4PG.learner_builder` names :func:`build`; ``actorq.learners.make_learner`` resolves
it in the learner's process and wraps nothing else: checkpointing, the compiled update and the weights it publishes
are :class:`actorq.learners.AcmeLearner`'s, the same for every algorithm.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acme import specs as acme_specs
from acme.agents.tf.d4pg import learning as d4pg_learning
from acme.utils import counting

from actorq.algorithms.d4pg import ALGORITHM
from actorq.algorithms.d4pg.tf_networks import make_networks
from actorq.config import ExperimentConfig
from actorq.learners import AcmeLearner
from actorq.learners.actor_critic import build_actor_critic
from actorq.replay.experience import make_dataset_iterator


def build(
    config: ExperimentConfig,
    spec: acme_specs.EnvironmentSpec,
    replay_address: str,
    counter: counting.Counter,
    results: Any,
    checkpoint_dir: str | Path | None,
) -> AcmeLearner:
    """Acme's D4PG learner reading from the Reverb server at ``replay_address`` (D4PG's ``learner_builder``)."""
    d4pg = ALGORITHM.settings(config)
    nets = make_networks(
        spec.actions, config.network.policy_layers, d4pg.critic_layers, d4pg.vmin, d4pg.vmax, d4pg.num_atoms
    )
    rates = (d4pg.policy_lr, d4pg.critic_lr)
    data = {"dataset_iterator": make_dataset_iterator(replay_address, config)}
    return build_actor_critic(
        d4pg_learning.D4PGLearner,
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
