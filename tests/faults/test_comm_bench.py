"""``actorq bench comm --netns`` for real, small: two namespace hosts, an 8 Mbit/s link, a policy whose fp32
message is ~2 MB (2 s of wire) and whose 8-bit one is ~0.5 MB. The fp32 version must take measurably longer to
reach the actor, no less than the link allows; afterwards (also after a SIGTERM mid-run) no namespace and no
worker process of the bench may remain. Skipped, saying why, where namespaces can't be made (not root, no ``ip``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from actorq.bench.netns import namespace_pids, unavailable_reason
from tests.waiting import wait_until

pytestmark = pytest.mark.faults

ROOT = Path(__file__).resolve().parents[2]
RATE = "8mbit"
# CartPole DQN with 1024-512 hidden units: 0.53M weights, 2.1 MB at 32 bits (2.1 s at 8 Mbit/s), 0.53 MB at 8.
BENCH = [
    "configs/dqn/gym_cartpole.yaml",
    "network.policy_layers=[1024,512]",
    "--netns",
    "--rate",
    RATE,
    "--comm-bits",
    "32,8",
    "--actors",
    "1",
    "--repeats",
    "1",
    # One publish every 50 / 12.5 = 4 s: the 2 s fp32 transfer fits between two, so each version is timed alone.
    "--learner-rate",
    "12.5",
]


@pytest.fixture
def skip_unless_possible():
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)


def _bench(args: list[str], tmp_path: Path, **kwargs) -> subprocess.Popen:
    # TMPDIR: the bench's scratch directory (kept with its worker logs after a failure or an interrupt) is the test's.
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)}
    return subprocess.Popen(
        [sys.executable, "-m", "actorq.cli", "bench", "comm", *BENCH, *args],
        cwd=ROOT,
        env=env,
        text=True,
        **kwargs,
    )


def _namespaces(prefix: str) -> list[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=20).stdout
    return [line.split()[0] for line in listed.splitlines() if line.startswith(prefix)]


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def test_fp32_takes_longer_than_int8_to_reach_the_actors_on_a_slow_link(skip_unless_possible, tmp_path):
    out = tmp_path / "comm.json"
    proc = _bench(
        ["--seconds", "10", "--json", str(out)], tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        text, _ = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, text
    doc = json.loads(out.read_text())
    rows = {r["comm_bits"]: r for r in doc["summary"]}
    assert set(rows) == {32, 8} and all(r["rate"] == RATE for r in rows.values())
    fp32, int8 = rows[32], rows[8]
    assert fp32["message_bytes"] > 3.5 * int8["message_bytes"]
    assert fp32["installs"] >= 1 and int8["installs"] >= 1, text
    # The link's limit applies: the fp32 message cannot arrive faster than its bytes take at 8 Mbit/s...
    assert fp32["reach_s"] >= 0.9 * fp32["wire_s"], (fp32["reach_s"], fp32["wire_s"])
    # ...and the 8-bit one, 1.6 s less of wire, arrives measurably sooner, however loaded the machine.
    assert fp32["reach_s"] > int8["reach_s"] + 0.8, (fp32["reach_s"], int8["reach_s"])
    assert "CPU:" in text and doc["meta"]["machine"]["cpu"]
    # Nothing of the bench remains: its namespaces, its workers.
    made = doc["meta"]["hosts"]["namespaces"]
    assert len(made) == 3 and not set(made) & set(_namespaces("")), made  # the hub and two hosts
    pids = [a["pid"] for r in doc["records"] for a in r["per_actor"]]
    pids += [r["publisher"]["pid"] for r in doc["records"]]
    assert pids and not [pid for pid in pids if _running(pid)]


def _workers(prefix: str) -> list[int]:
    """The bench's worker processes running in its namespaces (not the ``ip`` commands that build them)."""
    pids = [p for ns in _namespaces(prefix) for p in namespace_pids(ns)]
    found = []
    for pid in pids:
        try:
            if b"actorq.bench.comm_worker" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except FileNotFoundError:
            continue
    return found


def test_sigterm_mid_run_leaves_nothing_behind(skip_unless_possible, tmp_path):
    proc = _bench(["--seconds", "30"], tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    prefix = f"aqc{proc.pid % 100000}"
    try:
        # The publisher runs on the server's host: the bench is past building the hosts, in its run.
        workers = wait_until(lambda: _workers(prefix), 300, "the bench's publisher on its host")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert _namespaces(prefix) == [], err
    assert not [pid for pid in workers if _running(pid)], err
    assert "comm bench worker logs kept in" in err  # the interrupted run's logs, named
