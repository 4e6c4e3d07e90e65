"""A live ``actorq train --launcher local`` run whose run directory fills up: it keeps running, and resumes.

The run directory is a small tmpfs of the test's own (mounting one needs root: the test skips without it), so
filling it touches nothing else on the machine. While it is full every metrics row, TensorBoard event, status
record, resume file and checkpoint fails with ENOSPC: the roles must keep acting, learning and publishing (seen on
the replay server itself, since nothing can be written to the run directory), nothing may restart, and once the
space is back the run carries on, ends with a summary that counts the failed writes, and resumes from it.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from actorq.config import save_config
from tests.conftest import tiny_config
from tests.faults._helpers import ROOT, last, log_lines, role_pid, stop_owned
from tests.training import train_argv
from tests.waiting import wait_until

pytestmark = [
    pytest.mark.faults,
    pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("mount"), reason="mounting a tmpfs needs root"),
]

ROLES = ("replay", "learner", "quantizer", "actor_0", "actor_1", "evaluator")
DISK_MB = 160


@pytest.fixture
def disk(tmp_path):
    """A ``DISK_MB`` MiB tmpfs, unmounted at the end (also when the test fails)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        # The roles' logs, for whoever reads a failure (the tmpfs goes with the unmount).
        shutil.copytree(mount / "run" / "logs", tmp_path / "logs", dirs_exist_ok=True)
        subprocess.run(["umount", "--lazy", str(mount)], check=False)


def _fill(path: Path) -> int:
    """Write ``path`` until the disk is full; the bytes written."""
    written = 0
    with path.open("wb", buffering=0) as fh:
        block = bytes(1 << 20)
        while True:
            try:
                written += fh.write(block)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                break
        small = bytes(4096)
        while True:  # the last pages too
            try:
                written += fh.write(small)
            except OSError:
                return written


def _replay_counts(address: str) -> tuple[int, int]:
    """(experience inserts, learner-weight inserts) asked of the replay server."""
    from actorq.replay import LEARNER_WEIGHTS_TABLE
    from actorq.replay.client import new_client

    info = new_client(address).server_info(timeout=5)
    learner = int(info[LEARNER_WEIGHTS_TABLE].rate_limiter_info.insert_stats.completed)
    experience = sum(
        int(t.rate_limiter_info.insert_stats.completed)
        for name, t in info.items()
        if name == "priority_table"
    )
    return experience, learner


def test_a_run_whose_disk_fills_keeps_running_and_resumes(disk, tmp_path):
    run_dir = disk / "run"
    config = tiny_config(
        "dqn",
        launcher="local",
        max_minutes=10,
        **{
            "replay.max_size": 20_000,
            "learner.checkpoint_period_s": 2.0,
            "learner.publish_period": 20,
            "evaluator.period_s": 2.0,
        },
    )
    save_config(config, tmp_path / "in.yaml")
    out = (tmp_path / "launcher.out").open("wb")
    proc = subprocess.Popen(
        train_argv(str(tmp_path / "in.yaml"), "--run-dir", str(run_dir), "--quiet"),
        cwd=ROOT,
        stdout=out,
        stderr=subprocess.STDOUT,
    )
    pids: set[int] = set()
    resumed = None
    try:
        wait_until(
            lambda: (
                proc.poll() is not None
                or (
                    last(run_dir, "learner", "step") > 20
                    and all(last(run_dir, a, "weights_version", -1) >= 1 for a in ("actor_0", "actor_1"))
                    and all(role_pid(proc.pid, r) for r in ROLES)
                )
            ),
            300,
            "the run to be learning with every role up",
        )
        assert proc.poll() is None, (tmp_path / "launcher.out").read_text()[-3000:]
        before = {r: role_pid(proc.pid, r) for r in ROLES}
        pids |= set(before.values())
        address = f"localhost:{(run_dir / 'replay' / 'port').read_text().strip()}"

        filler = disk / "filler"
        assert _fill(filler) > 0
        full_at = _replay_counts(address)
        # Full: learner checkpoints (every 2 s), replay checkpoints, metrics rows and status records all fail. The
        # run goes on: actors insert, the learner publishes, and no role dies.
        wait_until(
            lambda: (now := _replay_counts(address))[0] > full_at[0] + 500 and now[1] > full_at[1] + 5,
            120,
            "actors and the learner to keep going on a full disk",
        )
        assert proc.poll() is None, (tmp_path / "launcher.out").read_text()[-3000:]
        assert {r: role_pid(proc.pid, r) for r in ROLES} == before, "a role died on the full disk"

        filler.unlink()
        freed = time.time()
        wait_until(
            lambda: (run_dir / "learner" / "status.json").stat().st_mtime > freed + 1,
            60,
            "status records written again",
        )
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["exit"] == "interrupted" and not summary["restarts"], summary["restarts"]
        assert summary["write_failures"] > 0, summary.get("write_failures")

        resumed = subprocess.Popen(
            train_argv("--resume", str(run_dir), "--quiet"), cwd=ROOT, stdout=out, stderr=subprocess.STDOUT
        )
        wait_until(
            lambda: (
                resumed.poll() is not None or log_lines(run_dir, "learner", r"resumed learner at step (\d+)")
            ),
            300,
            "the resumed learner",
        )
        assert resumed.poll() is None, (tmp_path / "launcher.out").read_text()[-3000:]
        step = int(log_lines(run_dir, "learner", r"resumed learner at step (\d+)")[-1].group(1))
        assert 0 < step <= summary["learner_steps"]  # its checkpoint at the stop (or an earlier one)
        wait_until(lambda: last(run_dir, "learner", "step") > step + 10, 120, "the resumed run learning")
    finally:
        for launcher in (proc, resumed):
            if launcher is not None:
                stop_owned(launcher, pids)
        out.close()
