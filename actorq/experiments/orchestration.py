"""Experiment orchestration: many training runs, one subprocess at a time, resumable.

What ``actorq experiment`` and ``actorq acme-baseline`` share:

* the plan (:func:`plan_runs`): seed by seed, and within a seed the labels (precisions, systems) rotated by the
  seed's position (s0: a b c, s1: b c a, s2: c a b), so no label always runs first or last and drift of the
  machine (thermal state, neighbours' load) hits every label alike; run ``<label>-s<seed>`` goes to
  ``OUT/<label>-s<seed>``;
* what a finished run is (:func:`run_finished`): its ``summary.json`` has an exit reason other than those in
  :data:`actorq.metrics.UNFINISHED_EXITS`; finished runs are skipped when the same command runs again;
* where an unfinished one goes (:func:`set_aside`): ``OUT/_incomplete/<name>-<time>``, kept for its logs, never read
  by reports; the run starts again from scratch, so every reported run has one uninterrupted wall clock;
* how a run is started and stopped (:class:`RunProcess`): in its own session, console output in
  ``OUT/logs/<name>.log``, Ctrl-C/SIGTERM forwarded to its pid alone, SIGKILL after :data:`RUN_STOP_GRACE_S`;
* the ActorQ run itself (:func:`train_command`): ``python -m actorq.launchers.train`` (= ``actorq train``).
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from actorq.config import PRECISIONS, ConfigError
from actorq.launchers.train import RUN_EXIT_DEADLINE_S
from actorq.measure.common import rotated
from actorq.metrics import UNFINISHED_EXITS
from actorq.usage import child_environment

log = logging.getLogger(__name__)

T = TypeVar("T")

RUN_STOP_GRACE_S = 120.0
"""How long a run may take to stop after a forwarded Ctrl-C/SIGTERM before it is killed. An ActorQ run stops its
learner, then actors, quantizer and evaluator, then replay, and writes its summary; the worst case depends on the
placement (:data:`actorq.launchers.supervisor.ROLE_STOP_GRACE_S`): ~24 s local, ~39 s launchpad, ~30 s Ray plus its
cluster's shutdown, and 90 s in-process (threads cannot be killed: 30 s per phase), usually a few seconds.
Acme's Launchpad program (the baseline) takes longer to tear its nodes down. 120 s leaves all of them room, and
is longer than a run's own exit deadline (:data:`~actorq.launchers.train.RUN_EXIT_DEADLINE_S`), so a wedged run
ends itself, with its stacks, before it is killed."""
assert RUN_EXIT_DEADLINE_S < RUN_STOP_GRACE_S
RUN_OVERHEAD_MIN = 1.0
"""Minutes a run takes beyond its wall-clock budget to start and stop its processes (what plans of hours add)."""
INCOMPLETE_DIR = "_incomplete"
LOGS_DIR = "logs"


Sweep = tuple[tuple[str, str], ...]
"""One cell of a sweep: ``((config key, value as given), ...)`` in the order the ``--sweep`` options came."""


@dataclass(frozen=True)
class PlannedRun:
    """One run of a plan: a label (an ActorQ precision, or another system such as ``acme-fp32``), a seed, and the
    sweep cell's config values (none outside a sweep)."""

    label: str
    seed: int
    sweep: Sweep = ()

    @property
    def name(self) -> str:
        """The run's directory name: ``<label>-s<seed>``, or ``<label>-<key>=<value>[-...]-s<seed>`` in a sweep
        (e.g. ``int8-replay.samples_per_insert=8-s0``)."""
        cell = "".join(f"-{key}={value}" for key, value in self.sweep)
        return f"{self.label}{cell}-s{self.seed}"

    @property
    def overrides(self) -> list[str]:
        """The sweep cell as ``key=value`` overrides."""
        return [f"{key}={value}" for key, value in self.sweep]


def plan_runs(
    labels: list[str], seeds: list[int], sweeps: list[Sweep] | None = None, order_seed: int | None = None
) -> list[PlannedRun]:
    """Runs in execution order: seed by seed, every cell (label x sweep values) once per seed, the cells rotated
    by the seed's position, or, with ``order_seed``, shuffled within each seed by
    ``numpy.random.default_rng([order_seed, seed])`` (a preregistered grid's randomised order, fixed by a committed
    seed: the same on every rerun and every machine).

    With at least as many seeds as cells the rotation is a Latin square (each cell at each position once per
    ``len(cells)`` seeds); with fewer seeds the shifts are spread over the whole cycle, so no cell always runs
    early or late. Labels of one sweep cell stay adjacent (fp32 and int8 of the same setting run back to back).
    """
    cells = [(label, sweep) for sweep in (sweeps or [()]) for label in labels]
    runs = []
    for i, seed in enumerate(seeds):
        if order_seed is None:
            order = rotated(cells, i, len(seeds))
        else:
            order = [cells[j] for j in np.random.default_rng([order_seed, seed]).permutation(len(cells))]
        runs += [PlannedRun(label, seed, sweep) for label, sweep in order]
    return runs


