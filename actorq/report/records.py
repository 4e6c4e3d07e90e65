"""Curated run records: what ``actorq report`` needs of a finished run, without its run directory.

``actorq experiment`` writes ``OUT/records/<run>.json`` when a run finishes: the run's ``summary.json`` and resolved
config, its sweep cell, its evaluation curve (seconds since time zero, actor steps, learner steps, return; and the
``evaluator.evaluate_quantized`` columns where the run has them) and the
per-run aggregates the report reduces from the roles' metrics and status records (learner steps/s, env steps/s,
CPU seconds per role, the rate limiter's blocked shares, the actors' runtime breakdown, ...; see
:data:`actorq.report.analysis.AGGREGATES`). A few kB instead of the run directory's MBs, and the report built from
records alone is the same as the one built from the run directories (both go through the same aggregates).

Records are plain JSON, read with :func:`json.loads` and checked for their schema; nothing is unpickled. A record
is written once, whole, when its run finishes; nothing edits a committed record in place.

A run stopped part-way (``exit: interrupted``) has a record only when its experiment counts interruptions as
censoring (``actorq experiment --interruptions censor``): the record then says ``"interruption": "censored"``, the
run counts as done, and the report reads it as a run that had not reached the threshold by its last evaluation
(:func:`counts`).

This module is where both sides meet: ``actorq experiment`` writes records with :func:`write_record`, the report
reads them with :func:`load_runs`. It depends only on :mod:`~actorq.report.runs` and
:mod:`~actorq.report.measure`, not on the report's tables or text.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import numpy as np

from actorq.metrics import UNFINISHED_EXITS
from actorq.report.measure import run_aggregates
from actorq.report.runs import (
    QUANTIZED_EVAL_COLUMNS,
    RunData,
    cell_label,
    discover,
    experiment_sweeps,
    group_label,
    load_run,
)

log = logging.getLogger(__name__)

RECORDS_DIR = "records"
"""Where an experiment keeps its runs' records: ``OUT/records/<run>.json``."""
SCHEMA = "actorq-run-record/1"
CENSORED = "censored"
"""``record["interruption"]`` of a run that a session's end (or another stop that does not depend on how the run
went) cut off part-way, counted as censored at its last evaluation instead of being run again. Running cut-off
runs again from scratch would keep only the attempts short enough to fit between cuts: the longest draws would
be lost (length-biased sampling). A cut falls independently of the run it hits, so the censoring is
non-informative and the Kaplan-Meier median and the speed-up's censoring bounds hold."""


def marked_censored(record: dict[str, Any]) -> bool:
    """Whether a record is marked as a run cut off part-way that counts, censored (:data:`CENSORED`)."""
    return record.get("interruption") == CENSORED


def counts(record: dict[str, Any]) -> bool:
    """Whether a record stands for a run that counts: finished, or cut off and counted as censored."""
    exit_reason = (record.get("summary") or {}).get("exit")
    if exit_reason not in (None, *UNFINISHED_EXITS):
        return True
    return exit_reason == "interrupted" and marked_censored(record)


