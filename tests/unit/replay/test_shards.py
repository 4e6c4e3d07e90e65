"""Replay shards against two in-process Reverb servers: actors write to their shard, the learner samples every
shard, priority updates reach the server holding each item, and both shards' checkpoints restore."""

from __future__ import annotations

import numpy as np
import pytest

from actorq.config import replace
from actorq.config.shards import join_addresses
from actorq.replay import EXPERIENCE_TABLE
from actorq.replay.shards import experience_counts
from tests.conftest import tiny_config

pytestmark = pytest.mark.reverb


def two_shards(**replay):
    config = tiny_config()
    return replace(config, replay=replace(config.replay, shards=2, **replay))


def start_shards(reverb_server, config):
    servers = [reverb_server(config) for _ in range(config.replay.shards)]
    return servers, join_addresses([f"localhost:{s.port}" for s in servers])


def held_priorities(server, draws: int = 3000) -> dict[int, float]:
    """Key -> priority of the items a server holds, as its sampler reports them (enough draws to see them all)."""
    seen = {}
    client = server.localhost_client()
    for sample in client.sample(EXPERIENCE_TABLE, num_samples=draws, emit_timesteps=False):
        seen[int(sample.info.key)] = float(sample.info.priority)
    return seen


def test_each_actor_writes_to_its_own_shard(reverb_server, tmp_path):
    from actorq.roles.actor import ActorRole

    config = two_shards()
    servers, address = start_shards(reverb_server, config)
    steps = {0: 40, 1: 70}
    for actor_id, n in steps.items():
        role = ActorRole(config, tmp_path, address, actor_id=actor_id, connect_timeout_s=10, weights_key=None)
        for _ in range(n):
            role.step()
        role._flush_experience()
    inserts = [experience_counts(s.localhost_client())["inserts"] for s in servers]
    # n-step 1: one item per env step, plus none across episode ends (CartPole episodes end often at random)
    assert inserts == [40, 70]


def test_the_learner_samples_every_shard_and_priorities_go_back_to_each_items_server(reverb_server):
    from actorq.bench.learner import prefill
    from actorq.envs import make_environment
    from actorq.learners import make_learner
    from actorq.replay.tables import environment_spec_for

    config = two_shards()
    assert config.replay.prioritized  # DQN writes |TD error| priorities back
    servers, address = start_shards(reverb_server, config)
    held = []
    for k, server in enumerate(servers):
        prefill(server.localhost_client(), config, config.replay.min_size + 30, seed=k)
        held.append(held_priorities(server))
        assert set(held[k].values()) == {1.0}  # new items have priority 1
    assert not set(held[0]) & set(held[1])
    env = make_environment(config.env)
    learner = make_learner(config, environment_spec_for(env), address)
    env.close()
    for _ in range(12):
        learner.step()
    samples = [experience_counts(s.localhost_client())["samples"] for s in servers]
    assert all(n > 0 for n in samples), samples
    for k, server in enumerate(servers):
        after = held_priorities(server)
        assert set(after) <= set(held[k])  # (items whose new priority is tiny may not be drawn)
        changed = [key for key, p in after.items() if p != 1.0]
        assert changed, f"no priority changed on shard {k}"


def test_the_router_sends_each_update_to_the_shard_it_sampled_the_item_from(reverb_server):
    from actorq.bench.learner import prefill
    from actorq.replay.experience import make_dataset
    from actorq.replay.shards import priority_client

    config = two_shards()
    servers, address = start_shards(reverb_server, config)
    for k, server in enumerate(servers):
        prefill(server.localhost_client(), config, config.replay.min_size + 10, seed=k)
    owner = {key: k for k, server in enumerate(servers) for key in held_priorities(server)}
    router = priority_client(address, config)
    batches = iter(make_dataset(address, config, router))
    keys = set()
    while {owner[k] for k in keys} != {0, 1}:  # until both shards have been sampled
        keys |= {int(k) for k in next(batches).info.key.numpy()}
    router.mutate_priorities(EXPERIENCE_TABLE, updates={key: 5.0 + owner[key] for key in keys})
    assert router.unrouted == 0
    for k, server in enumerate(servers):
        after = held_priorities(server)
        updated = {key: p for key, p in after.items() if key in keys}
        assert updated and set(updated.values()) == {5.0 + k}
        assert {p for key, p in after.items() if key not in keys} == {1.0}


def test_every_shard_checkpoints_and_restores(tmp_path):
    from actorq.bench.learner import prefill
    from actorq.roles.replay import ReplayRole

    config = two_shards()
    config = replace(config, learner=replace(config.learner, checkpoint_period_s=60.0))
    sizes = {0: 60, 1: 75}
    roles = [ReplayRole(config, tmp_path, shard=k) for k in sizes]
    for role, size in zip(roles, sizes.values(), strict=True):
        prefill(role.server.localhost_client(), config, size, seed=role.shard)
        role.checkpoint()
        role.server.stop()
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
        "replay",
        "replay.kept",  # each checkpoint replay completed, kept until the next one is
        "replay_1",
        "replay_1.kept",
    ]
    restored = [ReplayRole(config, tmp_path, shard=k) for k in sizes]
    try:
        counts = [experience_counts(role.server.localhost_client())["size"] for role in restored]
        assert counts == [60, 75]
        assert [role.dir.name for role in restored] == ["replay", "replay_1"]
    finally:
        for role in restored:
            role.server.stop()


def test_unknown_keys_are_dropped_and_counted():
    from actorq.replay.shards import PriorityRouter

    class Recorder:
        def __init__(self):
            self.calls = []

        def mutate_priorities(self, table, updates):
            self.calls.append((table, updates))

    clients = [Recorder(), Recorder()]
    router = PriorityRouter(clients, capacity=3)
    router.record(np.array([1, 2], np.uint64), 0)
    router.record(np.array([3, 4], np.uint64), 1)  # capacity 3: key 1 is forgotten
    router.mutate_priorities("t", updates={np.uint64(1): 9.0, np.uint64(2): 2.0, np.uint64(4): 4.0})
    assert clients[0].calls == [("t", {2: 2.0})] and clients[1].calls == [("t", {4: 4.0})]
    assert router.unrouted == 1
