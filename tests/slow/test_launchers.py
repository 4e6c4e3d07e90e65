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
from tests.conftest import tiny_config
from tests.faults._helpers import alive
from tests.training import train_argv
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _train(run_dir: Path, *extra: str, timeout: float = 400) -> subprocess.CompletedProcess:
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
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _no_children_left():
    leftover = [p for p in psutil.Process().children(recursive=True) if p.is_running()]
    assert not leftover, f"processes left behind: {[(p.pid, p.cmdline()[:4]) for p in leftover]}"


@pytest.mark.parametrize(
    "launcher",
    # ray without --ray-address: the run starts its own local cluster and must stop it.
    ["launchpad", "local", "inprocess", pytest.param("ray", marks=pytest.mark.ray)],
)
def test_launcher_runs_all_roles_and_cleans_up(tmp_path, launcher):
    # A samples-per-insert limit: actors cannot race past the learner while TF traces its first step. Each actor
    # steps 3 environments (one batched forward), counted as env steps.
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
        },
    )
    save_config(config, tmp_path / "in.yaml")
    run_dir = tmp_path / "run"
    result = _train(run_dir)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["exit"] == "max_actor_steps" and summary["launcher"] == launcher
    # Every launcher records the CPU time of its roles (in-process roles are the launcher's own process).
    shared = launcher == "inprocess"
    assert summary["energy"]["launcher_cpu_seconds" if shared else "roles_cpu_seconds"] > 0
    assert set(summary["role_placement"]) == {
        "replay",
        "learner",
        "quantizer",
        "actor_0",
        "actor_1",
        "evaluator",
    }
    assert summary["weights_signing"]["scheme"] == "hmac-sha256" and summary["rejected_messages"] == 0
    assert summary["learner_steps"] > 0 and summary["actor_steps"] >= 800
    assert summary["min_broadcasts_received"] >= 1 and summary["evaluations"] >= 1
    for role in ("replay", "learner", "quantizer", "actor_0", "actor_1", "evaluator"):
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
        assert rows[-1]["step"] % 3 == 0 and read_status(run_dir / actor).step % 3 == 0, (
            actor
        )  # every loop steps all 3 environments
        assert json.loads((run_dir / actor / "kernel.json").read_text())["batch"] == 3, actor
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


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_stops_every_role_and_writes_summary(tmp_path, sig):
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
    os.kill(proc.pid, sig)
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


def test_resume_continues_from_the_checkpoint(tmp_path):
    config = tiny_config(
        "dqn",
        launcher="local",
        max_actor_steps=1500,
        max_minutes=5,
        **{"replay.samples_per_insert": 2.0, "learner.checkpoint_period_s": 5.0, "actor.envs_per_actor": 2},
    )
    save_config(config, tmp_path / "in.yaml")
    run_dir = tmp_path / "run"
    first = _train(run_dir)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    before = json.loads((run_dir / "summary.json").read_text())
    assert list((run_dir / "checkpoints" / "learner").glob("ckpt-*"))
    assert list((run_dir / "checkpoints" / "replay").iterdir())
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
