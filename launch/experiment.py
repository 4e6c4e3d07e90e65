"""``actorq experiment``: the same task once per actor precision and seed, one ``actorq train`` at a time.

Order: seeds in turn, and within a seed the precisions rotated by the seed's position (s0: fp32 fp16 int8,
s1: fp16 int8 fp32, s2: int8 fp32 fp16), so no precision always runs first or last and drift of the machine
(thermal state, neighbours' load) hits every precision alike.

Each run is ``python -m actorq.cli train CONFIG [overrides] --precision P --seed S --run-dir OUT/<P>-s<S>
--quiet`` in its own session (console output in ``OUT/logs/<P>-s<S>.log``), owned by its pid: Ctrl-C or SIGTERM
is forwarded to it (the launcher then stops its roles and writes ``summary.json`` with ``exit: interrupted``) and
the experiment stops with status 130.

Resuming: a run is finished when its ``summary.json`` exists with an exit reason other than ``interrupted`` or
``role_failed``; rerunning the same command skips finished runs. An unfinished run directory is moved aside to
``OUT/_incomplete/<name>-<time>`` (kept for its logs, never read by reports) and the run starts from scratch, so
every reported run has one uninterrupted wall clock. ``OUT/experiment.json`` records the plan, the command of
every run, and its outcome.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from actorq.config import PRECISIONS, ConfigError, load_config, replace

log = logging.getLogger(__name__)

UNFINISHED_EXITS = ("interrupted", "role_failed")
STOP_GRACE_S = 90.0
"""How long a forwarded Ctrl-C may take: the launcher stops its roles (~8 s) and writes the summary."""
EXIT_INTERRUPTED = 130


@dataclass(frozen=True)
class PlannedRun:
    """One training run of an experiment."""

    precision: str
    seed: int

    @property
    def name(self) -> str:
        return f"{self.precision}-s{self.seed}"


def plan_runs(precisions: list[str], seeds: list[int]) -> list[PlannedRun]:
    """Runs in execution order: seed by seed, precisions rotated by the seed's position (a Latin square)."""
    runs = []
    for i, seed in enumerate(seeds):
        shift = i % len(precisions)
        for precision in precisions[shift:] + precisions[:shift]:
            runs.append(PlannedRun(precision, seed))
    return runs


def run_finished(run_dir: str | Path) -> bool:
    """True when ``run_dir/summary.json`` exists with an exit reason other than interrupted/role_failed."""
    path = Path(run_dir) / "summary.json"
    try:
        summary = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(summary, dict) and summary.get("exit") not in (None, *UNFINISHED_EXITS)


def parse_precisions(text: str) -> list[str]:
    """``"fp32,fp16,int8"`` -> list, validated (ConfigError names the valid ones)."""
    out = [p.strip() for p in text.split(",") if p.strip()]
    bad = [p for p in out if p not in PRECISIONS]
    if not out or bad:
        raise ConfigError(f"--precisions {text!r}: choose from {', '.join(PRECISIONS)} (comma-separated)")
    if len(set(out)) != len(out):
        raise ConfigError(f"--precisions {text!r} names a precision twice")
    return out


def train_command(args: argparse.Namespace, run: PlannedRun, run_dir: Path) -> list[str]:
    """The ``actorq train`` argv of one run."""
    cmd = [sys.executable, "-m", "actorq.cli", "train", str(args.config), *args.overrides]
    cmd += ["--precision", run.precision, "--seed", str(run.seed), "--run-dir", str(run_dir), "--quiet"]
    if args.actors is not None:
        cmd += ["--actors", str(args.actors)]
    if args.max_minutes is not None:
        cmd += ["--max-minutes", str(args.max_minutes)]
    if args.max_actor_steps is not None:
        cmd += ["--max-actor-steps", str(args.max_actor_steps)]
    return cmd


