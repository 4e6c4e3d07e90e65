"""An attacker on the replay port against a live ``actorq train --launcher local`` run: forged, foreign and replayed
weight messages are rejected by running actors, which keep acting on their weights; the run's key stays secret.

The attacker is what Reverb lets anyone who reaches the port be: a client that reads the policy table and writes
it. Its messages are well formed with a valid crc32 (built by ``tests/messages.py``), so only the signature and
the version rules stop them. The run publishes its policy once (``learner.publish_period`` is huge), so an actor's
version changes only if a message is accepted, and a forged message left in the table is pulled over and over.
One run takes, in order: an unsigned forgery, a message signed with another run's key, a quantizer restart (which
publishes nothing new: its versions follow the learner's), a replay of the run's own older message once v2
exists, and an actor restart with the old message in the table.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from actorq.config import save_config
from actorq.quantize.signing import WeightsKey, generate_key
from tests.conftest import tiny_config
from tests.faults._helpers import ROOT, last, log_lines, role_pid, rows, stop_owned
from tests.messages import rebuild, split
from tests.training import train_argv
from tests.waiting import wait_until

pytestmark = pytest.mark.faults

ACTORS = ("actor_0", "actor_1")
FORGED_VERSION = 10**9


class Attacker:
    """A Reverb client of the run's replay server, reading and writing its policy table."""

    def __init__(self, run_dir: Path):
        from actorq.replay import POLICY_TABLE, ReverbWeightPublisher, ReverbWeightSubscriber, wait_for_server

        client = wait_for_server(
            f"localhost:{(run_dir / 'replay' / 'port').read_text().strip()}", timeout_s=60
        )
        self._read = ReverbWeightSubscriber(client, POLICY_TABLE)
        self._write = ReverbWeightPublisher(client, POLICY_TABLE)

    def capture(self) -> bytes:
        return bytes(self._read.latest())

    def insert(self, message: bytes) -> float:
        import numpy as np

        self._write.publish(np.frombuffer(message, np.uint8))
        return time.time()


