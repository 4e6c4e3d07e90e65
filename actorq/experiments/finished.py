"""Which runs of an experiment are done, and the finished runs and records it refuses to count.

A run is done when its run directory says it finished, or when ``--records`` holds a record of it that counts (a
fresh checkout's committed record, or a run cut off and counted as censored). Before any run starts,
:func:`check_records` refuses records of another task or sweep cell and :func:`check_finished_configs` refuses a
finished run whose saved config is not the one this command would give it: a grid never mixes settings.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import yaml

from actorq.config import ConfigError, flat_keys, to_dict
from actorq.experiments.orchestration import PlannedRun, run_finished, train_args, train_command
from actorq.launchers.train import planned_config
from actorq.metrics import read_metrics
from actorq.report.records import RECORDS_DIR, finished_record, marked_censored
from actorq.report.stats import trained_evaluations


def records_dir_of(args: argparse.Namespace) -> Path:
    """Where the experiment's curated records go: ``--records`` or ``OUT/records``."""
    return Path(args.records) if getattr(args, "records", None) else Path(args.out) / RECORDS_DIR


def run_args(args: argparse.Namespace, run: PlannedRun, run_dir: Path) -> list[str]:
    """The ``actorq train`` arguments of one run of this experiment."""
    budgets = {
        "actors": args.actors,
        "max_minutes": args.max_minutes,
        "max_actor_steps": args.max_actor_steps,
    }
    return train_args(args.config, args.overrides, run, run_dir, **budgets)


INTERRUPTIONS = ("rerun", "censor")
"""What ``--interruptions`` does with a run stopped part-way: run it again from scratch (the first: the default), or
count it censored."""


def counted_record(out: Path, records_dir: Path, name: str) -> dict[str, Any] | None:
    """The record a run is skipped for, when its run directory does not say it finished: any record that counts
    where there is no run directory (a fresh checkout holding only committed records), and only a censored one
    where the directory says the run was cut off (a finished record beside it is stale: the directory wins)."""
    record = finished_record(records_dir, name)
    if record is None or not (out / name).exists():
        return record
    return record if marked_censored(record) else None


def run_done(out: Path, records_dir: Path, name: str) -> bool:
    """Whether a run counts as done: its run directory says it finished, or :func:`counted_record` finds a record
    that counts (a fresh checkout's committed record, or a run cut off and counted as censored)."""
    return run_finished(out / name) or counted_record(out, records_dir, name) is not None


def censorable(summary: dict[str, Any], run_dir: Path) -> bool:
    """Whether a stopped run can count as censored: it was interrupted after an evaluation of a trained policy
    (learner step > 0; the report counts no earlier one towards the threshold). A cut before that selects nothing
    (every run lasts longer), so such a run is simply run again rather than censored at its untrained start."""
    if summary.get("exit") != "interrupted":
        return False
    rows = [
        r for r in read_metrics(run_dir / "evaluator" / "metrics.csv") if r.get("eval_return") is not None
    ]
    steps = [float(r.get("step") or 0) for r in rows]
    return trained_evaluations(steps, [float(r["eval_return"]) for r in rows]).size > 0


def run_command(args: argparse.Namespace, run: PlannedRun, run_dir: Path) -> list[str]:
    """The command line of one run of this experiment (``python -m actorq.launchers.train`` and its arguments)."""
    return train_command(run_args(args, run, run_dir))


def check_records(records_dir: Path, runs: list[PlannedRun], task: str) -> None:
    """Refuse finished records in ``records_dir`` that cannot belong to this plan's runs of the same name.

    Raises:
        ConfigError: A record of another task, or of another sweep cell than the run it would stand for.
    """
    for run in runs:
        record = finished_record(records_dir, run.name)
        if record is None:
            continue
        theirs, sweep = record["summary"].get("task"), dict(record.get("sweep") or {})
        if theirs != task or sweep != dict(run.sweep):
            raise ConfigError(
                f"--records {records_dir}: {run.name}.json is a run of {theirs} with sweep {sweep}, but this "
                f"experiment's run of that name is {task} with sweep {dict(run.sweep)}; point --records at this "
                "experiment's own records folder (or an empty one)"
            )


def _saved_config(run_dir: Path, records_dir: Path, name: str) -> tuple[str, dict[str, Any]] | None:
    """Where the config of a run this experiment would skip as finished is, and that config; None when the run
    will run (again)."""
    if run_finished(run_dir):
        path = run_dir / "config.yaml"
        try:
            return str(path), yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError):
            return str(path), {}
    record = counted_record(run_dir.parent, records_dir, name)
    return None if record is None else (str(records_dir / f"{name}.json"), record.get("config") or {})


def check_finished_configs(args: argparse.Namespace, runs: list[PlannedRun], records_dir: Path) -> None:
    """Refuse to skip a finished run whose saved config is not the one this command would run it with.

    Keys the saved config lacks (a field added to the config since) cannot contradict and are not compared.

    Raises:
        ConfigError: Naming the run, where its config is, and the keys that differ.
    """
    out = Path(args.out)
    for run in runs:
        saved = _saved_config(out / run.name, records_dir, run.name)
        if saved is None:
            continue
        where, theirs = (
            flat_keys(saved[1]),
            flat_keys(to_dict(planned_config(run_args(args, run, out / run.name)))),
        )
        differ = [
            f"{k}: {where[k]!r} there, {theirs[k]!r} now"
            for k in sorted(theirs)
            if k in where and where[k] != theirs[k]
        ]
        if differ:
            raise ConfigError(
                f"finished run {run.name} ({saved[0]}) was made with another config than this command gives it "
                f"({'; '.join(differ[:5])}{'; ...' if len(differ) > 5 else ''}): rerun with the settings it was "
                "made with, or give this experiment its own --out (and --records)"
            )
