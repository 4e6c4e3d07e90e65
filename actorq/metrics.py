"""Per-role metrics: a CSV file (the source of truth for reports) and TensorBoard scalars beside it.

Each role writes ``RUN_DIR/<role>/metrics.csv``; the columns are fixed by the first row written, later rows may
omit keys (left empty) but may not add new ones (they are dropped with a warning once), so files stay rectangular.
TensorBoard events are written with the ``tensorboard`` package's record writer, which needs neither TensorFlow nor
torch, so every layer may log; synchronously (:class:`EventFile`), since the package's asynchronous writer blocks its
caller forever once its thread died on a full disk.

A row that cannot be written (a full disk) is counted (:attr:`MetricsWriter.failures`), warned about once per
outage, and dropped whole (the file is cut back to its last complete row): metrics never stop a role.
"""

from __future__ import annotations

import contextlib
import csv
import io
import itertools
import logging
import math
import os
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from actorq.durable import WriteOutage

log = logging.getLogger(__name__)


UNFINISHED_EXITS = ("interrupted", "role_failed")
"""``exit`` reasons in a run's summary.json that mean it did not finish: reports skip such runs, and
``actorq experiment`` (and the Acme baseline bench) run them again from scratch."""


OUTSIDE_LOAD_LIMIT = 0.05
"""Share of the machine's CPU that processes other than a run's (and other guests, as steal) may use while it runs
before its speed figures count as disturbed: reports flag such runs (rerun them) and the launcher warns. On the
2-core Zen 3 undisturbed runs measured 0.5-1.5% (the launcher's meters, sshd); a nice-19 test run beside a grid
7-35%, with the learner's steps/s down to a third while it ran (nice does not protect a 2-core machine)."""


_EVENT_FILES = itertools.count()


