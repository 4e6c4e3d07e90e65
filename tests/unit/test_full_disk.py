"""A full disk never stops a role: metrics rows, status records, version records and checkpoints that fail with
``OSError`` are warned about once per outage and counted; the files a resume depends on are fsynced (file and
directory). ``/dev/full`` stands in for the full disk (every write to it fails with ENOSPC)."""

from __future__ import annotations

import errno
import logging
import os
import stat
from pathlib import Path

import pytest

from actorq.launchers.monitor import RunMonitor
from actorq.metrics import MetricsWriter, read_metrics
from actorq.roles.version_record import VersionRecord
from actorq.status import STATUS_FILE, Evaluation, EvaluatorStatus, LearnerStatus, write_status
from tests.conftest import tiny_config
from tests.unit.roles.test_learner_close import _BlockedLearnerRole

FULL = Path("/dev/full")
pytestmark = pytest.mark.skipif(not FULL.exists(), reason="needs /dev/full")


def _warnings(caplog, text: str) -> int:
    return sum(text in r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)


def test_metrics_rows_on_a_full_disk_are_counted_and_warned_about_once(tmp_path, caplog):
    (tmp_path / "metrics.csv").symlink_to(FULL)
    writer = MetricsWriter(tmp_path, tensorboard=False)
    with caplog.at_level(logging.WARNING):
        for step in range(3):
            writer.write({"step": step, "loss": 0.5})  # must not raise
    writer.close()
    assert writer.failures == 3
    assert _warnings(caplog, "metrics") == 1


def test_metrics_rows_resume_whole_after_the_outage(tmp_path, monkeypatch):
    writer = MetricsWriter(tmp_path, tensorboard=False)
    writer.write({"step": 0, "loss": 0.5})
    real = os.write

    def full(fd, data):  # half a row reaches the disk, then it is full
        real(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    writer.write({"step": 1, "loss": 0.25})
    monkeypatch.setattr(os, "write", real)
    writer.write({"step": 2, "loss": 0.125})
    writer.close()
    rows = read_metrics(tmp_path / "metrics.csv")
    assert [r["step"] for r in rows] == [0.0, 2.0] and writer.failures == 1


def test_a_status_record_on_a_full_disk_is_warned_about_once_per_outage(tmp_path, caplog, monkeypatch):
    full = [OSError(errno.ENOSPC, "No space left on device")] * 3

    def write_atomic(path, data, *, sync=True):
        if full:
            raise full.pop()
        Path(path).write_text(data)

    monkeypatch.setattr("actorq.status.write_atomic", write_atomic, raising=False)
    record = LearnerStatus(role="learner", label="learner", step=1)
    with caplog.at_level(logging.INFO):
        results = [write_status(tmp_path, record) for _ in range(4)]
    assert results == [False, False, False, True]
    assert _warnings(caplog, "could not write") == 1
    assert (tmp_path / STATUS_FILE).exists()


def test_a_version_record_is_fsynced_with_its_directory(tmp_path, monkeypatch):
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(stat.S_ISDIR(os.fstat(fd).st_mode)) or real(fd))
    VersionRecord(tmp_path / "published_version.json", "abcd").write(7, learner_step=70)
    assert VersionRecord(tmp_path / "published_version.json", "abcd").read() == 7
    assert False in synced and True in synced, synced  # the file, then its directory


def test_a_learner_checkpoint_that_fails_on_a_full_disk_does_not_stop_the_learner(tmp_path, caplog):
    role = _BlockedLearnerRole(tiny_config("dqn"), tmp_path)

    def save(force: bool = False) -> bool:
        raise OSError(errno.ENOSPC, "No space left on device")

    role.learner.save = save
    with caplog.at_level(logging.WARNING):
        role.close()  # the final save: warned, not raised
    assert role.write_failures >= 1 and _warnings(caplog, "checkpoint") == 1


def test_the_monitor_ignores_evaluations_no_run_can_make(tmp_path):
    evaluations = tuple(
        Evaluation(time=1_000.0 + i, learner_step=10 * (i + 1), actor_steps=100, eval_return=r)
        for i, r in enumerate([1e12, 1e12, 1e12, float("inf")])
    )
    records = {"evaluator": EvaluatorStatus(role="evaluator", label="evaluator", evaluations=evaluations)}
    monitor = RunMonitor(tiny_config("dqn", target_return=195.0), tmp_path, records.get, list(records))
    assert monitor.target_evaluation() is None and monitor.stop_reason() is None
