"""``actorq experiment``: the same task once per actor precision and seed, one ``actorq train`` at a time.

The plan, what a finished run is, where unfinished ones go and how a run is started and interrupted are
:mod:`actorq.experiments.orchestration`'s (shared with the Acme baseline bench): precisions rotated per seed, runs
``OUT/<P>-s<S>`` started as ``python -m actorq.launchers.train CONFIG [overrides] --precision P --seed S
--run-dir OUT/<P>-s<S> --quiet`` with console output in ``OUT/logs/<P>-s<S>.log``; Ctrl-C or SIGTERM is forwarded
to the run (its launcher stops its roles and writes ``summary.json`` with ``exit: interrupted``) and the experiment
stops with status 130. Rerunning the same command skips finished runs and starts unfinished ones again from
scratch (the old directory moved to ``OUT/_incomplete/``). With ``--interruptions censor`` a run stopped part-way after
it evaluated a trained policy is not run again: its record says it counts, censored at its last evaluation
(:data:`actorq.report.records.CENSORED`): a grid that spans sessions must not keep only the runs short enough to
fit between their ends. ``OUT/experiment.json`` records the plan, the command of every run, and its outcome.

``--sweep KEY=V1,V2`` (repeatable: the product of several keys) crosses the precisions and seeds with config values;
every key and value is validated before the first run (:mod:`actorq.experiments.sweep`). Runs are then named
``<P>-<KEY>=<V>-s<S>`` and get ``KEY=V`` as one more override; all cells of a seed run before the next seed, in an
order rotated per seed. When a run finishes, its curated record ``OUT/records/<run>.json`` is written
(:mod:`actorq.report.records`): ``actorq report OUT`` works from the records even after the run directories are
deleted. A resumed experiment writes any record that is missing for a finished run.

``--records DIR`` keeps the records in DIR instead (e.g. a folder under ``reports/`` that is committed as runs
finish): a run whose record there says it finished counts as done even without its run directory, so a grid of many
hours goes on in a fresh checkout or on another day. Records of another task, or whose sweep cell differs from the
run of that name, are refused before any run starts; so is a finished run (directory or record) whose saved config
differs from the one this command would give it (another budget, override or flag): a grid never mixes runs made
with other settings (these checks, and what counts as done: :mod:`actorq.experiments.finished`). Nor, unless
``--allow-other-machine``, runs of other machines: when a run would run here and the records folder holds finished
runs of another CPU, the experiment is refused before any run starts (:mod:`actorq.experiments.same_machine`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from actorq.config import load_config, replace
from actorq.errors import ExitCode
from actorq.experiments import prereg
from actorq.experiments.finished import (
    INTERRUPTIONS,
    censorable,
    check_finished_configs,
    check_records,
    records_dir_of,
    run_command,
    run_done,
)
from actorq.experiments.orchestration import (
    LOGS_DIR,
    RUN_OVERHEAD_MIN,
    PlannedRun,
    RunProcess,
    add_plan_arguments,
    check_plan_arguments,
    plan_runs,
    run_finished,
    set_aside,
)
from actorq.experiments.same_machine import ALLOW_FLAG, check_same_machine
from actorq.experiments.sweep import plan_sweeps
from actorq.progress import TaskProgress
from actorq.report.disturbance import disturbed, measured_share
from actorq.report.records import CENSORED, RECORDS_DIR, write_record

log = logging.getLogger(__name__)


class Experiment:
    """Runs a plan one subprocess at a time; ``run()`` returns the exit status."""

    def __init__(self, args: argparse.Namespace, runs: list[PlannedRun]):
        self.args = args
        self.out = Path(args.out)
        self.runs = runs
        self.records_dir = records_dir_of(args)
        self.process = RunProcess()
        self._durations: list[float] = []
        self.record_path = self.out / "experiment.json"
        self.record: dict[str, Any] = self._load_record()

    def _load_record(self) -> dict[str, Any]:
        try:
            record = json.loads(self.record_path.read_text())
        except (OSError, ValueError):
            record = {}
        record.update(
            config=str(self.args.config),
            overrides=list(self.args.overrides),
            precisions=self.args.precisions,
            seeds=self.args.seed_list,
            sweeps=list(self.args.sweep),
            interruptions=self.args.interruptions,
            order=[r.name for r in self.runs],
        )
        record.setdefault("runs", {})
        return record

    def _save(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        tmp = self.record_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.record, indent=1))
        tmp.replace(self.record_path)

    def _run_one(self, index: int, run: PlannedRun, left: int) -> int:
        """Run one planned run; ``left``: runs still to go after it (for the estimate of the time left)."""
        run_dir = self.out / run.name
        if run_dir.exists():
            set_aside(self.out, run_dir)
        # A record of this name is of an earlier, superseded attempt: it must not outlive a rerun that fails.
        (self.records_dir / f"{run.name}.json").unlink(missing_ok=True)
        cmd = run_command(self.args, run, run_dir)
        entry = {"command": cmd, "started_at": time.time(), "order": index, "sweep": dict(run.sweep)}
        self.record["runs"][run.name] = entry
        self._save()
        # One line per run: its name when it starts, its outcome appended when it ends (commands: experiment.json).
        self.progress.start(run.name)
        self.progress.note(f"[{index + 1}/{len(self.runs)}] {run.name}: ", end="")
        # The run's console output goes beside its directory: `actorq train` wants a new run's directory empty.
        # The run is in its own session: told our pid, it stops itself if we die without stopping it (kill -9,
        # a lost terminal's SIGHUP). Not part of the recorded command, which stays the same on every rerun.
        own = [*cmd, "--stop-with-parent", str(os.getpid())]
        code = self.process.run(own, self.out / LOGS_DIR / f"{run.name}.log")
        entry.update(ended_at=time.time(), returncode=code, finished=run_finished(run_dir))
        try:
            summary = json.loads((run_dir / "summary.json").read_text())
            entry.update(exit=summary.get("exit"), wall_seconds=summary.get("wall_seconds"))
            best = summary.get("best_eval_return")
            others = measured_share(summary)
        except (OSError, ValueError):
            summary, best, others = {}, None, None
        if entry["finished"]:
            self._write_record(run)
        elif self.args.interruptions == "censor" and censorable(summary, run_dir):
            entry["censored"] = self._write_record(run, CENSORED)
        self._save()
        took = entry["ended_at"] - entry["started_at"]
        self._durations.append(took)
        eta = left * sum(self._durations) / len(self._durations) / 60
        # A run that shared the machine is said so at once: rerunning it now costs less than finding it later.
        shared = (
            f" (DISTURBED: other processes used {others:.0%} of the machine; rerun it)"
            if disturbed(others)
            else ""
        )
        if entry["finished"]:
            how = ""
        elif entry.get("censored"):
            how = " (counts, censored at its last evaluation: it will not run again)"
        else:
            how = f" (unfinished: see {self.out / LOGS_DIR / run.name}.log)"
        self.progress.note(
            f"{entry.get('exit')} (status {code}) in {took:.0f}s, best eval return {best}{shared}{how}; "
            f"{left} to go (~{eta:.0f} min)"
        )
        self.progress.advance()
        return code

    def _experiment(self) -> dict[str, Any]:
        """What each record says made it: this experiment's folder name and, for a preregistered grid, the frozen
        file's path, commit and sha256 (:func:`actorq.experiments.prereg.identity`)."""
        return {"name": self.out.name, **(getattr(self.args, "frozen_identity", None) or {})}

    def _write_record(self, run: PlannedRun, interruption: str | None = None) -> bool:
        """Write the run's curated record (``interruption``: :data:`CENSORED` for a run cut off that counts). A run
        directory it cannot read (no summary, no time zero) or a record it cannot write is logged and the grid goes
        on (the run directory still holds everything, and a rerun of the experiment writes the record of a finished
        run, or runs a cut-off one again); anything else is a bug and stops the grid."""
        try:
            write_record(
                self.out / run.name, self.records_dir, dict(run.sweep), interruption, self._experiment()
            )
        except (OSError, ValueError) as exc:
            log.error(
                "could not write the record of %s (%s); rerun the experiment to write it", run.name, exc
            )
            return False
        return True

    def run(self) -> int:
        self.out.mkdir(parents=True, exist_ok=True)
        todo = [(i, r) for i, r in enumerate(self.runs) if not run_done(self.out, self.records_dir, r.name)]
        for run in self.runs:  # finished before records existed, or the records folder was removed
            if run_finished(self.out / run.name) and not (self.records_dir / f"{run.name}.json").exists():
                self._write_record(run)
        done = len(self.runs) - len(todo)
        if done:
            where = str(self.out) + (
                "" if self.records_dir == self.out / RECORDS_DIR else f" or {self.records_dir}"
            )
            sys.stdout.write(f"{done} of {len(self.runs)} runs already finished in {where}: skipping them\n")
        minutes = self.args.max_minutes if self.args.max_minutes is not None else self.args.config_max_minutes
        if todo and minutes:
            hours = len(todo) * (minutes + RUN_OVERHEAD_MIN) / 60
            sys.stdout.write(
                f"{len(todo)} runs to go: at most ~{hours:.1f} h ({minutes:g} min budget each)\n"
            )
        self._save()
        failed = []
        # A bar on a terminal (the run now going, done/total, time left); off one, the lines above as they come.
        self.progress = TaskProgress(f"{self.out.name} runs", len(self.runs), done=done, log_counts=False)
        with self.process, self.progress:
            for position, (index, run) in enumerate(todo):
                if self.process.interrupted:
                    break
                code = self._run_one(index, run, len(todo) - position - 1)
                if self.process.interrupted:
                    break
                if not run_done(self.out, self.records_dir, run.name):
                    failed.append(run.name)
                    log.error(
                        "run %s did not finish (status %d); see %s", run.name, code, self.out / run.name
                    )
        if self.process.interrupted:
            sys.stdout.write(f"interrupted: rerun the same command to resume ({self.out})\n")
            return ExitCode.INTERRUPTED
        sys.stdout.write(
            f"experiment done: {len(self.runs) - len(failed)}/{len(self.runs)} runs finished in {self.out}; "
            f"report: actorq report {self.records_dir} --out {self.out}/report\n"
        )
        return 1 if failed else 0


