"""Experience in and out of replay: n-step transition adders (actors) and Reverb dataset (learner).

Actors write through :mod:`actorq.replay.nstep` (Acme's n-step transitions, computed in numpy and sent in chunks:
~10x cheaper per env step than Acme's ``NStepTransitionAdder``, same sampled items). :func:`make_acme_adder`
keeps Acme's adder for comparisons (the equivalence test, benches).
"""

from __future__ import annotations

from collections.abc import Iterator

import reverb
from acme import datasets as acme_datasets
from acme.adders import reverb as acme_adders

from actorq.config import ExperimentConfig
from actorq.config.shards import split_addresses
from actorq.replay.nstep import ChunkedTransitionWriter, NStepAdder
from actorq.replay.shards import PriorityRouter, make_sharded_dataset
from actorq.replay.tables import EXPERIENCE_TABLE


def make_adders(client: reverb.Client, config: ExperimentConfig, num_envs: int = 1) -> list[NStepAdder]:
    """One n-step adder per environment, all writing through one chunked writer to the experience table."""
    writer = ChunkedTransitionWriter(client, EXPERIENCE_TABLE)
    return [NStepAdder(writer, config.replay.n_step, config.replay.discount) for _ in range(num_envs)]


def make_adder(client: reverb.Client, config: ExperimentConfig) -> NStepAdder:
    """The n-step adder of a one-environment actor (priority 1 for new items)."""
    return make_adders(client, config, 1)[0]


def make_acme_adder(
    client: reverb.Client, config: ExperimentConfig, table: str = EXPERIENCE_TABLE
) -> acme_adders.NStepTransitionAdder:
    """Acme's n-step transition adder writing to ``table`` (priority 1 for new items): the reference."""
    return acme_adders.NStepTransitionAdder(
        client=client,
        n_step=config.replay.n_step,
        discount=config.replay.discount,
        priority_fns={table: lambda _: 1.0},
    )


def make_dataset(address: str, config: ExperimentConfig, router: PriorityRouter | None = None):
    """The learner's batched, prefetched tf.data.Dataset over the experience table: Acme's Reverb dataset for one
    server; for several shards (``address`` lists them, comma-separated) one dataset over all of them
    (:func:`actorq.replay.shards.make_sharded_dataset`), teaching ``router`` each batch's shard."""
    addresses = split_addresses(address)
    if len(addresses) > 1:
        return make_sharded_dataset(addresses, config, router)
    return acme_datasets.make_reverb_dataset(
        server_address=addresses[0],
        batch_size=config.learner.batch_size,
        prefetch_size=config.learner.prefetch_size,
        table=EXPERIENCE_TABLE,
        num_parallel_calls=config.learner.sample_parallelism,
    )


def make_dataset_iterator(address: str, config: ExperimentConfig) -> Iterator[reverb.ReplaySample]:
    """The same dataset as an iterator (Acme's D4PG learner takes an iterator, its DQN learner a dataset)."""
    return iter(make_dataset(address, config))
