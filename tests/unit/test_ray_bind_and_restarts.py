"""``ray.bind`` / ``ray.connect_timeout_s`` (validated before anything starts), what a local cluster is started
with, and restart counts from the roles' start log: read, combined with pid changes, and reported unknown (never 0)
when the log cannot be read. Without a cluster; the real one is tests/ray/test_ray_connect.py."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from actorq.config import ConfigError, config_from_dict
from actorq.launchers.placement import RunContext
from actorq.launchers.ray_connect import LOOPBACK_BIND, local_cluster_options
from actorq.launchers.ray_placement import RayPlacement
from actorq.launchers.ray_starts import StartCounts, StartLog
from tests.conftest import tiny_config


def test_bind_defaults_to_loopback_and_timeout_to_15s():
    config = config_from_dict({"launcher": "ray"})
    assert config.ray.bind == LOOPBACK_BIND == "127.0.0.1" and config.ray.connect_timeout_s == 15.0
    assert config_from_dict({"ray": {"bind": "10.0.0.5", "connect_timeout_s": 2.5}}).ray.bind == "10.0.0.5"


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"bind": "0.0.0.0"}, "means every interface"),
        ({"bind": "::"}, "means every interface"),
        ({"bind": "myhost"}, "is not an IP address"),
        ({"connect_timeout_s": 0}, "must be > 0 and <= 600"),
        ({"connect_timeout_s": -1}, "must be > 0 and <= 600"),
        ({"connect_timeout_s": 601}, "must be > 0 and <= 600"),
    ],
)
def test_bad_bind_or_timeout_says_what_to_fix(section, message):
    with pytest.raises(ConfigError, match=message):
        config_from_dict({"ray": section})


def test_local_cluster_listens_on_the_bind_and_warns_when_ray_cannot(caplog):
    with caplog.at_level(logging.WARNING):
        assert local_cluster_options("127.0.0.1") == {
            "_node_ip_address": "127.0.0.1",
            "include_dashboard": False,
        }
    assert not caplog.records
    with caplog.at_level(logging.WARNING):
        assert local_cluster_options("10.0.0.5")["_node_ip_address"] == "10.0.0.5"
    assert "listen on every interface" in caplog.text


@pytest.mark.subprocess
def test_connect_modules_import_without_ray():
    code = (
        "import sys, actorq.launchers.ray_connect, actorq.launchers.ray_starts\n"
        "assert 'ray' not in sys.modules and 'grpc' not in sys.modules, 'imported at module level'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


class _Ref:
    def __init__(self, value):
        self.value = value


class _FakeRay:
    """``get`` answers a start log's ``counts`` (or raises what it is told to); ``kill`` records."""

    def __init__(self, log: StartLog):
        self.log = log
        self.error: Exception | None = None
        self.killed: list = []

    def get(self, ref, timeout=None):
        if self.error is not None:
            raise self.error
        return ref.value

    def kill(self, handle, no_restart=True):
        self.killed.append(handle)


class _LogHandle:
    def __init__(self, log: StartLog):
        self.counts = type("_M", (), {"remote": lambda _self: _Ref(log.counts())})()


def _counts() -> tuple[StartLog, _FakeRay, StartCounts]:
    log = StartLog()
    ray = _FakeRay(log)
    return log, ray, StartCounts(ray, poll_s=0.0, handle=_LogHandle(log))


def test_restarts_are_starts_less_one_and_unknown_when_unreadable():
    log, ray, counts = _counts()
    assert counts.restarts("actor_0") == 0 and counts.unknown == ""
    for pid in (11, 12, 13):
        log.started("actor_0", pid)
    log.started("learner", 20)
    assert (counts.restarts("actor_0"), counts.restarts("learner")) == (2, 0)
    ray.error = TimeoutError("GetTimeoutError: no answer")
    log.started("actor_0", 14)
    # Unreadable: the last counts stand and the reason is kept; the new start is not seen, nor read as 0.
    assert counts.restarts("actor_0") == 2 and counts.unknown.startswith("TimeoutError: ")
    ray.error = None
    assert counts.restarts("actor_0") == 3 and counts.unknown == ""
    counts.close()
    assert ray.killed == [counts.handle]


def test_placement_takes_the_log_or_the_pid_changes_and_flags_unknown(tmp_path):
    config = tiny_config("dqn", launcher="ray")
    placement = RayPlacement(RunContext(config, tmp_path, tmp_path / "config.yaml", 0, None))
    log, ray, placement._starts = _counts()
    placement.ray = ray
    from actorq.launchers.ray_placement import _Role
    from actorq.launchers.topology import RoleSpec

    role = placement.roles["actor_0"] = _Role(RoleSpec("actor", 0), handle=None, actor_id="a")
    for pid in (1, 2, 3, 4):
        log.started("actor_0", pid)
    role.pids = (1, 4)  # the driver saw two of the four workers
    assert placement.restarts("actor_0") == 3
    assert "restarts_unknown" not in placement.summary_extra()["ray"]
    role.pids = (1, 2, 3, 4, 5)  # a worker that never recorded its start: the log is short, so it says so
    assert placement.summary_extra()["ray"]["restarts_unknown"] == "the start log missed starts of actor_0"
    role.pids = (1, 4)
    ray.error = ConnectionError("node gone")
    role.pids = (1, 4, 5, 6, 7, 8, 9)  # more pid changes than the log held
    assert placement.restarts("actor_0") == 6
    assert placement.summary_extra()["ray"]["restarts_unknown"] == "ConnectionError: node gone"