class Experiment:
    """Runs a plan one subprocess at a time; ``run()`` returns the exit status."""

    def __init__(self, args: argparse.Namespace, runs: list[PlannedRun]):
        self.args = args
        self.out = Path(args.out)
        self.runs = runs
        self.child: subprocess.Popen | None = None
        self.interrupted = False
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
            order=[r.name for r in self.runs],
        )
        record.setdefault("runs", {})
        return record

    def _save(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        tmp = self.record_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.record, indent=1))
        tmp.replace(self.record_path)

    def _forward(self, signum: int, _frame: Any) -> None:
        self.interrupted = True
        if self.child is not None and self.child.poll() is None:
            log.warning("forwarding %s to run pid %d", signal.Signals(signum).name, self.child.pid)
            self.child.send_signal(signum)

    def _set_aside(self, run_dir: Path) -> None:
        dest = self.out / "_incomplete" / f"{run_dir.name}-{time.strftime('%Y%m%d-%H%M%S')}"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(run_dir), str(dest))
        log.warning("%s was unfinished: moved to %s; running it again from scratch", run_dir, dest)

    def _run_one(self, index: int, run: PlannedRun) -> int:
        run_dir = self.out / run.name
        if run_dir.exists():
            self._set_aside(run_dir)
        # The run's console output goes beside its directory: `actorq train` wants a new run's directory empty.
        log_path = self.out / "logs" / f"{run.name}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        cmd = train_command(self.args, run, run_dir)
        entry = {"command": cmd, "started_at": time.time(), "order": index}
        self.record["runs"][run.name] = entry
        self._save()
        sys.stdout.write(f"[{index + 1}/{len(self.runs)}] {run.name}: {' '.join(cmd[2:])}\n")
        sys.stdout.flush()
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with log_path.open("ab") as out:
            # Its own session: a terminal Ctrl-C reaches only us, and we forward it to this pid alone.
            self.child = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env
            )
            code = self._wait()
        self.child = None
        entry.update(ended_at=time.time(), returncode=code, finished=run_finished(run_dir))
        try:
            summary = json.loads((run_dir / "summary.json").read_text())
            entry.update(exit=summary.get("exit"), wall_seconds=summary.get("wall_seconds"))
            best = summary.get("best_eval_return")
        except (OSError, ValueError):
            best = None
        self._save()
        sys.stdout.write(
            f"    exit {entry.get('exit')} (status {code}) in {entry['ended_at'] - entry['started_at']:.0f}s; "
            f"best eval return {best}\n"
        )
        sys.stdout.flush()
        return code

    def _wait(self) -> int:
        assert self.child is not None
        while True:
            try:
                return self.child.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                pass
            if self.interrupted:
                try:
                    return self.child.wait(timeout=STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    log.error(
                        "run pid %d did not stop within %.0fs; killing it", self.child.pid, STOP_GRACE_S
                    )
                    self.child.kill()
                    return self.child.wait(timeout=10)

    def run(self) -> int:
        self.out.mkdir(parents=True, exist_ok=True)
        todo = [(i, r) for i, r in enumerate(self.runs) if not run_finished(self.out / r.name)]
        done = len(self.runs) - len(todo)
        if done:
            sys.stdout.write(
                f"{done} of {len(self.runs)} runs already finished in {self.out}: skipping them\n"
            )
        minutes = self.args.max_minutes if self.args.max_minutes is not None else self.args.config_max_minutes
        if todo and minutes:  # + ~1 min per run to start and stop its processes
            hours = len(todo) * (minutes + 1.0) / 60
            sys.stdout.write(
                f"{len(todo)} runs to go: at most ~{hours:.1f} h ({minutes:g} min budget each)\n"
            )
        self._save()
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
        for sig in previous:
            signal.signal(sig, self._forward)
        failed = []
        try:
            for index, run in todo:
                if self.interrupted:
                    break
                code = self._run_one(index, run)
                if self.interrupted:
                    break
                if not run_finished(self.out / run.name):
                    failed.append(run.name)
                    log.error(
                        "run %s did not finish (status %d); see %s", run.name, code, self.out / run.name
                    )
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if self.interrupted:
            sys.stdout.write(f"interrupted: rerun the same command to resume ({self.out})\n")
            return EXIT_INTERRUPTED
        sys.stdout.write(
            f"experiment done: {len(self.runs) - len(failed)}/{len(self.runs)} runs finished in {self.out}; "
            f"report: actorq report {self.out} --out {self.out}/report\n"
        )
        return 1 if failed else 0


def cmd_experiment(args: argparse.Namespace) -> int:
    """Validate everything first (no process starts on bad input), then run the plan."""
    from actorq.envs import validate_task

    args.precisions = parse_precisions(args.precisions)
    if args.seeds < 1:
        raise ConfigError(f"--seeds {args.seeds}: need at least 1")
    if args.actors is not None and args.actors < 1:
        raise ConfigError(f"--actors {args.actors}: need at least 1")
    args.seed_list = list(range(args.first_seed, args.first_seed + args.seeds))
    config = load_config(args.config, args.overrides)
    args.config_max_minutes = config.max_minutes
    for precision in args.precisions:  # every run's config must be valid before the first starts
        validate_task(replace(config, **{"actor.precision": precision}).env)
    runs = plan_runs(args.precisions, args.seed_list)
    if args.dry_run:
        for run in runs:
            sys.stdout.write(" ".join(train_command(args, run, Path(args.out) / run.name)) + "\n")
        return 0
    return Experiment(args, runs).run()


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``experiment`` on the top-level ``actorq`` subparsers; ``func`` runs it."""
    parser = subparsers.add_parser(
        "experiment",
        help="train once per precision and seed, interleaved and resumable",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("config", help="YAML config, e.g. configs/d4pg/dmc_cartpole_balance.yaml")
    parser.add_argument("overrides", nargs="*", help="section.key=value overrides for every run")
    parser.add_argument("--precisions", default="fp32,fp16,int8", help="comma-separated (default: all three)")
    parser.add_argument("--seeds", type=int, default=3, help="number of seeds (default 3)")
    parser.add_argument("--first-seed", type=int, default=0, help="seeds are first..first+N-1 (default 0)")
    parser.add_argument("--actors", type=int, help="actor processes per run (default: the config's)")
    parser.add_argument("--max-minutes", type=float, help="wall-clock budget per run")
    parser.add_argument("--max-actor-steps", type=int, help="env-step budget per run")
    parser.add_argument("--out", required=True, help="experiment directory (one run directory per run)")
    parser.add_argument("--dry-run", action="store_true", help="print the runs' commands in order and exit")
    parser.set_defaults(func=cmd_experiment)
    return parser
