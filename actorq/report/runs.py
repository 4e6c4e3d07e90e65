"""Reading run directories: ``summary.json``, ``config.yaml`` and every role's ``metrics.csv``.

A path given to the report is either a run directory (it holds ``summary.json``) or a directory of run
directories (an ``actorq experiment`` output); ``_incomplete`` folders are never read. Runs whose exit reason is
``interrupted`` or ``role_failed`` are skipped and listed with the reason.

Time zero of a run is the launcher's start (``summary.energy.started_at``, recorded before the first role
starts); for runs without it, the earliest role start found in the metrics (``time - elapsed`` of each role's
first row), which is the replay server's start.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from actorq.config import AUTO_COMM_BITS
from actorq.metrics import read_metrics
from actorq.status import RUN_DIR_FORMAT

log = logging.getLogger(__name__)


QUANTIZED_EVAL_COLUMNS = ("quantized_return", "quantized_agreement", "quantized_action_error")
"""Evaluation columns of ``evaluator.evaluate_quantized`` runs (:mod:`actorq.roles.evaluator`) the report reads."""


@dataclass
class RunData:
    """One run, as read from its directory."""

    path: Path
    summary: dict[str, Any]
    config: dict[str, Any]
    task: str
    label: str
    """Group label: ``summary["label"]`` when set (e.g. "acme-fp32"), else the precision (+ "/c<bits>" when the
    communication width is not the precision's natural one)."""
    seed: int
    start: float
    """Epoch seconds of the run's time zero."""
    eval_t: np.ndarray
    """Evaluation times, seconds since ``start``."""
    eval_steps: np.ndarray
    """Total actor steps (experience inserts) at each evaluation."""
    eval_learner_steps: np.ndarray
    eval_return: np.ndarray
    actors: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    learner: list[dict[str, Any]] = field(default_factory=list)
    replay: list[dict[str, Any]] = field(default_factory=list)
    quantizer: list[dict[str, Any]] = field(default_factory=list)
    energy: list[dict[str, Any]] = field(default_factory=list)
    sweep: dict[str, str] = field(default_factory=dict)
    """The run's sweep cell (``{config key: value}``) when it came from ``actorq experiment --sweep``."""
    aggregates: dict[str, Any] | None = None
    """Per-run measurements already reduced from the metrics (a curated record); None: compute them from the rows."""
    eval_quantized: dict[str, np.ndarray] = field(default_factory=dict)
    """The :data:`QUANTIZED_EVAL_COLUMNS` an ``evaluator.evaluate_quantized`` run wrote, aligned with ``eval_t``
    (NaN where an evaluation has none); empty for other runs."""
    experiment: dict[str, Any] | None = None
    """Which experiment (and frozen grid file) made the run, from its record (:func:`actorq.report.records.
    make_record`); None for a run directory read directly or a record made before records said so."""

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def precision(self) -> str:
        return str(self.summary.get("precision", "?"))

    def cfg(self, section: str, key: str, default: Any = None) -> Any:
        """A config value (``config.yaml``), or ``default``."""
        value = (self.config.get(section) or {}).get(key, default)
        return default if value is None else value


def discover(paths: list[str | Path]) -> list[Path]:
    """Run directories under the given paths (each a run directory or a directory of them), sorted, unique."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if (path / "summary.json").is_file():
            found.append(path)
        elif path.is_dir():
            found += [p for p in sorted(path.iterdir()) if p.is_dir() and (p / "summary.json").is_file()]
        else:
            log.warning("%s is neither a run directory nor a directory of runs", path)
    unique: dict[Path, None] = {}
    for p in found:
        unique.setdefault(p.resolve(), None)
    return list(unique)


def group_label(summary: dict[str, Any]) -> str:
    """The label runs are grouped and compared by (see :attr:`RunData.label`)."""
    if summary.get("label"):
        return str(summary["label"])
    precision = str(summary.get("precision", "?"))
    bits = summary.get("comm_bits")
    if bits is not None and AUTO_COMM_BITS.get(precision) not in (None, int(bits)):
        return f"{precision}/c{int(bits)}"
    return precision


def cell_label(label: str, sweep: dict[str, str]) -> str:
    """``int8 [replay.samples_per_insert=8]`` (the label alone outside a sweep)."""
    if not sweep:
        return label
    return f"{label} [{', '.join(f'{k}={v}' for k, v in sweep.items())}]"


def split_label(label: str) -> tuple[str, str]:
    """``"int8/c8 [spi=8]"`` -> ``("int8/c8", " [spi=8]")``: the system/precision part and the sweep cell."""
    head, sep, cell = label.partition(" [")
    return head, sep + cell


def experiment_sweeps(directory: Path) -> dict[str, dict[str, str]]:
    """``{run name: sweep cell}`` from an experiment's ``experiment.json`` (empty when there is none)."""
    try:
        record = json.loads((directory / "experiment.json").read_text())
        return {name: dict(entry.get("sweep") or {}) for name, entry in record.get("runs", {}).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def _first_role_start(path: Path) -> float | None:
    starts = []
    for csv_path in path.glob("*/metrics.csv"):
        rows = read_metrics(csv_path)
        if rows and rows[0].get("time") is not None and rows[0].get("elapsed") is not None:
            starts.append(float(rows[0]["time"]) - float(rows[0]["elapsed"]))
    return min(starts) if starts else None


def run_start(path: Path, summary: dict[str, Any]) -> float | None:
    """Epoch time zero of a run (see the module docstring)."""
    energy = summary.get("energy") or {}
    for value in (energy.get("started_at"), summary.get("started_at")):
        if isinstance(value, (int, float)) and value > 0:
            return float(value)
    return _first_role_start(path)


def load_run(path: str | Path, sweep: dict[str, str] | None = None) -> RunData:
    """Read one run directory.

    Raises:
        ValueError: no readable ``summary.json``, a newer run-directory format than this reader knows, or no way
            to tell when the run started.
    """
    path = Path(path)
    try:
        summary = json.loads((path / "summary.json").read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: unreadable summary.json ({exc})") from None
    fmt = summary.get("run_dir_format", 1)  # runs made before the field existed have the first layout
    if not isinstance(fmt, int) or fmt > RUN_DIR_FORMAT:
        raise ValueError(
            f"{path}: run directory format {fmt!r}, this ActorQ reads up to {RUN_DIR_FORMAT}: report it with the "
            "ActorQ version that made it, or upgrade"
        )
    try:
        config = yaml.safe_load((path / "config.yaml").read_text()) or {}
    except (OSError, yaml.YAMLError):
        config = {}
    start = run_start(path, summary)
    if start is None:
        raise ValueError(f"{path}: cannot tell when the run started (no energy record, no role metrics)")
    evals = [r for r in read_metrics(path / "evaluator" / "metrics.csv") if r.get("eval_return") is not None]
    evals.sort(key=lambda r: float(r["time"]))

    def column(key: str) -> np.ndarray:
        return np.asarray([np.nan if r.get(key) is None else float(r[key]) for r in evals], dtype=np.float64)

    return RunData(
        path=path,
        summary=summary,
        config=config,
        task=str(summary.get("task", "?")),
        label=cell_label(group_label(summary), sweep or {}),
        seed=int(summary.get("seed", config.get("seed", 0)) or 0),
        start=start,
        eval_t=column("time") - start,
        eval_steps=column("actor_steps"),
        eval_learner_steps=column("step"),
        eval_return=column("eval_return"),
        actors={p.name: read_metrics(p / "metrics.csv") for p in sorted(path.glob("actor_*")) if p.is_dir()},
        learner=read_metrics(path / "learner" / "metrics.csv"),
        replay=read_metrics(path / "replay" / "metrics.csv"),
        quantizer=read_metrics(path / "quantizer" / "metrics.csv"),
        energy=read_metrics(path / "energy" / "metrics.csv"),
        sweep=dict(sweep or {}),
        eval_quantized={
            key: column(key) for key in QUANTIZED_EVAL_COLUMNS if any(r.get(key) is not None for r in evals)
        },
    )