def cmd_experiment(args: argparse.Namespace) -> int:
    """Validate everything first (no process starts on bad input), then run the plan."""
    from actorq.envs import check_task
    from actorq.roles.torso import run_torso

    args.precisions = check_plan_arguments(args)
    args.seed_list = list(range(args.first_seed, args.first_seed + args.seeds))
    config = load_config(args.config, args.overrides)
    args.config_max_minutes = config.max_minutes
    for precision in args.precisions:  # every run's config must be valid before the first starts
        spec = check_task(replace(config, **{"actor.precision": precision}))
    run_torso(config, spec)  # network.torso must read the task's observations
    sweeps = plan_sweeps(args.config, args.overrides, args.sweep)
    runs = plan_runs(args.precisions, args.seed_list, sweeps, args.order_seed)
    args.frozen_identity = prereg.identity(args.frozen) if args.frozen else None
    if args.frozen_identity:
        prereg.check_records(records_dir_of(args), args.frozen_identity["grid_sha256"])
    if getattr(args, "records", None):
        check_records(Path(args.records), runs, f"{config.env.suite}:{config.env.task}")
    check_finished_configs(args, runs, records_dir_of(args))
    to_run = sum(not run_done(Path(args.out), records_dir_of(args), r.name) for r in runs)
    check_same_machine(records_dir_of(args), to_run, args.allow_other_machine)
    if args.dry_run:
        for run in runs:
            sys.stdout.write(" ".join(run_command(args, run, Path(args.out) / run.name)) + "\n")
        return 0
    return Experiment(args, runs).run()


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``experiment`` on the top-level ``actorq`` subparsers; ``func`` runs it."""
    parser = subparsers.add_parser(
        "experiment",
        help="train once per precision and seed, interleaved and resumable",
        description=__doc__.split("\n\n")[0],
    )
    add_plan_arguments(parser, precisions="fp32,fp16,int8", seeds=3, seeds_note="3")
    parser.add_argument(
        "--sweep",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="also cross with these values of a config key (repeatable: the product of several keys), "
        "e.g. replay.samples_per_insert=1,8",
    )
    parser.add_argument("--out", required=True, help="experiment directory (one run directory per run)")
    parser.add_argument(
        "--records",
        metavar="DIR",
        help="keep the runs' curated records in DIR (default OUT/records); a run with a finished record there is "
        "skipped even without its run directory, so a grid committed record by record goes on in a fresh checkout",
    )
    parser.add_argument(
        ALLOW_FLAG,
        action="store_true",
        help="run here even though the records folder holds finished runs of another machine (refused otherwise: "
        "time-to-threshold speed-ups compare wall-clock times); the report then lists both machines and says that "
        "its speed-ups mix them",
    )
    parser.add_argument(
        "--interruptions",
        choices=INTERRUPTIONS,
        default=INTERRUPTIONS[0],
        help="a run stopped part-way (Ctrl-C, SIGTERM): rerun = run it again from scratch when the command runs "
        "again (default); censor = count it, censored at its last evaluation (for grids stopped by the clock: "
        "rerunning keeps only runs short enough to fit between stops)",
    )
    parser.add_argument(
        "--order-seed",
        type=int,
        metavar="N",
        help="shuffle the runs within each seed by this seed (default: rotate them per seed)",
    )
    parser.add_argument(
        "--frozen",
        metavar="GRID_FILE",
        help="the preregistered grid file these runs belong to: refused unless it is committed and unchanged; each "
        "record names its commit and sha256, and records of another frozen file are refused (`actorq grid` passes it)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the runs' commands in order and exit")
    parser.set_defaults(func=cmd_experiment)
    return parser
