"""actorq.roles.health: the heartbeat a role writes in a container, and the check Docker's HEALTHCHECK runs."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

from actorq.roles.health import HEALTH_FILE_ENV, STALE_FLOOR_S, check, heartbeat


def test_no_heartbeat_file_outside_containers(tmp_path, monkeypatch):
    monkeypatch.delenv(HEALTH_FILE_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    heartbeat("actor", 1.0)
    assert list(tmp_path.iterdir()) == []


def test_fresh_heartbeat_is_healthy_and_a_stale_one_is_not(tmp_path, monkeypatch):
    path = tmp_path / "health.json"
    monkeypatch.setenv(HEALTH_FILE_ENV, str(path))
    heartbeat("learner", log_period_s=30.0)
    beat = json.loads(path.read_text())
    assert beat["role"] == "learner" and beat["stale_after_s"] == 300.0  # 10 metrics periods above the floor
    assert check(path)[0]
    healthy, reason = check(path, now=beat["time"] + 301)
    assert not healthy and "stuck" in reason
    heartbeat("actor", log_period_s=0.5)
    assert json.loads(path.read_text())["stale_after_s"] == STALE_FLOOR_S


def test_missing_or_broken_heartbeat_is_unhealthy(tmp_path):
    assert check(tmp_path / "absent.json") == (
        False,
        f"no heartbeat at {tmp_path / 'absent.json'} yet (the role has not started its loop)",
    )
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    healthy, reason = check(broken)
    assert not healthy and reason.startswith("unreadable heartbeat")


def test_replay_is_healthy_only_while_its_port_accepts_connections(tmp_path, monkeypatch):
    path = tmp_path / "health.json"
    monkeypatch.setenv(HEALTH_FILE_ENV, str(path))
    server = socket.create_server(("localhost", 0))
    port = server.getsockname()[1]
    heartbeat("replay", 1.0, port=port)
    assert check(path)[0]
    server.close()
    healthy, reason = check(path)
    assert not healthy and f"port {port} refuses connections" in reason


@pytest.mark.subprocess
def test_module_exit_status_is_the_docker_healthcheck_contract(tmp_path):
    path = tmp_path / "health.json"
    run = [sys.executable, "-m", "actorq.roles.health"]
    env = {HEALTH_FILE_ENV: str(path), "PATH": "/usr/bin:/bin"}
    assert subprocess.run(run, env=env, capture_output=True).returncode == 1
    path.write_text(json.dumps({"role": "actor", "time": 0, "stale_after_s": 60, "port": None}))
    assert subprocess.run(run, env=env, capture_output=True).returncode == 1
    subprocess.run(
        [sys.executable, "-c", "from actorq.roles.health import heartbeat; heartbeat('actor', 1.0)"],
        env=env,
        check=True,
    )
    done = subprocess.run(run, env=env, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("actor: last heartbeat")
