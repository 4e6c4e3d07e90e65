"""Replay shards: the rules written once (actorq.config.shards), their config checks, the topology and the summary."""

from __future__ import annotations

import argparse

import pytest

from actorq.config import ConfigError, replace
from actorq.config.shards import (
    actor_address,
    actor_shard,
    join_addresses,
    replay_label,
    shard_cpus,
    shard_port,
    split_addresses,
    weights_address,
)
from actorq.launchers.monitor import RunMonitor
from actorq.launchers.topology import role_command, topology
from actorq.status import ActorStatus, ReplayStatus
from tests.conftest import tiny_config


def sharded(shards: int, actors: int = 4, **changes):
    config = tiny_config()
    return replace(
        config,
        replay=replace(config.replay, shards=shards),
        actor=replace(config.actor, num_actors=actors),
        **changes,
    )


def test_actors_spread_over_the_shards_round_robin():
    assert [actor_shard(i, 1) for i in range(4)] == [0, 0, 0, 0]
    assert [actor_shard(i, 2) for i in range(5)] == [0, 1, 0, 1, 0]
    assert [actor_shard(i, 3) for i in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    with pytest.raises(ValueError):
        actor_shard(0, 0)


def test_every_role_reads_the_same_address_list():
    address = join_addresses(["h0:1", "h1:2", "h2:3"])
    assert split_addresses(address) == ["h0:1", "h1:2", "h2:3"]
    assert split_addresses("localhost:8000") == ["localhost:8000"]
    assert weights_address(address) == "h0:1"  # weights travel through shard 0 only
    assert [actor_address(address, i) for i in range(4)] == ["h0:1", "h1:2", "h2:3", "h0:1"]
    with pytest.raises(ValueError, match="empty entry"):
        split_addresses("h0:1,")
    for bad in ("h0", "h0:", ":8000", "h0:http", "h0:0", "h0:65536", "h0:1,h1"):
        with pytest.raises(ValueError, match="is not HOST:PORT"):
            split_addresses(bad)
    assert split_addresses("[::1]:8000") == ["[::1]:8000"]


def test_role_cli_refuses_a_malformed_replay_address_before_starting(capsys):
    from actorq.roles.cli import add_arguments

    parser = add_arguments(argparse.ArgumentParser(prog="actorq role"))
    with pytest.raises(SystemExit) as exit_info:
        parser.parse_args(["actor", "--config", "c.yaml", "--run-dir", "r", "--replay-address", "h0:1,h1"])
    assert exit_info.value.code == 2
    assert "'h1' is not HOST:PORT" in capsys.readouterr().err


def test_shard_names_ports_and_cores():
    assert [replay_label(k) for k in range(3)] == ["replay", "replay_1", "replay_2"]
    assert [shard_port(8000, k) for k in range(3)] == [8000, 8001, 8002]
    assert shard_port(0, 2) == 0  # a free port, picked per shard
    assert shard_cpus((2, 3), 1, 0) == (2, 3)  # one shard keeps every listed core
    assert [shard_cpus((2, 3), 3, k) for k in range(3)] == [(2,), (3,), (2,)]
    assert shard_cpus((), 4, 3) == ()


@pytest.mark.parametrize(
    ("shards", "actors", "changes", "message"),
    [
        (0, 2, {}, "must be >= 1"),
        (3, 2, {}, "exceeds actor.num_actors=2"),
        (2, 2, {"launcher": "launchpad"}, "not supported by launcher 'launchpad'"),
    ],
)
def test_bad_shard_settings_say_what_to_fix(shards, actors, changes, message):
    from actorq.config.loading import validate

    with pytest.raises(ConfigError, match=message):
        validate(sharded(shards, actors, **changes))


def test_a_fixed_port_must_leave_room_for_every_shard():
    from actorq.config.loading import validate

    config = sharded(2)
    with pytest.raises(ConfigError, match="past 65535"):
        validate(replace(config, replay=replace(config.replay, port=65535)))
    validate(replace(config, replay=replace(config.replay, port=65534)))


def test_the_topology_starts_every_shard_first_with_its_own_port():
    config = sharded(2, actors=3)
    specs = topology(config)
    assert [s.label for s in specs[:2]] == ["replay", "replay_1"]
    assert [s.label for s in specs if s.role == "replay"] == ["replay", "replay_1"]
    one = role_command(specs[0], "c.yaml", "run", "", 8000, weights_key_file=None)
    two = role_command(specs[1], "c.yaml", "run", "", 8001, weights_key_file=None)
    assert "--index" not in one and one[one.index("--port") + 1] == "8000"  # shard 0: the one-server command
    assert two[two.index("--index") + 1] == "1" and two[two.index("--port") + 1] == "8001"
    assert [s.label for s in topology(tiny_config()) if s.role == "replay"] == ["replay"]
    # the role's own host (in-process errors, thread names) names a shard as the launcher does
    from actorq.roles.host import RoleHost

    assert [RoleHost("replay", config, "run", index=s.index).label for s in specs[:2]] == [
        "replay",
        "replay_1",
    ]


def test_the_summary_sums_the_shards_and_lists_each(tmp_path):
    config = sharded(2, actors=3)
    records = {
        "replay": ReplayStatus(role="replay", label="replay", inserts=100, samples=400, size=90),
        "replay_1": ReplayStatus(role="replay", label="replay_1", inserts=30, samples=120, size=30),
        "actor_0": ActorStatus(role="actor", label="actor_0", step=60),
        "actor_1": ActorStatus(role="actor", label="actor_1", step=31),
        "actor_2": ActorStatus(role="actor", label="actor_2", step=45),
    }
    monitor = RunMonitor(config, tmp_path, records.get, [s.label for s in topology(config)])
    replay = monitor.summary("max_minutes")["replay"]
    assert replay["shards"] == 2
    assert (replay["inserts"], replay["samples"], replay["size"]) == (130, 520, 120)
    # actors 0 and 2 write to shard 0, actor 1 to shard 1
    assert replay["per_shard"]["replay"]["actor_steps"] == 105
    assert replay["per_shard"]["replay_1"] == {"inserts": 30, "samples": 120, "size": 30, "actor_steps": 31}
    assert replay["actor_steps"] == monitor.actor_steps() == 136


class _FakeRay:
    def __init__(self, advertised: dict[str, float]):
        self.advertised = advertised

    def cluster_resources(self) -> dict[str, float]:
        return dict(self.advertised)


class _Actors:
    """Stands in for the Ray actor class: records each role's options and constructor arguments."""

    def __init__(self):
        self.started: dict[str, tuple[dict, tuple]] = {}

    def options(self, **options):
        actors = self

        class _Bound:
            def remote(self, *args):
                actors.started[args[1]] = (options, args)
                return type("_Handle", (), {"_actor_id": type("_Id", (), {"hex": lambda _s: "0" * 32})()})()

        return _Bound()


def _ray_placement(tmp_path, advertised: dict[str, float], shards: int = 2, port: int = 0):
    from actorq.launchers.placement import RunContext
    from actorq.launchers.ray_placement import RayPlacement

    config = sharded(shards, actors=2, launcher="ray")
    config = replace(config, replay=replace(config.replay, port=port))
    placement = RayPlacement(RunContext(config, tmp_path, tmp_path / "config.yaml", 0, None))
    placement.ray = _FakeRay(advertised)
    placement._placing = placement._placement_resources()
    placement._actor_class = _Actors()
    return placement


def test_under_ray_each_shard_asks_a_whole_replay_host_and_its_own_port(tmp_path):
    placement = _ray_placement(tmp_path, {"replay_host": 2, "learner_host": 1}, port=7000)
    for spec in topology(placement.run.config):
        placement.start(spec, address="" if spec.role == "replay" else "10.0.0.5:7000,10.0.0.6:7001")
    started = placement._actor_class.started
    for shard, label in enumerate(("replay", "replay_1")):
        options, args = started[label]
        assert options["resources"] == {"replay_host": 1.0}  # one shard per host advertising 1
        assert (args[5], args[6]) == (shard, 7000 + shard)  # its index and port
    assert started["learner"][0]["resources"] != {"replay_host": 1.0}


def test_under_ray_without_replay_hosts_the_shards_go_with_the_learner(tmp_path):
    from actorq.launchers.ray_placement import SLIVER

    placement = _ray_placement(tmp_path, {"learner_host": 1})
    for spec in topology(placement.run.config):
        placement.start(spec, address="" if spec.role == "replay" else "a:1,b:2")
    started = placement._actor_class.started
    assert (
        started["replay_1"][0]["resources"] == started["learner"][0]["resources"] == {"learner_host": SLIVER}
    )


def test_under_ray_too_few_replay_hosts_is_an_error_before_any_role_starts(tmp_path):
    from actorq.launchers.ray_placement import RayLauncherError

    with pytest.raises(RayLauncherError, match="replay.shards=2 but the cluster advertises 1 replay_host"):
        _ray_placement(tmp_path, {"replay_host": 1})
