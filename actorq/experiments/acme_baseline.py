"""``actorq acme-baseline``: Acme 0.4's own distributed D4PG beside ActorQ at fp32 and int8, time to reward.

The baseline is ``acme.agents.tf.d4pg.DistributedD4PG`` under launchpad LOCAL_MULTI_PROCESSING (fp32 TensorFlow
actors pulling variables from the learner over courier every 1000 actor steps) with this config's networks
(policy_layers, critic_layers, atoms), replay (min/max size, samples per insert, n-step, discount), batch,
learning rates and actor count, on the same machine (:mod:`actorq.experiments.acme_program`). Differences kept on
purpose, because they are Acme's: one exploration sigma for all actors (the mean of ActorQ's per-actor sigmas)
and Acme's variable-client update period. Checkpointing is off in both systems for this comparison.

Per seed, the runs go in a rotating order (acme-fp32, fp32, int8, then shifted) into ``--out`` as
``<label>-s<seed>``, planned, started, interrupted and resumed exactly as ``actorq experiment``'s
(:mod:`actorq.experiments.orchestration`: finished runs are skipped, unfinished ones moved to ``OUT/_incomplete`` and
run again, console output in ``OUT/logs``); the ActorQ runs are ``actorq train`` with the same config.
At the end the time-to-reward table (threshold: 95% of the best ActorQ fp32 return) is printed with speedups
against Acme, and ``actorq report`` is written to ``OUT/report``. ``--quick``: 256-wide networks, one seed, one
actor, 3 minutes per run (a smoke-sized comparison, ~12 minutes here).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from actorq.config import ConfigError, load_config, replace, save_config
from actorq.errors import ExitCode
from actorq.experiments import orchestration
from actorq.experiments.acme_program import LABEL

QUICK_OVERRIDES = [
    "network.policy_layers=[256,256]",
    "d4pg.critic_layers=[256,256]",
    "evaluator.period_s=10",
]


def comparison_table(out: Path) -> str:
    """Time to reward per label with speedups against Acme and against ActorQ fp32 (from the run directories)."""
    from actorq.report.analysis import build_tables
    from actorq.report.records import load_runs

    runs, _ = load_runs([out])
    lines = []
    for t in build_tables(runs):
        lines.append(f"{t.task}: threshold {t.threshold if t.threshold is None else round(t.threshold, 1)}")
        lines.append(f"  {'label':<10} {'time to reward (s)':<28} {'vs acme-fp32':>12} {'vs fp32':>8}")
        for label in t.labels():
            vs_acme, _ = t.speedup(label, base=LABEL)
            vs_fp32, _ = t.speedup(label, base="fp32")
            fmt = lambda v: "-" if v is None else f"{v:.2f}x"  # noqa: E731
            time_s = t.summary(label, "t_reach", censored=True).fmt(0)
            lines.append(f"  {label:<10} {time_s:<28} {fmt(vs_acme):>12} {fmt(vs_fp32):>8}")
    return "\n".join(lines) or "no finished runs"


def _main(args: argparse.Namespace) -> int:
    overrides = list(args.overrides) + (QUICK_OVERRIDES if args.quick else [])
    config = load_config(args.config, overrides)
    if config.algorithm != "d4pg":
        raise ConfigError("acme-baseline compares Acme's DistributedD4PG: use a d4pg config")
    precisions = orchestration.check_plan_arguments(args)
    changes: dict[str, Any] = {"learner.checkpoint_period_s": 0.0}
    actors = args.actors if args.actors is not None else (1 if args.quick else None)
    minutes = args.max_minutes if args.max_minutes is not None else (3.0 if args.quick else None)
    seeds = 1 if args.quick and args.seeds is None else (args.seeds or 3)
    if actors is not None:
        changes["actor.num_actors"] = actors
    if minutes is not None:
        changes["max_minutes"] = minutes
    if args.max_actor_steps is not None:
        changes["max_actor_steps"] = args.max_actor_steps
    config = replace(config, **changes)
    out = Path(args.out)
    (out / "_configs").mkdir(parents=True, exist_ok=True)
    base_cfg = out / "_configs" / "baseline.yaml"
    save_config(config, base_cfg)  # the ActorQ runs get exactly this config (+ precision and seed)
    todo = orchestration.plan_runs(
        [LABEL, *precisions], list(range(args.first_seed, args.first_seed + seeds))
    )
    with orchestration.RunProcess() as process:
        for i, run in enumerate(todo):
            run_dir = out / run.name
            if orchestration.run_finished(run_dir):
                sys.stdout.write(f"[{i + 1}/{len(todo)}] {run.name}: finished earlier, skipped\n")
                continue
            if run_dir.exists():
                orchestration.set_aside(out, run_dir)
            if run.label == LABEL:
                cfg_path = out / "_configs" / f"{run.name}.yaml"
                save_config(replace(config, seed=run.seed), cfg_path)
                cmd = [
                    sys.executable,
                    "-m",
                    "actorq.experiments.acme_program",
                    str(cfg_path),
                    "--run-dir",
                    str(run_dir),
                ]
            else:  # the config already holds actors and budgets: only precision and seed differ
                cmd = orchestration.train_command(orchestration.train_args(base_cfg, [], run, run_dir))
            sys.stdout.write(f"[{i + 1}/{len(todo)}] {run.name} ...\n")
            sys.stdout.flush()
            started = time.time()
            log_path = out / orchestration.LOGS_DIR / f"{run.name}.log"
            code = process.run(cmd, log_path)
            sys.stdout.write(f"    status {code} after {time.time() - started:.0f}s (log: {log_path})\n")
            if process.interrupted:
                sys.stdout.write("interrupted: rerun the same command to resume\n")
                return ExitCode.INTERRUPTED
    sys.stdout.write(comparison_table(out) + "\n")
    from actorq.report.cli import build_report

    sys.stdout.write(f"report: {build_report([str(out)], out / 'report')}\n")
    return 0


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``acme-baseline`` on the top-level ``actorq`` subparsers."""
    parser = subparsers.add_parser(
        "acme-baseline",
        help="Acme's distributed D4PG vs ActorQ fp32/int8: time to the same reward",
        description=__doc__.split("\n\n")[0],
    )
    orchestration.add_plan_arguments(
        parser,
        precisions="fp32,int8",
        seeds=None,
        seeds_note="3; 1 with --quick",
        quick_note="1 with --quick",
    )
    parser.add_argument(
        "--out", default="reports/acme-baseline", help="directory for the runs and the report"
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke-sized: 256-wide nets, 1 seed, 1 actor, 3 min per run"
    )
    parser.set_defaults(func=_main)
    return parser
