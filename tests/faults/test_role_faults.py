"""kill -9 each role of a live ``actorq train --launcher local`` run and check, from its files, that it recovers.

The tests share one run (tiny DQN on CartPole, 2 int8 actors, a samples-per-insert rate limiter, checkpoints
every 3 s) because starting one costs most of a minute, but none depends on another having run: each takes a run
that is live and learning with every role up (the ``run`` fixture starts a new one when an earlier test ended the
last, as the learner kill does), injects its fault and waits until the run has recovered. Each asserts on data
written after its fault (transitions inserted, versions increasing, learner steps past the checkpoint) and records
throughput before/after and recovery time in RUN_DIR/fault_measurements.json (also merged into
$ACTORQ_FAULT_REPORT when set).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from actorq.config import save_config
from tests.conftest import tiny_config
from tests.faults._helpers import (
    REPLAY_CKPT,
    REPLAY_UP,
    ROOT,
    alive,
    last,
    log_lines,
    rate,
    record,
    role_pid,
    rows,
    stop_owned,
    table_sizes,
)
from tests.training import train_argv
from tests.waiting import wait_until

pytestmark = pytest.mark.faults

RATE_LIMITER_TIMEOUT_S = 20.0
WINDOW_S = 4.0  # throughput is measured over this many seconds before and after each fault
ACTORS = ("actor_0", "actor_1")
ROLES = ("replay", "learner", "quantizer", *ACTORS, "evaluator")
RESUMED_ABOVE = r"continuing versions above v(\d+)"


@dataclass
class Run:
    dir: Path
    proc: subprocess.Popen
    faults: list[str] = field(default_factory=list)
    pids: set[int] = field(default_factory=set)

    def pid(self, label: str) -> int:
        pid = role_pid(self.proc.pid, label)
        assert pid, f"{label} is not running; launcher returned {self.proc.poll()}"
        self.pids.add(pid)
        return pid

    def check_launcher(self) -> None:
        assert self.proc.poll() is None, f"the run ended ({self.proc.returncode}): {self.tail()}"

    def tail(self) -> str:
        out = self.dir.parent / f"{self.dir.name}.out"
        return out.read_text(errors="replace")[-2000:] if out.exists() else ""


def _learning(d: Path) -> bool:
    return (
        last(d, "learner", "step") > 20
        and last(d, "quantizer", "version") >= 1
        and all(last(d, a, "step") > 0 and last(d, a, "weights_version", -1) >= 1 for a in ACTORS)
    )


def _start_run(run_dir: Path) -> Run:
    config = tiny_config(
        "dqn",
        launcher="local",
        max_minutes=10,
        **{
            "replay.samples_per_insert": 2.0,
            "replay.max_size": 200_000,
            "replay.rate_limiter_timeout_s": RATE_LIMITER_TIMEOUT_S,
            "learner.checkpoint_period_s": 3.0,
            "evaluator.period_s": 5.0,
        },
    )
    # The config and the launcher's output sit beside the run directory: a new run's directory must start empty.
    save_config(config, run_dir.parent / f"{run_dir.name}.yaml")
    with (run_dir.parent / f"{run_dir.name}.out").open("wb") as out:
        proc = subprocess.Popen(
            train_argv(str(run_dir.parent / f"{run_dir.name}.yaml"))
            + ["--run-dir", str(run_dir)]
            + ["--quiet"],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return Run(run_dir, proc)


def _stop_run(state: Run) -> None:
    stop_owned(state.proc, state.pids)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every run this module started (the last one is current); all stopped at the end of the module."""
    started: list[Run] = []
    try:
        yield started
    finally:
        for state in started:
            _stop_run(state)


@pytest.fixture
def run(runs, tmp_path_factory) -> Run:
    """A run that is live and learning with every role up: the module's current one, or a new one if that ended."""
    if not runs or runs[-1].proc.poll() is not None:
        runs.append(_start_run(tmp_path_factory.mktemp("faults")))
    state = runs[-1]
    wait_until(
        lambda: (
            state.proc.poll() is not None
            or (_learning(state.dir) and all(role_pid(state.proc.pid, r) for r in ROLES))
        ),
        240,
        "the run to be learning with every role up",
    )
    state.check_launcher()
    return state


def _window(d: Path, start: float) -> float:
    """Wait until the replay and the learner have written metrics past ``start + WINDOW_S``; return that end."""
    end = start + WINDOW_S
    wait_until(
        lambda: all(any(r["time"] >= end for r in rows(d, role)) for role in ("replay", "learner")),
        WINDOW_S + 30,
        "metrics covering the measurement window",
    )
    return end


