"""``actorq report DIR... --out OUT``: the paper-style markdown report with PNG figures, from run directories.

Also renders benchmark results given with ``--bench FILE.json`` (from ``actorq bench actors|ablation --json``).
With ``--plan PLAN.json`` (from ``actorq plan --json``, repeatable: one per task) the regime model's learner
capacity C, and the actors' supply S_p where the plan timed the run's setting, come from the plan, measured on the
runs' machine (:mod:`actorq.report.plan_input`); a plan of another config or machine is refused.
Writes ``OUT/report.md``, the figures beside it, and ``OUT/report.json`` with the numbers behind the tables.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from pathlib import Path
from typing import Any

from actorq.errors import UsageError
from actorq.report import comparisons_md as cmd
from actorq.report import (
    coverage,
    intervals,
    replication,
    sections,
    stats,
)
from actorq.report import markdown as md
from actorq.report.analysis import PROJECTION_K, TaskTable, build_tables
from actorq.report.paired import AXES
from actorq.report.plan_input import check_plans, load_plan
from actorq.report.records import describe_paths, load_runs
from actorq.report.runs import split_label

log = logging.getLogger(__name__)


def _numbers(tables: list[TaskTable], coverage_sims: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for t in tables:
        labels = {}
        for label in t.labels():
            speed, paired = t.speedup(label)
            labels[label] = {
                "runs": [m.run.name for m in t.runs[label]],
                "time_to_reward_s": t.summary(label, "t_reach", censored=True).__dict__,
                "actor_steps_to_reward": t.summary(label, "steps_reach", censored=True).__dict__,
                "speedup_vs_fp32": speed,
                "paired_speedups": paired,
                "final_return": t.summary(label, "final_return").__dict__,
                "time_to_threshold_ci": t.time_ci(label).as_dict(),
                "speedup_vs_fp32_ci": t.speedup_ci(label).as_dict(),
                "final_return_iqm_ci": intervals.iqm_ci([m.final_return for m in t.runs[label]]).as_dict(),
                "best_return_iqm_ci": intervals.iqm_ci([m.best_smoothed for m in t.runs[label]]).as_dict(),
                "final_return_improvement_vs_fp32_ci": t.improvement_ci(label).as_dict(),
                "best_return_improvement_vs_fp32_ci": t.improvement_ci(label, "best_smoothed").as_dict(),
                "per_run": {
                    m.run.name: {
                        "seed": m.seed,
                        "sweep": m.run.sweep,
                        "time_to_threshold_s": m.t_reach,
                        "final_return": m.final_return,
                        "best_return": m.best_smoothed,
                        "learner_steps_per_s": m.learner_steps_per_s,
                        "env_steps_per_s": m.actor_rate,
                        "cpu_seconds_per_role": m.role_cpu_seconds,
                        "acting_seconds": m.acting_seconds,
                        "learner_blocked_share": m.learner_blocked_share,
                        "actor_blocked_share": m.actor_blocked_share,
                        "regime": m.regime.label if m.regime else None,
                        "regime_model": m.regime.as_dict() if m.regime else None,
                        "outside_share": m.outside_share,
                        "outside_source": m.outside_source,
                        "evaluations_per_version": m.evaluations_per_version,
                        "reach_versions": m.reach_versions,
                    }
                    for m in t.runs[label]
                },
                "regimes": [m.regime.label if m.regime else None for m in t.runs[label]],
                "predicted_speedup": t.predicted_speedup(label),
                **({"capacity_from": t.capacity_from(label)} if t.plans else {}),
                "paired_reward": {axis: _paired_json(t, label, axis) for axis in AXES},
                "projected_s": {
                    ("inf" if math.isinf(k) else str(k)): stats.censored_median(
                        [m.projected(k) for m in t.runs[label]]
                    ).median
                    for k in PROJECTION_K
                },
                "projected_budget_s": {
                    ("inf" if math.isinf(k) else str(k)): stats.censored_median(
                        [m.projected(k, budget=True) for m in t.runs[label]]
                    ).median
                    for k in PROJECTION_K
                },
                "energy_kwh_to_reward": stats.censored_median(
                    [m.energy_kwh(True) for m in t.runs[label]]
                ).median,
            }
        out[t.task] = {
            "best": t.best,
            "best_raw": t.best_raw,
            "threshold": t.threshold,
            "untrained_return": t.untrained(),
            "threshold_degenerate": t.degenerate,
            "best_cells": {p: t.best_cell(p) for p in ("fp32", "fp16", "int8")},
            "comparisons": cmd.as_json(cmd.comparison_table(t, coverage_sims)[1], coverage_sims),
            "labels": labels,
        }
    return out


def _paired_json(t: TaskTable, label: str, axis: str) -> dict[str, object] | None:
    p = t.paired_reward(label, axis) if split_label(label)[0] != "fp32" else None
    if p is None:
        return None
    return {"seeds": p.seeds, "upto": p.upto, "mean_difference": p.difference("mean").as_dict(),
            "final_difference": p.difference("final").as_dict()}  # fmt: skip


def build_report(
    paths: list[str],
    out: str | Path,
    bench: list[str] | None = None,
    k: int = stats.DEFAULT_WINDOW,
    fraction: float = stats.DEFAULT_FRACTION,
    statistic: str = "mean",
    plans: list[str] | None = None,
    coverage_sims: int | None = None,
    preregistered: str | None = None,
) -> Path:
    """Write ``out/report.md`` (+ figures, ``report.json``); returns the markdown path.

    ``coverage_sims``: simulations per true ratio of each comparison's coverage (0: none; None:
    :data:`actorq.report.coverage.EFFECT_SIMS`). ``preregistered``: a preregistered grid file, whose claim the
    report then judges by its frozen criterion (:mod:`actorq.report.replication`).

    ``plans``: ``actorq plan --json`` files whose C (and S_p) the regime model uses for the runs they describe.

    Raises:
        actorq.report.plan_input.PlanError: a plan cannot be read, or its config or machine is not its runs'
            (checked before anything is written).
        actorq.report.analysis.TargetMismatchError: the runs of one task stopped at different targets.
    """
    coverage_sims = coverage.EFFECT_SIMS if coverage_sims is None else coverage_sims
    runs, skipped = load_runs(paths)
    loaded = tuple(load_plan(p) for p in plans or [])
    check_plans(loaded, runs)
    tables = build_tables(runs, k=k, fraction=fraction, statistic=statistic, plans=loaded)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    s = ["# ActorQ reproduction report\n"]
    s.append(
        f"{len(runs)} runs from {describe_paths(paths)}; "
        f"{len(skipped)} left out{': ' if skipped else '.'}"
        + "; ".join(f"{p.name} ({why})" for p, why in skipped)
        + "\n"
    )
    if loaded:
        s.append(
            "The regime model's learner capacity C (and the actors' S_p where timed) from "
            + "; ".join(f"{p.name} ({p.task})" for p in loaded)
            + " for the runs whose cores, precision and envs per actor it timed.\n"
        )
    if runs:
        s += ["## Definitions\n", md.definitions(k, fraction, statistic), ""]
        if any(t.fixed_threshold for t in tables):
            s += [
                "A task whose runs were given a `target_return` takes it as its reward threshold instead, fixed before "
                f"they ran; each run stopped when the mean of {stats.DEFAULT_WINDOW} evaluations after the learner's "
                "first update reached it (its section names the threshold).\n"
            ]
    if preregistered:
        s += replication.section(preregistered, runs)
    for t in tables:
        s += sections.task_section(t, out, coverage_sims, loaded)
    for path in bench or []:
        try:
            s += sections.bench_section(Path(path), out)
        except (OSError, ValueError, KeyError) as exc:
            s.append(f"_Benchmark file {path} could not be read: {exc}_\n")
    if not tables and not bench:
        s.append("_No finished runs found._\n")
    report = out / "report.md"
    report.write_text("\n".join(s) + "\n")
    (out / "report.json").write_text(json.dumps(_numbers(tables, coverage_sims), indent=1, default=str))
    return report


def _main(args: argparse.Namespace) -> int:
    missing = [d for d in args.dirs if not Path(d).exists()]
    if missing:
        raise UsageError(
            f"no such run directory: {', '.join(missing)}; give run directories or directories of runs (an "
            "experiment's --out)"
        )
    if not args.dirs and not args.bench:
        raise UsageError(
            "nothing to report: give run directories (or an experiment's --out) and/or --bench JSON"
        )
    if args.window < 1:
        raise UsageError(f"--window must be >= 1, got {args.window}")
    if not 0 < args.fraction <= 1:
        raise UsageError(f"--fraction must be in (0, 1], got {args.fraction}")
    if args.coverage_sims < 0:
        raise UsageError(f"--coverage-sims must be >= 0, got {args.coverage_sims}")
    out = args.out
    if out is None:
        if len(args.dirs) != 1:
            raise UsageError("give --out: where the report goes (it defaults to DIR/report only for one DIR)")
        out = Path(args.dirs[0]) / "report"
    path = build_report(
        args.dirs, out, args.bench, args.window, args.fraction, args.statistic, args.plan,
        args.coverage_sims, args.preregistered,
    )  # fmt: skip
    sys.stdout.write(f"report: {path}\n")
    return 0


def add_subcommands(subparsers: Any) -> None:
    """Register ``report`` on the top-level ``actorq`` subparsers."""
    parser = subparsers.add_parser(
        "report", help="paper-style markdown report (tables + PNG figures) from run directories"
    )
    parser.add_argument(
        "dirs", nargs="*", help="run directories or directories of runs (an experiment's --out)"
    )
    parser.add_argument(
        "--out", help="output directory (report.md, figures, report.json); default DIR/report for one DIR"
    )
    parser.add_argument(
        "--bench", action="append", default=[], metavar="JSON", help="bench results to include"
    )
    parser.add_argument(
        "--plan",
        action="append",
        default=[],
        metavar="JSON",
        help="`actorq plan --json` file of the runs' config and machine (one per task): the regime model's C and "
        "S_p come from it, so an actor-bound grid gets a predicted speed-up",
    )
    parser.add_argument("--window", type=int, default=stats.DEFAULT_WINDOW, help="evaluations smoothed (k)")
    parser.add_argument(
        "--fraction", type=float, default=stats.DEFAULT_FRACTION, help="of the best fp32 return"
    )
    parser.add_argument("--statistic", choices=("mean", "median"), default="mean", help="smoothing statistic")
    parser.add_argument(
        "--coverage-sims",
        type=int,
        default=coverage.EFFECT_SIMS,
        metavar="N",
        help="simulations per true speed-up (1, 2, 3x) of each comparison's interval coverage at its own censoring "
        f"(default {coverage.EFFECT_SIMS}, ~5 s per comparison; 0: none)",
    )
    parser.add_argument(
        "--preregistered",
        metavar="GRID_FILE",
        help="a preregistered grid file (its `preregistration` block): the report judges its claim by the frozen "
        "criterion, counting only runs whose records name the file's sha256",
    )
    parser.set_defaults(func=_main)
