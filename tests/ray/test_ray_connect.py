"""``--ray-address`` that leads nowhere fails fast and leaves nothing; a cluster the launcher starts listens on
loopback only. Loopback addresses only; no fixture cluster (each test makes what it needs).

Unreachable: refused (a port nothing listens on), silent (a socket that accepts but never answers) and not a Ray
head (an HTTP server): ``actorq train`` exits 2 within 20 s naming the cause, makes no run directory and leaves no
process (its session, started apart, is empty afterwards, and no Ray daemon appeared).

Bound: a run's own cluster (``--ray-bind`` left at 127.0.0.1): every listening socket of every process the launcher
started (psutil, by pid: the driver, GCS, raylet, agents, role workers) is on loopback, save the replay role's Reverb
port, which Reverb 0.7.3 binds on every interface (its server takes a port, no address). The probe accepts the GCS
it found; a role killed with -9 is counted once, from the roles' start log.
"""

from __future__ import annotations

import http.server
import ipaddress
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from actorq.config import save_config
from actorq.launchers.topology import topology
from actorq.status import read_status
from tests.conftest import tiny_config
from tests.training import train_argv
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.ray

RAY_DAEMONS = ("gcs_server", "raylet", "default_worker.py", "ray::")
"""Command-line fragments of the processes a Ray cluster (or a driver's attempt to join one) starts."""


def _env() -> dict[str, str]:
    """This environment without tests/ray/conftest.py's RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, which makes Ray take
    127.0.0.1 as every node's IP whatever the launcher asks: the launcher's own choice must be what is tested."""
    return {k: v for k, v in os.environ.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _train(tmp_path: Path, config, *extra: str) -> tuple[list[str], Path]:
    save_config(config, tmp_path / "in.yaml")
    run_dir = tmp_path / "run"
    command = train_argv(
        str(tmp_path / "in.yaml"),
        "--run-dir",
        str(run_dir),
    )
    return [*command, "--launcher", "ray", "--quiet", *extra], run_dir


def _in_session(sid: int) -> list[psutil.Process]:
    """Live processes of session ``sid`` (a command started with ``start_new_session``: its pid)."""
    found = []
    for proc in psutil.process_iter():
        try:
            if os.getsid(proc.pid) == sid and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.Error, ProcessLookupError, PermissionError):
            continue
    return found


def _ray_started_since(t0: float) -> list[str]:
    """Ray daemons or workers created since ``t0`` (time.time()), as 'pid cmdline'."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "create_time", "status"]):
        info = proc.info
        text = " ".join(info["cmdline"] or [])
        recent = (
            info["create_time"] and info["create_time"] >= t0 - 1 and info["status"] != psutil.STATUS_ZOMBIE
        )
        if recent and any(name in text for name in RAY_DAEMONS):
            found.append(f"{info['pid']} {text[:120]}")
    return found


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port whose socket accepts connections (the kernel completes them) but never reads or answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield s.getsockname()[1]


@pytest.fixture
def http_port() -> Iterator[int]:
    """A port where an HTTP/1 server answers: something that is not Ray's GCS."""

    class Quiet(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("kind", "cause"),
    [
        ("refused", "connection refused (nothing listens on that port)"),
        ("silent", "timed out after 5s waiting for Ray's GCS to answer"),
        ("http", "not a Ray head (the server there answered UNAVAILABLE"),
    ],
)
def test_an_address_that_does_not_answer_fails_with_exit_2_and_leaves_nothing(
    kind, cause, tmp_path, request
) -> None:
    port = {
        "refused": _free_port,
        "silent": lambda: request.getfixturevalue("silent_port"),
        "http": lambda: request.getfixturevalue("http_port"),
    }[kind]()
    address = f"127.0.0.1:{port}"
    command, run_dir = _train(
        tmp_path, tiny_config("dqn"), "--ray-address", address, "--ray-connect-timeout-s", "5"
    )
    t0 = time.time()
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env=_env(),
    )
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    took = time.time() - t0
    assert proc.returncode == 2, out[-2000:] + err[-3000:]
    assert took < 20, f"took {took:.1f}s"
    assert f"error: cannot join the Ray cluster at {address}: {cause}" in err, err[-3000:]
    assert not run_dir.exists()
    # Nothing the attempt started is left: its session is empty and no Ray daemon or worker appeared.
    assert _in_session(proc.pid) == []
    assert _ray_started_since(t0) == []