def _baseline(d: Path) -> tuple[float, dict[str, float]]:
    start = time.time()
    end = _window(d, start)
    return end, {
        "inserts_per_s_before": rate(d, "replay", "inserts", start, end),
        "learner_steps_per_s_before": rate(d, "learner", "step", start, end),
    }


def _after(d: Path, start: float) -> dict[str, float]:
    end = _window(d, start)
    return {
        "inserts_per_s_after": rate(d, "replay", "inserts", start, end),
        "learner_steps_per_s_after": rate(d, "learner", "step", start, end),
    }


def _first_row(d: Path, role: str, since: float, cond) -> dict | None:
    return next((r for r in rows(d, role) if r["time"] > since and cond(r)), None)


def test_actor_kill_restarts_it_and_the_learner_never_stalls(run):
    d = run.dir
    t0, numbers = _baseline(d)
    pid = run.pid("actor_0")
    steps_at_kill, stalls_at_kill = last(d, "actor_0", "step"), last(d, "learner", "stalls")
    learner_at_kill, inserts_at_kill = last(d, "learner", "step"), last(d, "replay", "inserts")
    t_kill = time.time()
    os.kill(pid, signal.SIGKILL)
    run.faults.append("actor_0")

    new_pid = wait_until(lambda: (p := role_pid(run.proc.pid, "actor_0")) != pid and p, 60, "a new actor_0")
    run.pids.add(new_pid)
    back = wait_until(
        lambda: _first_row(d, "actor_0", t_kill, lambda r: r["step"] > steps_at_kill), 120, "actor_0 acting"
    )
    t_back = back["time"]
    run.check_launcher()

    # While actor_0 was away the other actor kept feeding replay and the learner kept learning, never blocked on
    # the rate limiter for longer than its timeout (rows keep coming; each row's longest step is bounded).
    outage = [r for r in rows(d, "learner") if t_kill <= r["time"] <= t_back]
    assert len(outage) >= 2
    gaps = [b["time"] - a["time"] for a, b in zip(outage, outage[1:], strict=False)]
    assert max(gaps) < RATE_LIMITER_TIMEOUT_S
    assert max(r["max_step_s"] for r in outage) < RATE_LIMITER_TIMEOUT_S
    assert last(d, "learner", "stalls") == stalls_at_kill
    assert outage[-1]["step"] > learner_at_kill
    assert last(d, "replay", "inserts") > inserts_at_kill
    # The restarted actor continued its own step count (totals over the run stay right).
    assert back["step"] > steps_at_kill

    numbers |= _after(d, time.time())
    record(
        d,
        "actor_kill",
        recovery_s=t_back - t_kill,
        learner_steps_per_s_during=(outage[-1]["step"] - outage[0]["step"])
        / max(outage[-1]["time"] - outage[0]["time"], 1e-9),
        longest_learner_gap_s=max(gaps),
        **numbers,
    )


def test_quantizer_kill_actors_keep_acting_and_versions_keep_increasing(run):
    d = run.dir
    t0, numbers = _baseline(d)
    pid = run.pid("quantizer")
    resumes = len(log_lines(d, "quantizer", RESUMED_ABOVE))
    steps_at_kill = {a: last(d, a, "step") for a in ACTORS}
    t_kill = time.time()
    os.kill(pid, signal.SIGKILL)
    run.faults.append("quantizer")

    run.pids.add(
        wait_until(lambda: (p := role_pid(run.proc.pid, "quantizer")) != pid and p, 60, "new quantizer")
    )
    # The restarted quantizer says which version it continues above (the policy table's, or its own metrics').
    line = wait_until(
        lambda: log_lines(d, "quantizer", RESUMED_ABOVE)[resumes:], 120, "the quantizer to resume"
    )[0]
    above = int(line.group(1))
    fresh = {
        a: wait_until(
            lambda a=a: _first_row(d, a, t_kill, lambda r: r["weights_version"] > above),
            120,
            f"{a} on weights from the restarted quantizer",
        )
        for a in ACTORS
    }
    t_fresh = min(r["time"] for r in fresh.values())
    run.check_launcher()

    # While the quantizer was away, actors kept acting on their last good weights, reporting them as stale.
    for a in ACTORS:
        away = [r for r in rows(d, a) if t_kill + 1 < r["time"] < t_fresh]
        assert away, f"{a} wrote no metrics while the quantizer was away"
        assert away[-1]["step"] > steps_at_kill[a], f"{a} stopped acting"
        assert all(r["weights_version"] <= above for r in away)
        assert max(r["weights_age_s"] for r in away) > 0.5 * (t_fresh - t_kill - 1)
    # Versions never went backwards: not in the quantizer's metrics, not in any actor's.
    wait_until(lambda: last(d, "quantizer", "version") > above, 30, "the quantizer's metrics")
    versions = [r["version"] for r in rows(d, "quantizer")]
    assert versions == sorted(versions)
    for a in ACTORS:
        seen = [r["weights_version"] for r in rows(d, a) if r["weights_version"] is not None]
        assert seen == sorted(seen), f"{a} went back to older weights"

    numbers |= _after(d, time.time())
    record(
        d,
        "quantizer_kill",
        recovery_s=t_fresh - t_kill,
        max_weights_age_s=max(r["weights_age_s"] for a in ACTORS for r in rows(d, a) if r["time"] < t_fresh),
        version_before=above,
        version_after=versions[-1],
        **numbers,
    )


