"""Multi-process runs through the real launchers, with tiny networks; no process may survive them."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from actorq.config import save_config
from actorq.metrics import read_metrics
from actorq.status import read_status
from tests import user_env
from tests.conftest import tiny_config
from tests.faults._helpers import REPLAY_CKPT, REPLAY_UP, alive, log_lines, table_sizes
from tests.training import train_argv
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _train(
    run_dir: Path, *extra: str, timeout: float = 400, env: dict | None = None
) -> subprocess.CompletedProcess:
    """Train the config saved beside ``run_dir`` (a run directory must start empty)."""
    return subprocess.run(
        train_argv(
            str(run_dir.parent / "in.yaml"),
            "--run-dir",
            str(run_dir),
            "--quiet",
            *extra,
        ),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _no_children_left():
    leftover = [p for p in psutil.Process().children(recursive=True) if p.is_running()]
    assert not leftover, f"processes left behind: {[(p.pid, p.cmdline()[:4]) for p in leftover]}"


def _assert_ran_every_role(run_dir: Path, launcher: str, budget: int, envs: int, shards: int = 1) -> dict:
    """What a run that reached its actor-step budget under ``launcher`` must leave: every role placed (``shards``
    replay processes), its metrics, CPU time and kernel record, signed weights, learning, broadcasts and
    evaluations. Returns the summary."""
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["exit"] == "max_actor_steps" and summary["launcher"] == launcher
    # Every launcher records the CPU time of its roles (in-process roles are the launcher's own process).
    shared = launcher == "inprocess"
    assert summary["energy"]["launcher_cpu_seconds" if shared else "roles_cpu_seconds"] > 0
    roles = {"replay", "learner", "quantizer", "actor_0", "actor_1", "evaluator"}
    roles |= {f"replay_{i}" for i in range(1, shards)}
    assert set(summary["role_placement"]) == roles
    assert summary["weights_signing"]["scheme"] == "hmac-sha256" and summary["rejected_messages"] == 0
    assert summary["learner_steps"] > 0 and summary["actor_steps"] >= budget
    assert summary["min_broadcasts_received"] >= 1 and summary["evaluations"] >= 1
    for role in roles:
        assert (run_dir / role / "metrics.csv").exists(), role
    # Each actor owns its process, so it reports that process's CPU time (the report's unthrottled actor rate);
    # in-process actors share one and report none.
    for actor in ("actor_0", "actor_1"):
        rows = read_metrics(run_dir / actor / "metrics.csv")
        if shared:
            assert "cpu_s" not in rows[-1] and read_status(run_dir / actor).cpu_s is None, actor
        else:
            cpu = [row["cpu_s"] for row in rows]
            assert cpu[-1] > cpu[0] > 0, actor
        # Every loop steps all the actor's environments (one batched forward), counted as env steps.
        assert rows[-1]["step"] % envs == 0 and read_status(run_dir / actor).step % envs == 0, actor
        assert json.loads((run_dir / actor / "kernel.json").read_text())["batch"] == envs, actor
    return summary


@pytest.mark.parametrize(
    "launcher",
    # ray without --ray-address: the run starts its own local cluster and must stop it. The local launcher's run is
    # test_resume_continues_from_the_checkpoint_and_restores_every_replay_shard's first half (one TF start per role).
    ["launchpad", "inprocess", pytest.param("ray", marks=pytest.mark.ray)],
)
def test_launcher_runs_all_roles_and_cleans_up(tmp_path, launcher):
    # A samples-per-insert limit: actors cannot race past the learner while TF traces its first step. Each actor
    # steps 3 environments (one batched forward), counted as env steps. The task is a user's environment known to
    # nothing inside actorq (tests/user_env.py: Dict observations, make_kwargs), imported by its path in every
    # role's process: PYTHONPATH holds the repository root, as an installed package would be found.
    # Ray's session files (sockets: a short path) in a directory of this test's own, to find its processes by.
    ray_tmp = tempfile.mkdtemp(prefix="aq-ray-", dir="/tmp") if launcher == "ray" else ""
    config = tiny_config(
        "dqn",
        launcher=launcher,
        max_actor_steps=800,
        max_minutes=5,
        # In-process roles are threads, which cannot be interrupted inside a write held by the rate limiter (see
        # actorq.launchers.inprocess): that launcher runs without one.
        **{
            "replay.samples_per_insert": 0.0 if launcher == "inprocess" else 2.0,
            "actor.envs_per_actor": 3,
            "ray.temp_dir": ray_tmp,
            **user_env.OVERRIDES,
        },
    )
    save_config(config, tmp_path / "in.yaml")
    run_dir = tmp_path / "run"
    result = _train(run_dir, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    _assert_ran_every_role(run_dir, launcher, budget=800, envs=3)
    _no_children_left()
    if ray_tmp:  # the local cluster the run started (GCS, raylet) and its role workers are gone with it
        roles = [
            read_status(run_dir / label)
            for label in ("replay", "learner", "quantizer", "actor_0", "evaluator")
        ]
        pids = [record.pid for record in roles if record is not None]
        assert len(pids) == 5
        wait_until(
            lambda: not _processes_mentioning(ray_tmp) and not alive(pids),
            15,
            "the run's Ray cluster to be gone",
        )
        shutil.rmtree(ray_tmp, ignore_errors=True)


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if text in " ".join(proc.info["cmdline"] or ()):
                found.append(proc.pid)
        except psutil.Error:
            continue
    return found


def test_sigterm_stops_every_role_and_writes_summary(tmp_path):
    """SIGTERM, what ``actorq experiment``/``grid`` forward to a run and what ``docker stop`` sends. One Supervisor
    handler takes SIGINT and SIGTERM alike under every placement: Ctrl-C (SIGINT) is tested on the Ray placement
    (tests/ray) and the experiment's, SIGTERM on the in-process one (tests/integration/test_inprocess.py)."""
    config = tiny_config("dqn", launcher="local", max_minutes=10)
    save_config(config, tmp_path / "in.yaml")
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        train_argv(
            str(tmp_path / "in.yaml"),
            "--run-dir",
            str(run_dir),
            "--quiet",
        ),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )

    def learning():
        rows = read_metrics(run_dir / "learner" / "metrics.csv")
        return rows and rows[-1]["step"] > 0 and (run_dir / "evaluator" / "metrics.csv").exists()

    wait_until(lambda: learning() or proc.poll() is not None, 240, "the run to start learning")
    assert proc.poll() is None, proc.stdout.read().decode(errors="replace")[-3000:]
    children = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
    assert len(children) >= 6
    started, signalled = time.monotonic(), time.time()
    os.kill(proc.pid, signal.SIGTERM)
    proc.wait(timeout=30)
    assert time.monotonic() - started < 10
    assert proc.returncode == 130
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["exit"] == "interrupted" and summary["learner_steps"] > 0
    # Every role flushed a final metrics row while stopping (the evaluator writes rows only per evaluation).
    for role in ("replay", "learner", "quantizer", "actor_0", "actor_1"):
        assert read_metrics(run_dir / role / "metrics.csv")[-1]["time"] >= signalled, role

    # The launcher has exited; its roles, already stopped, are only waiting to be reaped by init.
    wait_until(lambda: not alive(children), 5, "every role to be gone once the launcher exited")