def _listening(pids: list[int]) -> dict[int, set[tuple[str, int]]]:
    """Listening TCP sockets (ip, port) of each process, by pid."""
    out: dict[int, set[tuple[str, int]]] = {}
    for pid in pids:
        try:
            conns = psutil.Process(pid).net_connections(kind="inet")
        except psutil.Error:
            continue
        out[pid] = {(c.laddr.ip, c.laddr.port) for c in conns if c.status == psutil.CONN_LISTEN}
    return out


def _loopback(ip: str) -> bool:
    addr = ipaddress.ip_address(ip)
    mapped = getattr(addr, "ipv4_mapped", None)
    return (mapped or addr).is_loopback


def _names(pid: int) -> str:
    try:
        return " ".join(psutil.Process(pid).cmdline())[:100]
    except psutil.Error:
        return "?"


def test_a_cluster_the_launcher_starts_listens_on_loopback_only(tmp_path) -> None:
    from actorq.launchers.ray_connect import probe_cluster

    replay_port = _free_port()
    config = tiny_config(
        "dqn",
        max_minutes=5,
        **{"actor.num_actors": 1, "replay.port": replay_port, "replay.samples_per_insert": 2.0},
    )
    labels = [spec.label for spec in topology(config)]
    command, run_dir = _train(tmp_path, config)
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=_env(),
    )

    def tree() -> list[int]:
        if proc.poll() is not None:
            raise AssertionError(proc.stdout.read().decode(errors="replace")[-3000:])
        return [proc.pid, *(p.pid for p in psutil.Process(proc.pid).children(recursive=True))]

    def acting(label: str, not_pid: int = -1):
        record = read_status(run_dir / label)
        return record if record and record.step > 0 and record.pid != not_pid else None

    try:
        wait_until(lambda: all(read_status(run_dir / label) for label in labels), 240, "every role running")
        before = wait_until(lambda: acting("actor_0"), 120, "actor_0 acting")
        sockets = _listening(tree())
        shown = {f"{pid} {_names(pid)}": sorted(s) for pid, s in sockets.items() if s}
        # Every role's worker is a descendant of the launcher (raylet's child), so all of them are listed.
        assert {r.pid for label in labels if (r := read_status(run_dir / label))} <= set(sockets), shown
        reverb = {(ip, port) for s in sockets.values() for ip, port in s if port == replay_port}
        # Reverb 0.7.3's server takes a port only and listens on every interface: not Ray's, and not bindable.
        assert reverb and all(not _loopback(ip) for ip, _ in reverb), shown
        exposed = {
            pid: [(ip, port) for ip, port in s if port != replay_port and not _loopback(ip)]
            for pid, s in sockets.items()
        }
        assert not any(exposed.values()), shown
        gcs = [pid for pid in sockets if "gcs_server" in _names(pid)]
        assert len(gcs) == 1 and sockets[gcs[0]], shown
        (gcs_port,) = {port for _, port in sockets[gcs[0]]}
        assert probe_cluster(f"127.0.0.1:{gcs_port}", 10.0) == f"127.0.0.1:{gcs_port}"

        # kill -9 of an actor's worker: Ray restarts it, and the restart is counted (from the roles' start log).
        os.kill(before.pid, signal.SIGKILL)
        wait_until(lambda: acting("actor_0", before.pid), 120, "actor_0 back under a new pid")
        started = set(tree())
        os.kill(proc.pid, signal.SIGINT)
        proc.wait(timeout=90)
    finally:
        if proc.poll() is None:  # a failed wait above: never leave the launcher (or its cluster) behind
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    output = proc.stdout.read().decode(errors="replace")
    assert proc.returncode == 130, output[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["ray"]["started_cluster"] and summary["ray"]["cluster"].startswith("127.0.0.1:")
    assert summary["restarts"].get("actor_0") == 1, summary["restarts"]
    assert "restarts_unknown" not in summary["ray"], summary["ray"]
    wait_until(
        lambda: not _in_session(proc.pid) and not [p for p in started if psutil.pid_exists(p) and _alive(p)],
        30,
        "every process of the run's cluster to be gone",
    )


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