def make_record(
    run_dir: str | Path,
    sweep: dict[str, str] | None = None,
    interruption: str | None = None,
    experiment: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The curated record of a finished run directory (JSON-ready); ``interruption``: :data:`CENSORED` for a run
    cut off part-way that counts as censored; ``experiment``: which experiment made it (``name``: its folder; for a
    preregistered grid also the frozen file's path, commit and sha256), what pairs runs (:mod:`actorq.report.pairing`)
    and what a preregistered replication counts (:mod:`actorq.report.replication`).

    Raises:
        ValueError: The run directory has no readable summary or no time zero (see :func:`load_run`).
    """
    run = load_run(run_dir, sweep)

    def col(values: np.ndarray) -> list[float | None]:
        return [None if not np.isfinite(v) else float(v) for v in values]

    return {
        "schema": SCHEMA,
        "name": run.name,
        **({"interruption": interruption} if interruption else {}),
        **({"experiment": dict(experiment)} if experiment else {}),
        "sweep": dict(sweep or {}),
        "summary": run.summary,
        "config": run.config,
        "start": run.start,
        "evaluations": {
            "time_s": col(run.eval_t),
            "actor_steps": col(run.eval_steps),
            "learner_steps": col(run.eval_learner_steps),
            "return": col(run.eval_return),
            **{key: col(values) for key, values in run.eval_quantized.items()},
        },
        "aggregates": run_aggregates(run),
    }


def write_record(
    run_dir: str | Path,
    records_dir: str | Path,
    sweep: dict[str, str] | None = None,
    interruption: str | None = None,
    experiment: dict[str, Any] | None = None,
) -> Path:
    """Write ``records_dir/<run>.json`` atomically (a new file; an existing record of the run is replaced whole,
    never edited in place); returns its path. ``interruption``: as :func:`make_record`'s.

    Raises:
        ValueError: The run directory has no readable summary or no time zero.
        OSError: The record could not be written.
    """
    record = make_record(run_dir, sweep, interruption, experiment)
    path = Path(records_dir) / f"{record['name']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record, indent=1, default=_json_default))
    os.replace(tmp, path)
    return path


def finished_record(records_dir: str | Path, name: str) -> dict[str, Any] | None:
    """The record ``records_dir/<name>.json`` when it is a readable record of a run that counts (:func:`counts`:
    finished, or cut off and counted as censored), else None.

    ``actorq experiment --records DIR`` counts a run with such a record as done, so a grid can go on in a fresh
    checkout (or on another day's machine) from records committed earlier, without their run directories.
    """
    path = Path(records_dir) / f"{name}.json"
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("schema") != SCHEMA:
        return None
    if not isinstance(record.get("summary"), dict) or not counts(record):
        return None
    return record


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def record_to_run(record: Any, path: Path) -> RunData:
    """A :class:`RunData` from a record (``path``: where the record lives; its stem is the run's name).

    Raises:
        ValueError: Not a record of this schema, or fields missing.
    """
    if not isinstance(record, dict) or record.get("schema") != SCHEMA:
        raise ValueError(f"{path}: not an ActorQ run record (schema {SCHEMA})")
    try:
        summary, evals, sweep = record["summary"], record["evaluations"], dict(record.get("sweep") or {})

        def col(key: str) -> np.ndarray:
            return np.asarray([np.nan if v is None else float(v) for v in evals[key]], np.float64)

        return RunData(
            path=path.with_suffix(""),
            summary=summary,
            config=record.get("config") or {},
            task=str(summary.get("task", "?")),
            label=cell_label(group_label(summary), sweep),
            seed=int(summary.get("seed", 0) or 0),
            start=float(record["start"]),
            eval_t=col("time_s"),
            eval_steps=col("actor_steps"),
            eval_learner_steps=col("learner_steps"),
            eval_return=col("return"),
            sweep=sweep,
            aggregates=dict(record["aggregates"]),
            eval_quantized={key: col(key) for key in QUANTIZED_EVAL_COLUMNS if key in evals},
            experiment=record.get("experiment") if isinstance(record.get("experiment"), dict) else None,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: malformed run record ({type(exc).__name__}: {exc})") from None


def _is_record_file(path: Path) -> bool:
    return path.is_file() and path.suffix == ".json"


def describe_paths(paths: list[str | Path]) -> str:
    """The report's name for what it read, one entry per path or per folder of record files.

    Each path is named as given, except that three or more record files of one folder (a shell glob such as
    ``records/*envs_per_actor=1*.json`` lists each) become one entry naming the folder, the count and the first and
    last file: the report's first line stays readable, and the files are listed in its per-run tables anyway.
    """
    groups: dict[tuple[bool, Path], list[Path]] = {}
    for raw in paths:
        path = Path(raw)
        is_file = _is_record_file(path)
        groups.setdefault((is_file, path.parent if is_file else path), []).append(path)
    parts: list[str] = []
    for (is_file, folder), members in groups.items():
        if is_file and len(members) >= 3:
            parts.append(
                f"{len(members)} record files in {folder} ({members[0].name} ... {members[-1].name})"
            )
        else:
            parts += [str(m) for m in members]
    return ", ".join(parts) or "-"


def _record_files(paths: list[str | Path]) -> list[Path]:
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if _is_record_file(path):
            files.append(path)
        for folder in (path / RECORDS_DIR, path) if path.is_dir() else ():
            if folder.name == RECORDS_DIR and folder.is_dir():
                files += sorted(folder.glob("*.json"))
    unique: dict[Path, None] = {}
    for f in files:
        unique.setdefault(f.resolve(), None)
    return list(unique)


def load_records(paths: list[str | Path]) -> tuple[list[RunData], list[tuple[Path, str]]]:
    """Runs from the records under ``paths`` (a records directory, an experiment directory holding one, or record
    files), and ``(path, reason)`` for each record left out."""
    runs, skipped = [], []
    for path in _record_files(paths):
        try:
            record = json.loads(path.read_text())
            run = record_to_run(record, path)
        except (OSError, ValueError) as exc:
            skipped.append((path, str(exc)))
            continue
        if not counts(record):
            skipped.append((path, f"exit {run.summary.get('exit')}"))
            continue
        runs.append(run)
    return runs, skipped


def load_runs(paths: list[str | Path]) -> tuple[list[RunData], list[tuple[Path, str]]]:
    """All finished runs under ``paths``, and ``(path, reason)`` for every run left out.

    An experiment directory's curated records (``records/<run>.json``) stand for their runs, so a report needs no
    run directory; a run directory without a record is read directly. A ``records`` directory may also be given
    alone.
    """
    recorded, skipped = load_records(paths)
    runs: list[RunData] = list(recorded)
    have = {(r.path.parent.parent.resolve(), r.name) for r in recorded}
    for path in discover([p for p in paths if not _is_record_file(Path(p))]):  # record files were read above
        if (path.parent.resolve(), path.name) in have:
            continue
        try:
            run = load_run(path, experiment_sweeps(path.parent).get(path.name))
        except ValueError as exc:
            skipped.append((path, str(exc)))
            continue
        exit_reason = run.summary.get("exit")
        if exit_reason in UNFINISHED_EXITS:
            skipped.append((path, f"exit {exit_reason}"))
            continue
        runs.append(run)
    return runs, skipped