def _forge(genuine: bytes, key=None) -> bytes:
    """The genuine message with a higher version and other weights, re-sealed: valid crc, no or a foreign tag."""
    header, payload = split(genuine)
    header["version"] = FORGED_VERSION
    forged = bytearray(payload)
    forged[: len(forged) // 2] = bytes(len(forged) // 2)  # zeroed codes: a different (dead) policy
    return rebuild(header, bytes(forged), key)


def _actor_state(run_dir: Path, actor: str) -> dict:
    r = rows(run_dir, actor)
    return r[-1] if r else {}


def _rejections_after(run_dir: Path, since: float, at_least: dict[str, float]) -> dict[str, dict] | None:
    """Each actor's first metrics row after ``since`` with more rejections than ``at_least`` (None until all)."""
    found = {}
    for a in ACTORS:
        row = next(
            (r for r in rows(run_dir, a) if r["time"] > since and r["rejected_messages"] > at_least[a]), None
        )
        if row is None:
            return None
        found[a] = row
    return found


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    base = tmp_path_factory.mktemp("forged")
    run_dir = base / "run"  # the run owns its directory: the config and the launcher's output live beside it
    config = tiny_config(
        "dqn",
        launcher="local",
        max_minutes=10,
        **{"learner.publish_period": 10**9, "replay.max_size": 200_000, "actor.update_period": 20},
    )
    save_config(config, base / "in.yaml")
    with (base / "launcher.out").open("wb") as out:
        proc = subprocess.Popen(
            train_argv(str(base / "in.yaml"), "--run-dir", str(run_dir)) + ["--quiet"],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    started: set[int] = set()
    try:
        wait_until(
            lambda: (
                proc.poll() is not None
                or all(
                    last(run_dir, a, "weights_version", -1) == 1 and last(run_dir, a, "step") > 50
                    for a in ACTORS
                )
            ),
            300,
            "both actors acting on v1",
        )
        assert proc.poll() is None, (base / "launcher.out").read_text()[-2000:]
        yield run_dir, proc, started
    finally:
        stop_owned(proc, started)


def test_forged_foreign_and_replayed_messages_are_rejected_by_live_actors(run):
    run_dir, proc, started = run
    attacker = Attacker(run_dir)
    v1 = attacker.capture()
    key_hex = (run_dir / "secrets" / "weights.key").read_text().strip()

    # 1. Unsigned forgery (valid crc, version 10^9), then 2. one signed with another run's key.
    for kind, message, logged in (
        ("unsigned", _forge(v1), "the message is unsigned"),
        ("other run", _forge(v1, key=generate_key()), "a message from another run"),
    ):
        before = {a: _actor_state(run_dir, a) for a in ACTORS}
        t = attacker.insert(message)
        counts = {a: before[a]["rejected_messages"] for a in ACTORS}
        seen = wait_until(
            lambda t=t, counts=counts: _rejections_after(run_dir, t, counts),
            60,
            f"actors to reject the {kind} message",
        )
        # Keep pulling it: every pull is counted; the actors keep acting, on v1, having installed nothing.
        wait_until(
            lambda before=before: all(
                _actor_state(run_dir, a)["step"] > before[a]["step"] + 40 for a in ACTORS
            ),
            60,
            f"both actors to act 40 more steps after the {kind} message",
        )
        for a in ACTORS:
            now = _actor_state(run_dir, a)
            assert now["weights_version"] == 1 and seen[a]["weights_version"] == 1, (kind, a)
            assert now["broadcasts_received"] == before[a]["broadcasts_received"], (kind, a)
            assert now["rejected_messages"] > before[a]["rejected_messages"], (kind, a)
            assert now["step"] > before[a]["step"] + 40, f"{a} stopped acting after the {kind} message"
            assert log_lines(run_dir, a, rf"UnauthenticatedMessageError: [^\n]*{logged}"), (kind, a)

    # 3. A quantizer restart: its versions follow the learner's, which published once (v1 holds those weights), so
    # it publishes nothing new, and the forged message in the table does not make it jump to version 10^9 + 1.
    quantizer = role_pid(proc.pid, "quantizer")
    started.add(quantizer)
    os.kill(quantizer, signal.SIGKILL)
    wait_until(
        lambda: log_lines(run_dir, "quantizer", r"continuing versions above v1 "), 120, "the quantizer back"
    )
    # Then the run's own v1, replayed after v2 exists (v2: the same weights re-signed here with the run's key, as
    # the quantizer signs its next message).
    header, payload = split(v1)
    header["version"] = 2
    attacker.insert(rebuild(header, payload, WeightsKey(bytes.fromhex(key_hex))))
    wait_until(lambda: all(last(run_dir, a, "weights_version") == 2 for a in ACTORS), 120, "actors on v2")
    v2 = attacker.capture()
    assert split(v2)[0]["version"] == 2
    before = {a: _actor_state(run_dir, a) for a in ACTORS}
    t = attacker.insert(v1)
    wait_until(
        lambda: _rejections_after(run_dir, t, {a: before[a]["rejected_messages"] for a in ACTORS}),
        60,
        "actors to reject the replayed v1",
    )
    for a in ACTORS:
        assert last(run_dir, a, "weights_version") == 2
        assert log_lines(run_dir, a, r"UnauthenticatedMessageError: stale message v1"), a

    # 4. An actor restart while v1 sits in the table: the restarted actor remembers it ran v2 and waits.
    pid = role_pid(proc.pid, "actor_0")
    started.add(pid)
    refusals = len(log_lines(run_dir, "actor_0", r"stale message v1"))
    os.kill(pid, signal.SIGKILL)
    t_kill = time.time()
    wait_until(
        lambda: log_lines(run_dir, "actor_0", r"restarted; never installs weights below v2"),
        120,
        "actor_0 back",
    )
    wait_until(
        lambda: len(log_lines(run_dir, "actor_0", r"stale message v1")) > refusals,
        60,
        "the restarted actor to refuse v1",
    )
    assert not [r for r in rows(run_dir, "actor_0") if r["time"] > t_kill and r["weights_version"] == 1]
    attacker.insert(v2)  # what the quantizer would publish next; the actor may install its own version again
    wait_until(
        lambda: next(
            (
                r
                for r in rows(run_dir, "actor_0")
                if r["time"] > t_kill and r["weights_version"] == 2 and r["step"] > 0
            ),
            None,
        ),
        120,
        "actor_0 acting on v2 again",
    )
    assert proc.poll() is None

    # The key never left its file: not in any log, metrics file, config or summary (checked after the stop).
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["weights_signing"]["scheme"] == "hmac-sha256"
    key_file = run_dir / "secrets" / "weights.key"
    assert (key_file.stat().st_mode & 0o777, key_file.parent.stat().st_mode & 0o777) == (0o600, 0o700)
    secret = bytes.fromhex(key_hex)
    needles = (key_hex.encode(), key_hex.upper().encode(), secret)
    checked = 0
    for path in run_dir.rglob("*"):
        if path.is_file() and path != key_file:
            data = path.read_bytes()
            assert not any(n in data for n in needles), f"the key appears in {path}"
            checked += 1
    assert checked > 10 and (run_dir / "summary.json").exists() and (run_dir / "config.yaml").exists()
