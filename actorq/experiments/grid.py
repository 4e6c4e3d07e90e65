"""``actorq grid FILE``: a committed grid of ``actorq experiment`` runs, defined in one YAML file, resumable.

A grid file (e.g. ``configs/experiments/table2-actorbound.yaml``) names its precisions, seeds and experiments;
each experiment is one ``actorq experiment`` (a config, overrides, one ``--sweep`` cell or more, actors and a
wall-clock budget per run) whose output goes to ``OUT/<experiment>`` and whose curated records go to
``RECORDS/<task>/records`` (one folder per task, shared by the task's experiments: the report reads the task's
cells together). A grid file's ``subsets`` name smaller grids (fewer experiments, precisions or seeds, another
budget) that run into ``OUT/<subset>/`` and ``RECORDS/<subset>/``, apart from the full grid's runs.

Everything is validated before the first run starts: the file, every experiment's config, overrides and sweep,
and the file's ``expected_hours``, which must be what its cells and budgets add up to (so the hours written in
the file stay true when a budget changes). Runs go one at a time, experiment by experiment in the file's order;
each run's record is written as it finishes, and rerunning the same command skips every finished run
(:mod:`actorq.experiments.experiment`; a file's ``interruptions: censor`` also counts a run stopped part-way, censored,
instead of running it again): a grid of many hours goes on after a crash, an interrupt or in a fresh
checkout holding only the committed records, on the machine that made them: a task whose records are of another
CPU is refused before the first run unless ``--allow-other-machine`` (:mod:`actorq.experiments.same_machine`).
A file with a ``preregistration`` block is run whole, as committed, its runs shuffled within each seed by its frozen
order seed and each record naming the file's commit and sha256 (:mod:`actorq.experiments.prereg`).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from actorq.config import ConfigError
from actorq.errors import ExitCode
from actorq.experiments import experiment, prereg
from actorq.experiments.orchestration import RUN_OVERHEAD_MIN, parse_precisions
from actorq.experiments.same_machine import ALLOW_FLAG
from actorq.report import preregistration
from actorq.report.preregistration import Preregistration

HOURS_TOLERANCE = 0.05
"""How far a grid file's ``expected_hours`` may be from what its cells and budgets add up to (a share)."""


@dataclass(frozen=True)
class GridExperiment:
    """One ``actorq experiment`` of a grid."""

    name: str
    """Its output folder under the grid's OUT (``dqn_cartpole_env1``)."""
    task: str
    """The records folder it shares with the task's other experiments (``dqn_cartpole``)."""
    config: str
    """The YAML config, relative to the repository root (``configs/dqn/gym_cartpole.yaml``)."""
    overrides: tuple[str, ...]
    """``section.key=value`` overrides of every run (affinity, samples per insert...)."""
    sweep: tuple[str, ...]
    """``KEY=V1,V2`` sweeps (each a ``--sweep``); a single value still names the cell in every run's name."""
    actors: int
    """Actor processes per run."""
    max_minutes: float
    """Wall-clock budget of each run (every run lasts it: step budgets are lifted)."""

    def cells(self) -> int:
        """Sweep cells: the product of the sweeps' value counts."""
        count = 1
        for text in self.sweep:
            count *= len([v for v in text.partition("=")[2].split(",") if v.strip()])
        return count