def test_replay_kill_restarts_it_from_its_checkpoint_and_clients_reconnect(run):
    d = run.dir
    checkpoints = len(log_lines(d, "replay", REPLAY_CKPT))
    wait_until(lambda: len(log_lines(d, "replay", REPLAY_CKPT)) > checkpoints, 30, "a replay checkpoint")
    t0, numbers = _baseline(d)
    pid, learner_pid = run.pid("replay"), run.pid("learner")
    ups = len(log_lines(d, "replay", REPLAY_UP))
    learner_at_kill = last(d, "learner", "step")
    steps_at_kill = {a: last(d, a, "step") for a in ACTORS}
    versions_at_kill = {a: last(d, a, "weights_version") for a in ACTORS}
    t_kill = time.time()
    os.kill(pid, signal.SIGKILL)
    checkpoint = table_sizes(log_lines(d, "replay", REPLAY_CKPT)[-1].group("before"))
    run.faults.append("replay")

    run.pids.add(wait_until(lambda: (p := role_pid(run.proc.pid, "replay")) != pid and p, 60, "a new replay"))
    up = wait_until(lambda: log_lines(d, "replay", REPLAY_UP)[ups:], 120, "the replay to restart")[0]
    restored = table_sizes(up.group("sizes"))
    # Nothing beyond the last checkpoint was lost.
    assert restored["priority_table"] >= checkpoint["priority_table"] > 0
    first_up = wait_until(lambda: _first_row(d, "replay", t_kill, lambda r: True), 60, "replay metrics")
    inserting = wait_until(
        lambda: _first_row(d, "replay", t_kill, lambda r: r["size"] > restored["priority_table"]),
        180,
        "transitions inserted after the restart",
    )
    learning = wait_until(
        lambda: _first_row(d, "learner", inserting["time"], lambda r: r["step"] > learner_at_kill + 20),
        180,
        "the learner to learn from the restarted replay",
    )
    for a in ACTORS:
        wait_until(
            lambda a=a: _first_row(
                d,
                a,
                t_kill,
                lambda r: r["step"] > steps_at_kill[a] and r["weights_version"] > versions_at_kill[a],
            ),
            180,
            f"{a} acting on new weights after the restart",
        )
    run.check_launcher()
    assert role_pid(run.proc.pid, "learner") == learner_pid, "the learner did not ride out the replay restart"

    numbers |= _after(d, time.time())
    record(
        d,
        "replay_kill",
        replay_back_s=first_up["time"] - t_kill,
        inserts_resume_s=inserting["time"] - t_kill,
        learner_resume_s=learning["time"] - t_kill,
        restored_items=restored["priority_table"],
        checkpoint_items=checkpoint["priority_table"],
        actor_reconnects=sum(last(d, a, "reconnects") for a in ACTORS),
        **numbers,
    )


