"""``actorq bench acme-baseline``: Acme 0.4's own distributed D4PG beside ActorQ at fp32 and int8, time to reward.

The baseline is ``acme.agents.tf.d4pg.DistributedD4PG`` under launchpad LOCAL_MULTI_PROCESSING (fp32 TensorFlow
actors pulling variables from the learner over courier every 1000 actor steps) with this config's networks
(policy_layers, critic_layers, atoms), replay (min/max size, samples per insert, n-step, discount), batch,
learning rates and actor count, on the same machine (:mod:`actorq.bench.acme_program`). Differences kept on
purpose, because they are Acme's: one exploration sigma for all actors (the mean of ActorQ's per-actor sigmas)
and Acme's variable-client update period. Checkpointing is off in both systems for this comparison.

Per seed, the runs go in a rotating order (acme-fp32, fp32, int8, then shifted) into ``--out``: Acme runs as
``acme-fp32-s<seed>``, ActorQ runs through ``actorq experiment`` (same resume rules: finished runs are skipped).
At the end the time-to-reward table (threshold: 95% of the best ActorQ fp32 return) is printed with speedups
against Acme, and ``actorq report`` is written to ``OUT/report``. ``--quick``: 256-wide networks, one seed, one
actor, 3 minutes per run (a smoke-sized comparison, ~12 minutes here).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from actorq.bench.acme_program import LABEL
from actorq.config import PRECISIONS, ConfigError, load_config, replace, save_config

UNFINISHED = ("interrupted", "role_failed")
QUICK_OVERRIDES = [
    "network.policy_layers=[256,256]",
    "network.critic_layers=[256,256]",
    "evaluator.period_s=10",
]


def run_finished(run_dir: Path) -> bool:
    """Same rule as ``actorq experiment``: summary.json with an exit other than interrupted/role_failed."""
    try:
        return json.loads((run_dir / "summary.json").read_text()).get("exit") not in (None, *UNFINISHED)
    except (OSError, ValueError, AttributeError):
        return False


def plan(labels: list[str], seeds: list[int]) -> list[tuple[str, int]]:
    """(label, seed) in run order: per seed, the labels rotated by the seed's position."""
    out = []
    for i, seed in enumerate(seeds):
        shift = i % len(labels)
        out += [(label, seed) for label in labels[shift:] + labels[:shift]]
    return out


class _Runner:
    """Runs one subprocess at a time in its own session, forwarding Ctrl-C/SIGTERM to it by pid."""

    def __init__(self) -> None:
        self.child: subprocess.Popen | None = None
        self.interrupted = False

    def _forward(self, signum: int, _frame: Any) -> None:
        self.interrupted = True
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signum)

    def run(self, cmd: list[str], log_path: Path) -> int:
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
        for sig in previous:
            signal.signal(sig, self._forward)
        try:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            with log_path.open("ab") as out:
                env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="2")
                self.child = subprocess.Popen(
                    cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env
                )
                while True:
                    try:
                        return self.child.wait(timeout=1.0)
                    except subprocess.TimeoutExpired:
                        if self.interrupted:
                            try:
                                return self.child.wait(timeout=90)
                            except subprocess.TimeoutExpired:
                                self.child.kill()
                                return self.child.wait(timeout=10)
        finally:
            self.child = None
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def comparison_table(out: Path) -> str:
    """Time to reward per label with speedups against Acme and against ActorQ fp32 (from the run directories)."""
    from actorq.report.analysis import build_tables
    from actorq.report.runs import load_runs

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
    precisions = [p for p in args.precisions.split(",") if p]
    if not precisions or any(p not in PRECISIONS for p in precisions):
        raise ConfigError(f"--precisions {args.precisions!r}: choose from {', '.join(PRECISIONS)}")
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
    runner = _Runner()
    todo = plan([LABEL, *precisions], list(range(args.first_seed, args.first_seed + seeds)))
    for i, (label, seed) in enumerate(todo):
        run_dir = out / f"{label}-s{seed}"
        if run_finished(run_dir):
            sys.stdout.write(f"[{i + 1}/{len(todo)}] {run_dir.name}: finished earlier, skipped\n")
            continue
        if label == LABEL:
            cfg_path = out / "_configs" / f"{run_dir.name}.yaml"
            save_config(replace(config, seed=seed), cfg_path)
            if run_dir.exists():  # unfinished: set aside, start over (one uninterrupted clock per run)
                run_dir.rename(out / "_configs" / f"{run_dir.name}-incomplete-{time.strftime('%H%M%S')}")
            cmd = [
                sys.executable,
                "-m",
                "actorq.bench.acme_program",
                str(cfg_path),
                "--run-dir",
                str(run_dir),
            ]
        else:
            cmd = [sys.executable, "-m", "actorq.cli", "experiment", str(base_cfg), "--precisions", label]
            cmd += ["--first-seed", str(seed), "--seeds", "1", "--out", str(out)]
        sys.stdout.write(f"[{i + 1}/{len(todo)}] {run_dir.name} ...\n")
        sys.stdout.flush()
        started = time.time()
        code = runner.run(cmd, out / "_logs" / f"{run_dir.name}.log")
        sys.stdout.write(
            f"    status {code} after {time.time() - started:.0f}s (log: {out}/_logs/{run_dir.name}.log)\n"
        )
        if runner.interrupted:
            sys.stdout.write("interrupted: rerun the same command to resume\n")
            return 130
    sys.stdout.write(comparison_table(out) + "\n")
    from actorq.report.cli import build_report

    sys.stdout.write(f"report: {build_report([str(out)], out / 'report')}\n")
    return 0


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``acme-baseline`` on the ``actorq bench`` subparsers."""
    parser = subparsers.add_parser(
        "acme-baseline",
        help="Acme's distributed D4PG vs ActorQ fp32/int8: time to the same reward",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("config", help="a d4pg YAML config, e.g. configs/d4pg/dmc_cartpole_balance.yaml")
    parser.add_argument("overrides", nargs="*", help="section.key=value overrides for every run")
    parser.add_argument(
        "--out", default="reports/acme-baseline", help="directory for the runs and the report"
    )
    parser.add_argument("--precisions", default="fp32,int8", help="ActorQ precisions (default fp32,int8)")
    parser.add_argument("--seeds", type=int, help="seeds per system (default 3; 1 with --quick)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--actors", type=int, help="actors per run (default: the config's; 1 with --quick)")
    parser.add_argument("--max-minutes", type=float, help="per run (default: the config's; 3 with --quick)")
    parser.add_argument("--max-actor-steps", type=int, help="per run (default: the config's)")
    parser.add_argument(
        "--quick", action="store_true", help="smoke-sized: 256-wide nets, 1 seed, 1 actor, 3 min"
    )
    parser.set_defaults(func=_main)
    return parser