@dataclass(frozen=True)
class Grid:
    """A grid file: precisions x seeds x every experiment's sweep cells, one run each."""

    name: str
    """The grid's name (the file's ``name``, or ``<name>-<subset>`` for a subset)."""
    precisions: tuple[str, ...]
    """Actor precisions of every experiment."""
    seeds: int
    """Seeds 0..seeds-1 of every cell; a seed's runs start from the same network (the learner seeds it)."""
    expected_hours: float
    """The hours the file says the grid takes: runs x (budget + :data:`RUN_OVERHEAD_MIN`), checked on load."""
    experiments: tuple[GridExperiment, ...]
    """The experiments, run in this order."""
    subsets: dict[str, dict[str, Any]]
    """Named smaller grids: ``experiments``, ``precisions``, ``seeds``, ``max_minutes``, ``expected_hours``."""
    interruptions: str = experiment.INTERRUPTIONS[0]
    """What a run stopped part-way becomes (``actorq experiment --interruptions``): ``rerun`` from scratch, or
    ``censor`` (counted, censored at its last evaluation), for grids that span sessions stopped by the clock."""
    preregistration: Preregistration | None = None
    """The frozen design of a preregistered grid (:mod:`actorq.experiments.prereg`); None for other grids."""
    path: str = ""
    """The grid file (what a preregistered grid's runs name as frozen)."""

    def runs(self) -> int:
        """How many runs the grid has."""
        return sum(len(self.precisions) * self.seeds * e.cells() for e in self.experiments)

    def hours(self) -> float:
        """What its runs take: each run's budget plus the minute to start and stop its processes."""
        return sum(
            len(self.precisions) * self.seeds * e.cells() * (e.max_minutes + RUN_OVERHEAD_MIN) / 60
            for e in self.experiments
        )


def _fields(where: str, data: Any, required: set[str], optional: set[str]) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
    missing, unknown = required - set(data), set(data) - required - optional
    if missing or unknown:
        raise ConfigError(
            f"{where}: {'missing ' + ', '.join(sorted(missing)) if missing else ''}"
            f"{'; ' if missing and unknown else ''}{'unknown ' + ', '.join(sorted(unknown)) if unknown else ''}"
            f" (fields: {', '.join(sorted(required | optional))})"
        )
    return data


def _experiment(name: str, data: Any, where: str) -> GridExperiment:
    data = _fields(f"{where}: experiment {name}", data, {"task", "config", "actors", "max_minutes"},
                   {"overrides", "sweep"})  # fmt: skip
    exp = GridExperiment(
        name=name,
        task=str(data["task"]),
        config=str(data["config"]),
        overrides=tuple(str(o) for o in data.get("overrides") or ()),
        sweep=tuple(str(s) for s in data.get("sweep") or ()),
        actors=int(data["actors"]),
        max_minutes=float(data["max_minutes"]),
    )
    if exp.actors < 1 or exp.max_minutes <= 0:
        raise ConfigError(
            f"{where}: experiment {name}: actors >= 1 and max_minutes > 0 (a budget) are needed"
        )
    return exp


def load_grid(path: str | Path, subset: str | None = None) -> Grid:
    """Read a grid file (or one of its subsets), checking its fields and its ``expected_hours``.

    Raises:
        ConfigError: A missing or unknown field, an unknown precision, subset or experiment, or hours that are
            not what the cells and budgets add up to (the message gives the sum).
    """
    where = str(path)
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"grid file {where}: {exc}") from None
    data = _fields(
        where,
        data,
        {"name", "precisions", "seeds", "expected_hours", "experiments"},
        {"subsets", "interruptions", "preregistration"},
    )
    interruptions = str(data.get("interruptions", experiment.INTERRUPTIONS[0]))
    if interruptions not in experiment.INTERRUPTIONS:
        raise ConfigError(
            f"{where}: interruptions {interruptions!r}: choose {' or '.join(experiment.INTERRUPTIONS)}"
        )
    experiments = data["experiments"]
    if not isinstance(experiments, dict) or not experiments:
        raise ConfigError(f"{where}: experiments must map names to experiments")
    subsets = data.get("subsets") or {}
    grid = Grid(
        name=str(data["name"]),
        precisions=tuple(parse_precisions(",".join(data["precisions"]))),
        seeds=int(data["seeds"]),
        expected_hours=float(data["expected_hours"]),
        experiments=tuple(_experiment(n, e, where) for n, e in experiments.items()),
        subsets=dict(subsets),
        interruptions=interruptions,
        path=str(path),
    )
    if "preregistration" in data:
        block = preregistration.parse(data["preregistration"], where)
        if subsets:
            raise ConfigError(f"{where}: a preregistered grid has no subsets (each would change its design)")
        prereg.check_against(
            block, where, grid.precisions, grid.seeds,
            [(e.name, e.overrides, e.max_minutes) for e in grid.experiments],
        )  # fmt: skip
        grid = replace(grid, preregistration=block)
    for name, sub in subsets.items():  # every subset is checked, whichever one runs
        _check_hours(_subset(grid, name, sub, where), f"{where}: subset {name}")
    _check_hours(grid, where)
    return grid if subset is None else _subset(grid, subset, subsets.get(subset), where)


