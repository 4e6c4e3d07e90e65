"""Experience in and out of replay: Acme's n-step transition adder (actors) and Reverb dataset (learner)."""

from __future__ import annotations

from collections.abc import Iterator

import reverb
from acme import datasets as acme_datasets
from acme.adders import reverb as acme_adders

from actorq.config import ExperimentConfig
from actorq.replay.tables import EXPERIENCE_TABLE


def make_adder(client: reverb.Client, config: ExperimentConfig) -> acme_adders.NStepTransitionAdder:
    """Acme's n-step transition adder writing to the experience table (priority 1 for new items)."""
    return acme_adders.NStepTransitionAdder(
        client=client,
        n_step=config.replay.n_step,
        discount=config.replay.discount,
        priority_fns={EXPERIENCE_TABLE: lambda _: 1.0},
    )


def make_dataset(address: str, config: ExperimentConfig):
    """Acme's Reverb dataset over the experience table, batched and prefetched (a tf.data.Dataset)."""
    return acme_datasets.make_reverb_dataset(
        server_address=address,
        batch_size=config.learner.batch_size,
        prefetch_size=config.learner.prefetch_size,
        table=EXPERIENCE_TABLE,
        num_parallel_calls=config.learner.sample_parallelism,
    )


def make_dataset_iterator(address: str, config: ExperimentConfig) -> Iterator[reverb.ReplaySample]:
    """The same dataset as an iterator (Acme's D4PG learner takes an iterator, its DQN learner a dataset)."""
    return iter(make_dataset(address, config))