def test_resume_continues_from_the_checkpoint_and_restores_every_replay_shard(tmp_path):
    """The local launcher with two replay shards (actor i writes to shard i, the learner samples both), stopped at
    its step budget, then resumed: nothing lost, every shard restored from its own checkpoint. The first run is
    also the local launcher's test_launcher_runs_all_roles_and_cleans_up (each run costs a TensorFlow start per
    role)."""
    config = tiny_config(
        "dqn",
        launcher="local",
        max_actor_steps=1500,
        max_minutes=5,
        **{
            "replay.samples_per_insert": 2.0,
            "replay.shards": 2,
            "learner.checkpoint_period_s": 5.0,
            "actor.envs_per_actor": 2,
        },
    )
    save_config(config, tmp_path / "in.yaml")
    run_dir = tmp_path / "run"
    first = _train(run_dir)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    before = _assert_ran_every_role(run_dir, "local", budget=1500, envs=2, shards=2)
    _no_children_left()
    assert list((run_dir / "checkpoints" / "learner").glob("ckpt-*"))
    # The summary's replay counts are the shards' own final records, summed.
    replay = before["replay"]
    per_shard = replay["per_shard"]
    assert replay["shards"] == 2 and sorted(per_shard) == ["replay", "replay_1"]
    for label, counts in per_shard.items():
        record = json.loads((run_dir / label / "status.json").read_text())
        assert (counts["inserts"], counts["samples"]) == (record["inserts"], record["samples"]), label
        # Actor i -> shard i, the learner reads both; one transition per env step of the shard's own actor (n_step
        # 1; at the stop the rate limiter may still hold the last few of each actor's).
        assert counts["inserts"] > 0 and counts["samples"] > 0, label
        assert 0.5 * counts["actor_steps"] <= counts["inserts"] <= counts["actor_steps"], (label, counts)
        assert list((run_dir / "checkpoints" / label).iterdir()), label
    for key in ("inserts", "samples", "size", "actor_steps"):
        assert replay[key] == sum(counts[key] for counts in per_shard.values()), key
    assert replay["actor_steps"] == before["actor_steps"]
    # What each shard's final checkpoint (written as the launcher stopped it) held, and its starts so far.
    final = {
        label: table_sizes(log_lines(run_dir, label, REPLAY_CKPT)[-1].group("before")) for label in per_shard
    }
    ups = {label: len(log_lines(run_dir, label, REPLAY_UP)) for label in per_shard}
    rows_before = len(read_metrics(run_dir / "learner" / "metrics.csv"))
    key = (run_dir / "secrets" / "weights.key").read_text()
    resumed = subprocess.run(
        train_argv(
            "--resume",
            str(run_dir),
            "--quiet",
            "--max-actor-steps",
            # Beyond where the first run stopped (fast actors overshoot its 1500 by up to a metrics period).
            str(before["actor_steps"] + 1500),
        ),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    after = json.loads((run_dir / "summary.json").read_text())
    assert after["learner_steps"] > before["learner_steps"]
    assert after["actor_steps"] >= before["actor_steps"] + 1500
    # Each shard started again from its own final checkpoint (its size when it began serving), not empty.
    for label in per_shard:
        restored = table_sizes(log_lines(run_dir, label, REPLAY_UP)[ups[label]].group("sizes"))
        assert restored["priority_table"] >= final[label]["priority_table"] > 0, (
            label,
            restored,
            final[label],
        )
    learner_rows = read_metrics(run_dir / "learner" / "metrics.csv")
    # Nothing was lost: the launcher stopped the learner while actors still fed it, so it saved at its last step
    # and the resumed learner continued from there (steps never go back), not from zero or an earlier checkpoint.
    steps = [row["step"] for row in learner_rows]
    assert steps == sorted(steps)
    assert steps[rows_before] >= before["learner_steps"]
    # The resumed run signed and verified with the run's own key: same file, same run id, nothing rejected.
    assert (run_dir / "secrets" / "weights.key").read_text() == key
    assert after["weights_signing"] == before["weights_signing"] and after["rejected_messages"] == 0
    _no_children_left()
