"""Per-role metrics: a CSV file (the source of truth for reports) and TensorBoard scalars beside it.

Each role writes ``RUN_DIR/<role>/metrics.csv``. The header is the columns seen so far: a later row may omit keys
(left empty) and may bring new ones, which extend the header (the file is rewritten once with the new column
empty in the rows before it), so files stay rectangular and no value is dropped. The numeric values also go to
``RUN_DIR/<role>/tb`` through a maintained TensorBoard writer the role chooses by its framework
(:mod:`actorq.roles.tensorboard`: ``tf.summary``, or torch's ``SummaryWriter`` in actors), tagged by column and
stepped by the ``step`` column: ``tensorboard --logdir RUN_DIR`` shows every role.
"""

from __future__ import annotations

import csv
import logging
import math
import numbers
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

log = logging.getLogger(__name__)


UNFINISHED_EXITS = ("interrupted", "role_failed")
"""``exit`` reasons in a run's summary.json that mean it did not finish: reports skip such runs, and
``actorq experiment`` (and the Acme baseline bench) run them again from scratch."""


OUTSIDE_LOAD_LIMIT = 0.05
"""Share of the machine's CPU that processes other than a run's (and other guests, as steal) may use while it runs
before its speed figures count as disturbed: reports flag such runs (rerun them) and the launcher warns. On the
2-core Zen 3 undisturbed runs measured 0.5-1.5% (the launcher's meters, sshd); a nice-19 test run beside a grid
7-35%, with the learner's steps/s down to a third while it ran (nice does not protect a 2-core machine)."""


class ScalarSink(Protocol):
    """Where a metrics row's numeric values go besides the CSV (a TensorBoard writer)."""

    def write(self, values: Mapping[str, float], step: int) -> None:
        """Record ``values`` (tag -> value) at ``step``."""

    def close(self) -> None:
        """Flush and close."""


class MetricsWriter:
    """Appends rows to ``<dir>/metrics.csv`` and mirrors numeric values to a :class:`ScalarSink`.

    Args:
        directory: the role's directory (created).
        tensorboard: makes the sink from ``<dir>/tb`` (e.g. :func:`actorq.roles.tensorboard.writer_for`); None or
            False: CSV only.
        step_key: the column used as the TensorBoard step.
    """

    def __init__(
        self,
        directory: str | Path,
        tensorboard: Callable[[Path], ScalarSink] | bool | None = None,
        step_key: str = "step",
    ):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / "metrics.csv"
        self._step_key = step_key
        self._fields: list[str] | None = None
        self._lock = threading.Lock()
        if self.path.exists() and self.path.stat().st_size > 0:
            # Resuming: keep the existing header so the file stays rectangular.
            with self.path.open() as fh:
                self._fields = next(csv.reader(fh), None)
        self._file = self.path.open("a", newline="")
        self._csv = csv.writer(self._file)
        self._tb: ScalarSink | None = None
        if callable(tensorboard):
            try:
                self._tb = tensorboard(self.directory / "tb")
            except (ImportError, OSError) as exc:  # TensorBoard is optional; the CSV is what reports read.
                log.warning("TensorBoard disabled for %s: %s", self.directory, exc)

    @property
    def fields(self) -> list[str]:
        """The CSV's columns so far."""
        return list(self._fields or [])

    def write(self, row: Mapping[str, object]) -> None:
        """Append one row (wall time is added as ``time`` when absent). Thread-safe; a no-op once closed."""
        with self._lock:
            if not self._file.closed:
                self._write(dict(row))

    def _write(self, row: dict[str, object]) -> None:
        row.setdefault("time", time.time())
        if self._fields is None:
            self._fields = list(row)
            self._csv.writerow(self._fields)
        new = [k for k in row if k not in self._fields]
        if new:
            self._extend_header(new)
        self._csv.writerow(["" if row.get(k) is None else row.get(k, "") for k in self._fields])
        self._file.flush()
        if self._tb is not None:
            self._write_tb(row)

    def _extend_header(self, new: list[str]) -> None:
        """Add columns: the file is rewritten (atomically) with them empty in every earlier row."""
        assert self._fields is not None
        self._file.close()
        with self.path.open(newline="") as fh:
            rows = list(csv.reader(fh))[1:]
        self._fields = self._fields + new
        tmp = self.path.with_name(self.path.name + ".tmp")
        with tmp.open("w", newline="") as fh:
            out = csv.writer(fh)
            out.writerow(self._fields)
            out.writerows(r + [""] * (len(self._fields) - len(r)) for r in rows)
        os.replace(tmp, self.path)
        log.info("metrics %s: new columns %s", self.path, new)
        self._file = self.path.open("a", newline="")
        self._csv = csv.writer(self._file)

    def _write_tb(self, row: Mapping[str, object]) -> None:
        step = int(float(row.get(self._step_key, 0) or 0))
        values = {
            key: float(value)
            for key, value in row.items()
            if key not in ("time", self._step_key)
            and not isinstance(value, bool)
            and isinstance(value, numbers.Real)
            and math.isfinite(value)
        }
        if values:
            self._tb.write(values, step)

    def close(self) -> None:
        """Flush and close the files (safe to call twice)."""
        with self._lock:
            if not self._file.closed:
                self._file.close()
            if self._tb is not None:
                self._tb.close()
                self._tb = None


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