def run_finished(run_dir: str | Path) -> bool:
    """True when ``run_dir/summary.json`` exists with an exit reason that is not an unfinished one."""
    try:
        summary = json.loads((Path(run_dir) / "summary.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(summary, dict) and summary.get("exit") not in (None, *UNFINISHED_EXITS)


def set_aside(out: Path, run_dir: Path) -> Path:
    """Move an unfinished ``run_dir`` to ``out/_incomplete/<name>-<time>``; returns where it went."""
    dest = out / INCOMPLETE_DIR / f"{run_dir.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(run_dir), str(dest))
    log.warning("%s was unfinished: moved to %s; running it again from scratch", run_dir, dest)
    return dest


def parse_precisions(text: str) -> list[str]:
    """``"fp32,fp16,int8"`` -> list, validated (ConfigError names the valid ones)."""
    out = [p.strip() for p in text.split(",") if p.strip()]
    bad = [p for p in out if p not in PRECISIONS]
    if not out or bad:
        raise ConfigError(f"--precisions {text!r}: choose from {', '.join(PRECISIONS)} (comma-separated)")
    if len(set(out)) != len(out):
        raise ConfigError(f"--precisions {text!r} names a precision twice")
    return out


def add_plan_arguments(
    parser: argparse.ArgumentParser,
    *,
    precisions: str,
    seeds: int | None,
    seeds_note: str,
    quick_note: str = "",
) -> None:
    """The arguments every orchestration command takes: CONFIG, overrides, precisions, seeds, per-run budgets.

    ``seeds``: the default of ``--seeds`` (None: the command decides, as ``seeds_note`` says); ``quick_note``: what a
    ``--quick`` option of the command sets instead of the config's actors and minutes.
    """
    parser.add_argument("config", help="YAML config, e.g. configs/d4pg/dmc_cartpole_balance.yaml")
    parser.add_argument("overrides", nargs="*", help="section.key=value overrides for every run")
    parser.add_argument(
        "--precisions", default=precisions, help=f"ActorQ precisions, comma-separated (default {precisions})"
    )
    parser.add_argument("--seeds", type=int, default=seeds, help=f"number of seeds (default {seeds_note})")
    parser.add_argument("--first-seed", type=int, default=0, help="seeds are first..first+N-1 (default 0)")
    parser.add_argument(
        "--actors",
        type=int,
        help=f"actor processes per run (default: the config's{quick_note and '; ' + quick_note})",
    )
    parser.add_argument("--max-minutes", type=float, help="wall-clock budget per run (default: the config's)")
    parser.add_argument("--max-actor-steps", type=int, help="env-step budget per run (default: the config's)")


def check_plan_arguments(args: argparse.Namespace) -> list[str]:
    """Validate the plan arguments (ConfigError names the flag); returns the precisions as a list."""
    if args.seeds is not None and args.seeds < 1:
        raise ConfigError(f"--seeds {args.seeds}: need at least 1")
    if args.actors is not None and args.actors < 1:
        raise ConfigError(f"--actors {args.actors}: need at least 1")
    return parse_precisions(args.precisions)


def train_command(args: list[str]) -> list[str]:
    """The command line of one ActorQ run: ``python -m actorq.launchers.train`` with ``args``, the arguments
    :func:`train_args` makes."""
    return [sys.executable, "-m", "actorq.launchers.train", *args]


def train_args(
    config: str | Path,
    overrides: list[str],
    run: PlannedRun,
    run_dir: Path,
    *,
    actors: int | None = None,
    max_minutes: float | None = None,
    max_actor_steps: int | None = None,
) -> list[str]:
    """The ``actorq train`` arguments of one run: ``run.label`` is its precision, ``run.seed`` its seed."""
    args = [str(config), *overrides, *run.overrides]
    args += ["--precision", run.label, "--seed", str(run.seed), "--run-dir", str(run_dir), "--quiet"]
    if actors is not None:
        args += ["--actors", str(actors)]
    if max_minutes is not None:
        args += ["--max-minutes", str(max_minutes)]
    if max_actor_steps is not None:
        args += ["--max-actor-steps", str(max_actor_steps)]
    return args


class RunProcess:
    """Runs one command at a time in its own session; while entered (``with``), Ctrl-C/SIGTERM stop the running
    command (SIGTERM, by pid), and ``interrupted`` tells the caller to plan no further runs (exit
    :attr:`actorq.errors.ExitCode.INTERRUPTED`)."""

    def __init__(self) -> None:
        self.child: subprocess.Popen | None = None
        self.interrupted = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> RunProcess:
        self._previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
        for sig in self._previous:
            signal.signal(sig, self._forward)
        return self

    def __exit__(self, *_exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _forward(self, signum: int, _frame: Any) -> None:
        self.interrupted = True
        if self.child is not None and self.child.poll() is None:
            # SIGTERM whatever we got: a run can miss SIGINT (walker:stand's run, interrupted in its first second,
            # never reacted, was SIGKILLed after the grace time and left its roles running). SIGTERM stops a
            # launcher as SIGINT does once its handler is in, and ends it at once before (no roles started yet).
            log.warning("%s: stopping run pid %d (SIGTERM)", signal.Signals(signum).name, self.child.pid)
            self.child.send_signal(signal.SIGTERM)

    def run(self, cmd: list[str], log_path: Path) -> int:
        """Run ``cmd`` with its output appended to ``log_path``; returns its exit status."""
        log_path.parent.mkdir(parents=True, exist_ok=True)
        env = child_environment()
        try:
            with log_path.open("ab") as out:
                # Its own session: a terminal Ctrl-C reaches only us, and we forward it to this pid alone.
                self.child = subprocess.Popen(
                    cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env
                )
                return self._wait(self.child)
        finally:
            self.child = None

    def _wait(self, child: subprocess.Popen) -> int:
        while True:
            try:
                return child.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                pass
            if self.interrupted:
                try:
                    return child.wait(timeout=RUN_STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    log.error("run pid %d did not stop within %.0fs; killing it", child.pid, RUN_STOP_GRACE_S)
                    child.kill()
                    return child.wait(timeout=10)