def test_launcher_kill_leaves_no_role_running_and_the_learner_saves_its_state(run):
    # kill -9 gives the launcher no chance to stop its roles, which run in their own sessions: each must notice
    # its launcher is gone and stop itself the way SIGTERM stops it (metrics flushed, the learner checkpointed).
    d = run.dir
    pids = {label: run.pid(label) for label in ROLES}
    step_at_kill = last(d, "learner", "step")
    t_kill = time.time()
    run.proc.send_signal(signal.SIGKILL)
    run.proc.wait(timeout=10)
    run.faults.append("launcher")

    wait_until(lambda: not alive(list(pids.values())), 60, "every role to stop after its launcher was killed")
    stopped_s = time.time() - t_kill
    gone = r"the launcher \(pid (\d+)\) that started this role is gone: stopping"
    for label in ROLES:
        lines = log_lines(d, label, gone)
        assert lines and int(lines[-1].group(1)) == run.proc.pid, f"{label} did not stop on its own"
        assert log_lines(d, label, r"received SIGTERM: stopping"), f"{label} skipped the graceful stop"
    saved = [int(m.group(1)) for m in log_lines(d, "learner", r"learner checkpoint at step (\d+)")]
    assert saved and saved[-1] >= step_at_kill, "the learner's state at the kill was not saved"
    record(d, "launcher_kill", roles_stopped_s=stopped_s, learner_saved_step=saved[-1])


def test_learner_kill_ends_the_run_and_resume_continues_from_the_checkpoint(run):
    d = run.dir
    checkpoints = len(log_lines(d, "learner", r"learner checkpoint at step (\d+)"))
    wait_until(
        lambda: len(log_lines(d, "learner", r"learner checkpoint at step (\d+)")) > checkpoints,
        30,
        "a learner checkpoint",
    )
    # Some steps past the checkpoint, which the resume must not pretend to have kept.
    saved = int(log_lines(d, "learner", r"learner checkpoint at step (\d+)")[-1].group(1))
    wait_until(lambda: last(d, "learner", "step") > saved + 10, 60, "learner steps past the checkpoint")
    pids = [run.pid(label) for label in ROLES]
    learner_pid = pids[1]
    os.kill(learner_pid, signal.SIGKILL)
    t_kill = time.time()
    # The checkpoint the resume restores: a newer one may have been written while this test waited.
    saved = int(log_lines(d, "learner", r"learner checkpoint at step (\d+)")[-1].group(1))
    step_at_kill = last(d, "learner", "step")
    version_at_kill = last(d, "quantizer", "version")
    run.faults.append("learner")

    # A dead learner ends the run: every role stopped, summary.json written with the restarts so far.
    assert run.proc.wait(timeout=60) == 1
    stopped_s = time.time() - t_kill
    wait_until(lambda: not alive(pids), 10, "the roles to be gone after the launcher exited")
    summary = json.loads((d / "summary.json").read_text())
    assert summary["exit"] == "role_failed" and "learner" in summary["failure"]
    # Roles killed earlier in this run (by other tests, when they ran first) were counted as restarts.
    for label in ("actor_0", "quantizer", "replay"):
        if label in run.faults:
            assert summary["restarts"].get(label, 0) >= 1, summary["restarts"]
    final = table_sizes(log_lines(d, "replay", REPLAY_CKPT)[-1].group("before"))
    actor_steps = summary["actor_steps"]
    ups = len(log_lines(d, "replay", REPLAY_UP))

    started = time.time()
    resumed = subprocess.run(
        train_argv("--resume", str(d), "--quiet") + ["--max-actor-steps", str(actor_steps + 1500)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    after = json.loads((d / "summary.json").read_text())
    # The learner restarted exactly at its last checkpoint (variables, optimizer state and counters are restored
    # together by Acme's checkpointer) and went on past where it was killed.
    restored_at = log_lines(d, "learner", r"resumed learner at step (\d+)")
    assert restored_at and int(restored_at[-1].group(1)) == saved
    assert saved <= step_at_kill < after["learner_steps"]
    # The replay table came back from its checkpoint written when the run stopped.
    restored = table_sizes(log_lines(d, "replay", REPLAY_UP)[ups].group("sizes"))
    assert restored["priority_table"] >= final["priority_table"] > 0
    assert after["exit"] == "max_actor_steps" and after["actor_steps"] >= actor_steps + 1500
    new_versions = [r["version"] for r in rows(d, "quantizer") if r["time"] > started]
    assert new_versions and min(new_versions) >= version_at_kill and max(new_versions) > version_at_kill
    resumed_rows = [r for r in rows(d, "learner") if r["time"] > started]
    record(
        d,
        "learner_kill",
        run_stopped_s=stopped_s,
        checkpoint_step=saved,
        step_at_kill=step_at_kill,
        steps_lost=step_at_kill - saved,
        resume_first_step_s=resumed_rows[0]["time"] - started if resumed_rows else -1.0,
        resumed_learner_steps_per_s=rate(d, "learner", "step", started, time.time()),
        learner_steps_after_resume=after["learner_steps"],
        restored_items=restored["priority_table"],
    )