def _subset(grid: Grid, name: str, data: Any, where: str) -> Grid:
    if data is None:
        raise ConfigError(f"{where}: no subset {name!r} (subsets: {', '.join(grid.subsets) or 'none'})")
    data = _fields(f"{where}: subset {name}", data, {"experiments", "expected_hours"},
                   {"precisions", "seeds", "max_minutes"})  # fmt: skip
    minutes = data.get("max_minutes")
    chosen = _named(grid, [str(e) for e in data["experiments"]], f"{where}: subset {name}")
    return Grid(
        name=f"{grid.name}-{name}",
        precisions=tuple(parse_precisions(",".join(data.get("precisions") or grid.precisions))),
        seeds=int(data.get("seeds") or grid.seeds),
        expected_hours=float(data["expected_hours"]),
        experiments=tuple(e if minutes is None else replace(e, max_minutes=float(minutes)) for e in chosen),
        subsets={},
        interruptions=grid.interruptions,
    )


def _named(grid: Grid, names: list[str], where: str) -> list[GridExperiment]:
    """The grid's experiments of these names, in the order given; a name the grid lacks is an error."""
    known = {e.name: e for e in grid.experiments}
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ConfigError(
            f"{where}: no experiment {', '.join(unknown) or '(empty list)'} in grid {grid.name} "
            f"(experiments: {', '.join(known)})"
        )
    return [known[n] for n in names]


def _check_hours(grid: Grid, where: str) -> None:
    hours = grid.hours()
    if abs(grid.expected_hours - hours) > HOURS_TOLERANCE * hours:
        raise ConfigError(
            f"{where}: expected_hours {grid.expected_hours:g}, but its {grid.runs()} runs take {hours:.1f} h "
            f"(budget + {RUN_OVERHEAD_MIN:g} min each): write expected_hours: {hours:.1f}"
        )


def narrowed(grid: Grid, names: str | None = None, budget_scale: float = 1.0) -> Grid:
    """The grid with only the named experiments (file order kept) and every budget times ``budget_scale``.

    A budget is sized in wall-clock minutes on the machine the grid file was written for; on a slower one the
    same minutes buy fewer learner steps, so more fp32 runs end censored. ``budget_scale`` (the ratio of that
    machine's planned fp32 env steps/s to this one's, from ``actorq plan``) keeps the learner steps a budget buys;
    every precision of a cell still gets the same budget, and each run's record keeps the minutes it had.

    Raises:
        ConfigError: An unknown experiment name, or a scale that is not a positive number.
    """
    if not budget_scale > 0:
        raise ConfigError(
            f"--budget-scale {budget_scale:g}: a positive factor is needed (1 keeps the file's budgets)"
        )
    chosen = grid.experiments
    if names is not None:
        wanted = _named(grid, [n.strip() for n in names.split(",") if n.strip()], f"--experiments {names!r}")
        chosen = tuple(e for e in grid.experiments if e in wanted)  # the file's order
    scaled = tuple(replace(e, max_minutes=round(e.max_minutes * budget_scale, 1)) for e in chosen)
    narrow = replace(grid, experiments=scaled)
    return replace(narrow, expected_hours=narrow.hours())


def experiment_argv(grid: Grid, exp: GridExperiment, out: Path, records: Path) -> list[str]:
    """The ``actorq experiment`` arguments of one experiment of the grid."""
    argv = [exp.config, *exp.overrides, "--precisions", ",".join(grid.precisions), "--seeds", str(grid.seeds)]
    argv += ["--actors", str(exp.actors), "--max-minutes", f"{exp.max_minutes:g}", "--max-actor-steps", "0"]
    for sweep in exp.sweep:
        argv += ["--sweep", sweep]
    argv += ["--interruptions", grid.interruptions]
    if grid.preregistration is not None:
        argv += ["--frozen", grid.path, "--order-seed", str(grid.preregistration.order_seed)]
    return [*argv, "--out", str(out / exp.name), "--records", str(records / exp.task / "records")]


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="actorq experiment")
    sub = parser.add_subparsers()
    experiment.add_parser(sub)
    return parser.parse_args(["experiment", *argv])


