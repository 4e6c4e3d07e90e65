"""Experience spread over several Reverb servers (``replay.shards``; the rules: :mod:`actorq.config.shards`).

The learner reads every shard through one ``tf.data`` pipeline built as Acme's ``make_reverb_dataset`` builds its
own (a non-deterministic parallel interleave of batched ``TrajectoryDataset`` workers), with
``learner.sample_parallelism`` workers per shard: each batch comes from one shard, and the learner takes whichever
batch is ready first, so a slow or restarting shard slows the learner's draw from it without stalling the learner
(``sample_from_datasets`` / ``choose_from_datasets`` would wait on the shard they picked). The price: a slower shard
is sampled less often than its share.

Priority updates (DQN's prioritized replay) must reach the server that holds each item, but Acme's learner hands
back only item keys. The pipeline therefore records each batch's keys with the shard it came from in a
:class:`PriorityRouter` (the learner's ``replay_client``), which splits every ``mutate_priorities`` call by shard
and sends each part to that shard's client. It keeps the keys of the last ``capacity`` sampled items: the ones in
flight between the dataset and the learner's update, with a wide margin.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Mapping

import numpy as np
import reverb
import tensorflow as tf
import tree

from actorq.config import ExperimentConfig
from actorq.config.shards import split_addresses
from actorq.replay.client import new_client, wait_for_server
from actorq.replay.tables import EXPERIENCE_TABLE

log = logging.getLogger(__name__)


class PriorityRouter:
    """A stand-in for ``reverb.Client`` in Acme's learners: ``mutate_priorities`` routed to each item's shard.

    Args:
        clients: One client per shard, in shard order.
        capacity: Sampled item keys remembered (older ones are forgotten first).
    """

    def __init__(self, clients: list[reverb.Client], capacity: int):
        self.clients = list(clients)
        self.capacity = int(capacity)
        self._shard_of: OrderedDict[int, int] = OrderedDict()
        self._lock = threading.Lock()
        self.unrouted = 0
        """Keys whose shard was no longer (or never) known; their priority updates were dropped."""

    def record(self, keys: np.ndarray, shard: int) -> np.ndarray:
        """Remember that the items ``keys`` were sampled from ``shard``; returns ``keys`` (a pipeline pass-through)."""
        shard = int(shard)
        with self._lock:
            for key in np.asarray(keys).ravel().tolist():
                self._shard_of[key] = shard
                self._shard_of.move_to_end(key)
            while len(self._shard_of) > self.capacity:
                self._shard_of.popitem(last=False)
        return keys

    def shard_of(self, key: int) -> int | None:
        """The shard ``key`` was last sampled from, if it is still remembered."""
        with self._lock:
            return self._shard_of.get(int(key))

    def split(self, updates: Mapping[int, float]) -> dict[int, dict[int, float]]:
        """``updates`` grouped by the shard that holds each key (unknown keys left out and counted)."""
        by_shard: dict[int, dict[int, float]] = defaultdict(dict)
        unknown = 0
        with self._lock:
            for key, priority in updates.items():
                shard = self._shard_of.get(int(key))
                if shard is None:
                    unknown += 1
                else:
                    by_shard[shard][int(key)] = float(priority)
        if unknown:
            if not self.unrouted:
                log.warning("%d priority update(s) for items whose shard is not known; dropped", unknown)
            self.unrouted += unknown
        return dict(by_shard)

    def mutate_priorities(self, table: str, updates: Mapping[int, float] | None = None, deletes=None) -> None:
        """Reverb's ``Client.mutate_priorities``, each update sent to the shard its item was sampled from."""
        if deletes:
            raise NotImplementedError("PriorityRouter routes priority updates only, not deletes")
        for shard, part in sorted(self.split(updates or {}).items()):
            self.clients[shard].mutate_priorities(table, updates=part)


def router_capacity(config: ExperimentConfig) -> int:
    """Keys a :class:`PriorityRouter` remembers: every batch the pipeline can hold (prefetch, one per worker per
    shard, one being trained on) four times over."""
    batches = config.learner.prefetch_size + config.replay.shards * config.learner.sample_parallelism + 2
    return 4 * batches * config.learner.batch_size


def priority_client(address: str, config: ExperimentConfig) -> reverb.Client | PriorityRouter:
    """The learner's ``replay_client`` for priority updates: a plain client for one server, else a router."""
    addresses = split_addresses(address)
    if len(addresses) == 1:
        return new_client(addresses[0])
    return PriorityRouter([new_client(a) for a in addresses], router_capacity(config))


def make_sharded_dataset(
    addresses: list[str],
    config: ExperimentConfig,
    router: PriorityRouter | None = None,
    rate_limiter_timeout_ms: int = -1,
) -> tf.data.Dataset:
    """Batches from every shard's experience table (see the module docstring); ``router`` learns each batch's shard.

    The table signature is read from shard 0 (every shard has the same tables), blocking until it answers as
    Acme's dataset does. ``rate_limiter_timeout_ms`` >= 0: a shard's worker ends once its rate limiter holds a sample
    that long, and the dataset ends when every worker has (``actorq bench replay --shards`` ends its blocks so);
    -1, the learner's: wait for as long as it takes.
    """
    info = reverb.Client(addresses[0]).server_info()
    signature = info[EXPERIENCE_TABLE].signature
    shapes = tree.map_structure(lambda spec: spec.shape, signature)
    dtypes = tree.map_structure(lambda spec: spec.dtype, signature)
    batch_size = config.learner.batch_size
    shards = len(addresses)
    workers = shards * config.learner.sample_parallelism
    address_table = tf.constant(addresses)

    def record(sample: reverb.ReplaySample, shard: tf.Tensor) -> reverb.ReplaySample:
        # The keys pass through the router, so this runs for every batch the learner can see.
        keys = tf.numpy_function(router.record, [sample.info.key, shard], tf.uint64)  # stateful in TF 2.8
        keys.set_shape(sample.info.key.shape)
        return sample._replace(info=sample.info._replace(key=keys))

    def worker(index: tf.Tensor) -> tf.data.Dataset:
        shard = index % shards
        dataset = reverb.TrajectoryDataset(
            server_address=address_table[shard],
            table=EXPERIENCE_TABLE,
            shapes=shapes,
            dtypes=dtypes,
            max_in_flight_samples_per_worker=2 * batch_size,
            rate_limiter_timeout_ms=rate_limiter_timeout_ms,
        ).batch(batch_size, drop_remainder=True)
        if router is not None:
            dataset = dataset.map(lambda sample: record(sample, shard))
        return dataset

    dataset = tf.data.Dataset.range(workers).interleave(
        worker, cycle_length=workers, num_parallel_calls=workers, deterministic=False
    )
    return dataset.prefetch(config.learner.prefetch_size)


def connect_shards(address: str, timeout_s: float) -> list[reverb.Client]:
    """A client per shard of ``address`` (every shard answered), in shard order."""
    return [wait_for_server(a, timeout_s=timeout_s) for a in split_addresses(address)]


def experience_counts(client: reverb.Client, timeout_s: int = 5) -> dict[str, int]:
    """One server's experience table: items held, inserts and samples completed (the rate limiter's counts)."""
    table = client.server_info(timeout=timeout_s)[EXPERIENCE_TABLE]
    limiter = table.rate_limiter_info
    return {
        "size": int(table.current_size),
        "inserts": int(limiter.insert_stats.completed),
        "samples": int(limiter.sample_stats.completed),
    }
