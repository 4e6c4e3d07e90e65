"""``actorq train --launcher ray`` on the fixture's 2-node cluster: placement, budgets, restarts, clean stops.

Replay, learner, quantizer and evaluator must land on the head (``learner_host``), actors on the worker node
(``actor_host``). The run directory is shared (one host), so the tests read the roles' status records from it, the
way an operator on a shared filesystem would; the launcher itself asks the roles over Ray.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from actorq.config import save_config
from actorq.roles.weights_key import load_key_file
from actorq.status import read_status
from tests.conftest import tiny_config
from tests.faults._helpers import alive
from tests.ray.conftest import role_workers
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.ray

LABELS = ("replay", "learner", "quantizer", "actor_0", "actor_1", "evaluator")
LOCAL_FIELDS = (
    "algorithm",
    "task",
    "precision",
    "comm_bits",
    "actors",
    "policy_layers",
    "seed",
    "wall_seconds",
    "actor_steps",
    "learner_steps",
    "best_eval_return",
    "final_eval_return",
    "evaluations",
    "target_return",
    "seconds_to_target",
    "actor_steps_per_second",
    "min_broadcasts_received",
    "rejected_messages",
    "message_bytes",
    "breakdown",
    "restarts",
    "exit",
    "launcher",
    "role_exit_codes",
    "replay_address",
    "weights_signing",
    "energy",
)
"""What the local launcher's summary.json holds; a ray run's must hold the same."""


def _command(tmp_path: Path, run_dir: Path, address: str, config) -> list[str]:
    save_config(config, tmp_path / "in.yaml")
    return [
        sys.executable,
        "-m",
        "actorq.cli",
        "train",
        str(tmp_path / "in.yaml"),
        "--run-dir",
        str(run_dir),
        "--launcher",
        "ray",
        "--ray-address",
        address,
        "--quiet",
    ]


def _pids(run_dir: Path) -> set[int]:
    """Pids of every role's current worker, from their status records."""
    records = [read_status(run_dir / label) for label in LABELS]
    return {r.pid for r in records if r is not None}


def _node(summary: dict, label: str) -> str:
    return summary["ray"]["nodes"][label]["node_id"]


def test_run_places_roles_by_resource_and_reaches_its_budget(ray_cluster, tmp_path):
    config = tiny_config("dqn", max_actor_steps=600, max_minutes=4, **{"replay.samples_per_insert": 2.0})
    run_dir = tmp_path / "run"
    result = subprocess.run(
        _command(tmp_path, run_dir, ray_cluster.address, config),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["exit"] == "max_actor_steps" and summary["launcher"] == "ray"
    assert set(LOCAL_FIELDS) <= set(summary), sorted(set(LOCAL_FIELDS) - set(summary))
    assert summary["actor_steps"] >= 600 and summary["learner_steps"] > 0 and summary["evaluations"] >= 1
    assert summary["weights_signing"]["scheme"] == "hmac-sha256" and summary["rejected_messages"] == 0
    # The summary names the key the roles loaded on their nodes (each reports its run id): the run's own.
    run_id = load_key_file(run_dir / "secrets" / "weights.key").run_id_hex
    assert summary["weights_signing"]["run_id"] == run_id
    assert {
        node["weights_run_id"] for label, node in summary["ray"]["nodes"].items() if label != "replay"
    } == {run_id}
    assert summary["min_broadcasts_received"] >= 1
    # The roles' own CPU time (from their records): Ray's workers are not the launcher's children.
    assert summary["energy"]["roles_cpu_seconds"] > 5
    assert summary["ray"]["cluster"] and not summary["ray"]["started_cluster"]
    for label in ("replay", "learner", "quantizer", "evaluator"):
        assert _node(summary, label) == ray_cluster.head_id, label
    for label in ("actor_0", "actor_1"):
        assert _node(summary, label) == ray_cluster.actor_node_id, label
    assert not any(summary["restarts"].values()), summary["restarts"]
    # The key never reached the summary (nor the logs the roles wrote).
    key = (run_dir / "secrets" / "weights.key").read_text().strip()
    assert key not in (run_dir / "summary.json").read_text()
    for log_file in (run_dir / "logs").glob("*.log"):
        assert key not in log_file.read_text(errors="replace"), log_file
    # Nothing of the run is left: no role worker in the cluster, no role pid alive.
    pids = _pids(run_dir)
    assert len(pids) == len(LABELS)
    wait_until(lambda: not alive(list(pids)) and not role_workers(), 15, "the run's role workers to be gone")


def test_actors_survive_kill_and_node_loss_and_ctrl_c_leaves_nothing(ray_cluster, tmp_path):
    config = tiny_config("dqn", max_minutes=6, **{"replay.samples_per_insert": 2.0, "ray.max_restarts": 4})
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        _command(tmp_path, run_dir, ray_cluster.address, config),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    seen: set[int] = set()
    try:

        def actor_acting(label: str, min_step: int = 1, min_version: int = 0, not_pids=()):
            record = read_status(run_dir / label)
            if proc.poll() is not None:
                raise AssertionError(proc.stdout.read().decode(errors="replace")[-3000:])
            ok = record and record.step >= min_step and record.weights_version >= min_version
            return record if ok and record.pid not in not_pids else None

        before = wait_until(lambda: actor_acting("actor_0", 40, 1), 240, "actor_0 acting with weights")
        seen |= _pids(run_dir)
        # kill -9 of the actor's Ray worker: Ray restarts it; it continues its steps and weights version.
        os.kill(before.pid, signal.SIGKILL)
        after = wait_until(
            lambda: actor_acting("actor_0", before.step + 1, before.weights_version, {before.pid}),
            90,
            "actor_0 back under a new pid, past its step count and weights version",
        )
        assert after.step > before.step and after.weights_version >= before.weights_version
        seen |= _pids(run_dir)

        # Remove the actors' node and add another: both actors come back there.
        old = {label: read_status(run_dir / label) for label in ("actor_0", "actor_1")}
        _, new_node = ray_cluster.replace_actor_node()
        for label, record in old.items():
            wait_until(
                lambda label=label, record=record: actor_acting(
                    label, record.step + 1, record.weights_version, {record.pid}
                ),
                120,
                f"{label} restarted on the new node",
            )
        seen |= _pids(run_dir)

        # Ctrl-C: the launcher stops every role and removes every Ray actor it made.
        started = time.monotonic()
        os.kill(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:  # a failed wait above: never leave the launcher behind
            proc.kill()
            proc.wait(timeout=30)
    output = proc.stdout.read().decode(errors="replace")
    assert proc.returncode == 130, output[-3000:]
    assert time.monotonic() - started < 40
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["exit"] == "interrupted"
    assert summary["restarts"]["actor_0"] >= 2 and summary["restarts"]["actor_1"] >= 1, summary["restarts"]
    for label in ("actor_0", "actor_1"):
        assert _node(summary, label) == new_node, label
    seen |= _pids(run_dir)
    wait_until(lambda: not alive(list(seen)) and not role_workers(), 15, "the run's role workers to be gone")