def cmd_grid(args: argparse.Namespace) -> int:
    """Validate every experiment of the grid (printing nothing), then run them in order; 130 when interrupted."""
    loaded = load_grid(args.grid, args.subset)
    if loaded.preregistration is not None and (args.experiments or args.budget_scale != 1):
        raise ConfigError(
            f"{args.grid} is preregistered: --experiments and --budget-scale would change its frozen design "
            "(run it whole, as committed)"
        )
    grid = narrowed(loaded, args.experiments, args.budget_scale)
    out = Path(args.out) / (args.subset or "")
    records = Path(args.records or args.out) / (args.subset or "")
    allow = [ALLOW_FLAG] if args.allow_other_machine else []
    plans = [(exp, experiment_argv(grid, exp, out, records) + allow) for exp in grid.experiments]
    for exp, argv in plans:
        parsed = _parse([*argv, "--dry-run"])
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                parsed.func(parsed)
        except ConfigError as exc:
            raise ConfigError(f"{args.grid}: experiment {exp.name}: {exc}") from None
    scale = f" (budgets x {args.budget_scale:g})" if args.budget_scale != 1 else ""
    sys.stdout.write(
        f"grid {grid.name}: {len(plans)} experiments, {grid.runs()} runs, ~{grid.hours():.1f} h{scale} "
        f"if none has finished yet; records in {records}/<task>/records\n"
    )
    if args.dry_run:
        for _exp, argv in plans:
            sys.stdout.write("actorq experiment " + " ".join(argv) + "\n")
        return 0
    status = 0
    for exp, argv in plans:
        sys.stdout.write(f"==> {exp.name}\n")
        sys.stdout.flush()
        parsed = _parse(argv)
        code = parsed.func(parsed)
        if code == ExitCode.INTERRUPTED:
            return code
        status = status or code
    tasks = sorted({str(records / e.task / "records") for e in grid.experiments})
    sys.stdout.write(f"grid done; report: actorq report {' '.join(tasks)} --out {records}/report\n")
    return status


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``grid`` on the top-level ``actorq`` subparsers; ``func`` runs it."""
    parser = subparsers.add_parser(
        "grid", help="run a committed grid of experiments (resumable)", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("grid", help="grid file, e.g. configs/experiments/table2-actorbound.yaml")
    parser.add_argument("--subset", help="run this subset of the grid file instead (e.g. subset)")
    parser.add_argument("--out", required=True, help="folder of the experiments' run directories")
    parser.add_argument(
        "--records",
        metavar="DIR",
        help="keep each task's curated records in DIR/<task>/records (default: under --out); a run with a "
        "finished record there is skipped, so a grid committed record by record goes on in a fresh checkout",
    )
    parser.add_argument(
        ALLOW_FLAG,
        action="store_true",
        help="go on although a task's records folder holds finished runs of another machine (refused otherwise; "
        "keep one --records folder per machine, e.g. DIR/<machine slug>); the report then lists both machines and "
        "says that its speed-ups mix them",
    )
    parser.add_argument(
        "--experiments",
        metavar="NAMES",
        help="run only these experiments of the file (comma-separated, run in the file's order), e.g. "
        "dqn_cartpole_env8",
    )
    parser.add_argument(
        "--budget-scale",
        type=float,
        default=1.0,
        metavar="X",
        help="multiply every run's max_minutes by X (default 1): on a machine slower than the one the file's "
        "budgets were sized for, X = that machine's planned fp32 env steps/s / this one's (`actorq plan`), so a "
        "budget buys the same learner steps; keep one --records folder per machine",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="validate, print the experiments' commands, exit"
    )
    parser.set_defaults(func=cmd_grid)
    return parser