class EventFile:
    """One TensorBoard event file, appended synchronously: a failed write raises here, on the caller's thread."""

    def __init__(self, directory: Path):
        from tensorboard.compat.proto import event_pb2
        from tensorboard.summary.writer.record_writer import RecordWriter

        directory.mkdir(parents=True, exist_ok=True)
        name = f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}.{os.getpid()}.{next(_EVENT_FILES)}"
        self._file = (directory / name).open("ab")
        self._records = RecordWriter(self._file)
        self.add_event(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2"))

    def add_event(self, event) -> None:
        """Append ``event`` (an ``event_pb2.Event``) and flush it to the file."""
        self._records.write(event.SerializeToString())
        self._file.flush()

    def close(self) -> None:
        self._file.close()


TB_RETRY_S = 30.0
"""After a TensorBoard write failed, how long before the writer is opened again (a new event file)."""


class MetricsWriter:
    """Appends rows to ``<dir>/metrics.csv`` and mirrors numeric values to TensorBoard.

    Args:
        directory: the role's directory (created).
        tensorboard: also write TensorBoard event files.
        step_key: the column used as the TensorBoard step.
    """

    def __init__(self, directory: str | Path, tensorboard: bool = True, step_key: str = "step"):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / "metrics.csv"
        self._step_key = step_key
        self._fields: list[str] | None = None
        self._lock = threading.Lock()
        self._warned: set[str] = set()
        if self.path.exists() and self.path.stat().st_size > 0:
            # Resuming: keep the existing header so the file stays rectangular.
            with self.path.open() as fh:
                self._fields = next(csv.reader(fh), None)
        # Rows go out whole through os.write on an append-only descriptor, so a failed write can be cut back.
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._outage = WriteOutage(f"metrics {self.path}")
        self._tb_outage = WriteOutage(f"TensorBoard events in {self.directory / 'tb'}")
        self._tb = None
        self._tb_retry_at = 0.0
        self._tensorboard = tensorboard
        if tensorboard:
            self._open_tb()

    @property
    def failures(self) -> int:
        """Rows (and TensorBoard events) that could not be written."""
        return self._outage.failures + self._tb_outage.failures

    def _open_tb(self) -> None:
        try:
            self._tb = EventFile(self.directory / "tb")
        except ImportError as exc:  # TensorBoard is optional; the CSV is what reports read.
            log.warning("TensorBoard disabled for %s: %s", self.directory, exc)
            self._tensorboard = False
        except Exception as exc:  # noqa: BLE001  (a full or lost disk: retried later)
            self._tb_failed(exc)

    def _tb_failed(self, exc: BaseException) -> None:
        self._tb_outage.failed(exc)
        self._tb_retry_at = time.monotonic() + TB_RETRY_S

    def write(self, row: Mapping[str, object]) -> None:
        """Append one row (wall time is added as ``time`` when absent). Thread-safe; a no-op once closed."""
        with self._lock:
            if self._fd is not None:
                self._write(dict(row))

    def _write(self, row: dict[str, object]) -> None:
        row.setdefault("time", time.time())
        text = io.StringIO()
        lines = csv.writer(text)
        header = self._fields is None
        if header:
            self._fields = list(row)
            lines.writerow(self._fields)
        extra = set(row) - set(self._fields) - self._warned
        if extra:
            log.warning("metrics %s: dropping columns not in the header: %s", self.path, sorted(extra))
            self._warned |= extra
        lines.writerow(["" if row.get(k) is None else row.get(k, "") for k in self._fields])
        if not self._append(text.getvalue().encode()) and header:
            self._fields = None  # the header never reached the file: the next row writes it
        if self._tensorboard:
            self._write_tb(row)

    def _append(self, data: bytes) -> bool:
        """Append ``data`` whole, or not at all (cut back to the last complete row): False when it failed."""
        end = os.fstat(self._fd).st_size
        try:
            written = os.write(self._fd, data)
            if written != len(data):
                raise OSError(f"wrote {written} of {len(data)} bytes")
        except OSError as exc:
            self._outage.failed(exc)
            with contextlib.suppress(OSError):  # else the next row cuts back again from the size it finds
                os.ftruncate(self._fd, end)
            return False
        self._outage.succeeded()
        return True

    def _write_tb(self, row: Mapping[str, object]) -> None:
        if self._tb is None:
            if time.monotonic() < self._tb_retry_at:
                return
            self._open_tb()
            if self._tb is None:
                return
        try:
            self._add_event(row)
        except Exception as exc:  # noqa: BLE001  (its writer thread's error, e.g. a full disk: reopened later)
            self._tb_failed(exc)
            self._close_tb()
            return
        self._tb_outage.succeeded()

    def _close_tb(self) -> None:
        tb, self._tb = self._tb, None
        if tb is not None:
            with contextlib.suppress(Exception):  # flushing onto a full disk: already counted
                tb.close()

    def _add_event(self, row: Mapping[str, object]) -> None:
        from tensorboard.compat.proto import event_pb2, summary_pb2

        step = int(float(row.get(self._step_key, 0) or 0))
        values = []
        for key, value in row.items():
            if key in ("time", self._step_key) or isinstance(value, bool):
                continue
            if isinstance(value, (int, float)) and math.isfinite(value):
                values.append(summary_pb2.Summary.Value(tag=key, simple_value=float(value)))
        if values:
            event = event_pb2.Event(
                wall_time=time.time(), step=step, summary=summary_pb2.Summary(value=values)
            )
            self._tb.add_event(event)

    def close(self) -> None:
        """Flush and close the files (safe to call twice)."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            self._tensorboard = False
            self._close_tb()


def json_safe(obj: object) -> object:
    """``obj`` with every non-finite float (NaN, inf), however deeply nested in dicts and lists, as None (null):
    strict JSON has no NaN, and a summary or record must load anywhere."""
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def read_metrics(path: str | Path) -> list[dict[str, float | str]]:
    """Read a metrics CSV into rows of floats (strings kept where a value is not numeric; empty -> None)."""
    path = Path(path)
    if not path.exists():
        return []
    rows = []
    with path.open(newline="") as fh:
        for raw in csv.DictReader(fh):
            row: dict[str, float | str] = {}
            for key, value in raw.items():
                if key is None:
                    continue
                if value in ("", None):
                    row[key] = None
                    continue
                try:
                    row[key] = float(value)
                except ValueError:
                    row[key] = value
            rows.append(row)
    return rows


def evaluation_row(
    learner_step: int, elapsed: float, actor_steps: int, returns: Sequence[float], eval_seconds: float
) -> dict[str, float]:
    """One row of ``evaluator/metrics.csv``, the columns ``actorq report`` reads from every kind of run.

    Args:
        learner_step: Learner step of the evaluated weights.
        elapsed: Seconds since the run started.
        actor_steps: Total actor steps (replay inserts) when the evaluation began.
        returns: The undiscounted return of each evaluation episode.
        eval_seconds: Seconds the evaluation episodes took.
    """
    return {
        "step": learner_step,
        "elapsed": elapsed,
        "actor_steps": actor_steps,
        "eval_return": float(np.mean(returns)),
        "eval_return_std": float(np.std(returns)),
        "eval_seconds": eval_seconds,
    }
