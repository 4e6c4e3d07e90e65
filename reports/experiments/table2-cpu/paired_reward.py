"""Reward of int8 (or fp16) actors' runs against fp32's, seed by seed, over the same learner steps.

For each record folder given, pairs the runs of one sweep cell by seed and prints, per run: learner steps, learner
steps/s, best and final evaluation (final: mean of the last 3), and the mean evaluation over learner steps
(0, UPTO] (every evaluation when ``--upto`` is 0). Then the per-seed differences against fp32 with their mean and
95% bootstrap interval over seeds (:func:`actorq.report.bootstrap.mean_ci`, the report's own). Runs that took
different numbers of learner steps in their wall-clock budget are compared fairly only with ``--upto``; runs that
stopped at ``learner.max_steps`` already share their steps.

    python reports/experiments/table2-cpu/paired_reward.py reports/experiments/table2-cpu/dqn_cartpole/records \\
        --upto 1150
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

from actorq.report.bootstrap import mean_ci
from actorq.report.measure import measure_run
from actorq.report.records import load_records
from actorq.report.runs import RunData
from actorq.report.stats import DEFAULT_WINDOW


def run_numbers(run: RunData, upto: int) -> dict[str, float]:
    """One run's numbers, as the report measures them (:func:`measure_run`: final = mean of the last
    ``DEFAULT_WINDOW`` evaluations), plus the mean evaluation over learner steps (0, upto]."""
    m = measure_run(run, None, DEFAULT_WINDOW, "mean")
    window = run.eval_return[run.eval_learner_steps <= upto] if upto else run.eval_return
    return {
        "learner_steps": float(run.summary["learner_steps"]),
        "steps_per_s": float(m.learner_rate or "nan"),
        "best": float(m.best_raw),
        "final": float(m.final_return),
        "window_mean": float(window.mean()) if window.size else float("nan"),
        "untrained": float("nan") if m.untrained_return is None else m.untrained_return,
    }


def cells(folder: Path, upto: int) -> dict[str, dict[str, dict[int, dict[str, float]]]]:
    """{sweep cell: {precision: {seed: numbers}}} for every finished record in ``folder``."""
    out: dict[str, dict[str, dict[int, dict[str, float]]]] = defaultdict(lambda: defaultdict(dict))
    runs, _ = load_records([folder])
    for run in runs:
        cell = ",".join(f"{k}={v}" for k, v in sorted(run.sweep.items())) or "-"
        out[cell][run.precision][run.seed] = run_numbers(run, upto)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records", type=Path, nargs="+", help="folders of curated run records")
    parser.add_argument(
        "--upto", type=int, default=0, help="learner steps of the window mean (0: every evaluation)"
    )
    args = parser.parse_args()
    keys = ("final", "window_mean", "best")
    for folder in args.records:
        for cell, by_precision in sorted(cells(folder, args.upto).items()):
            print(f"\n## {folder} [{cell}] (window: learner steps <= {args.upto or 'all'})")
            print("precision seed  learner-steps  steps/s  untrained   best  final  window-mean")
            for precision in sorted(by_precision):
                for seed, n in sorted(by_precision[precision].items()):
                    print(
                        f"{precision:9} {seed:4} {n['learner_steps']:14.0f} {n['steps_per_s']:8.2f} "
                        f"{n['untrained']:10.1f} {n['best']:6.1f} {n['final']:6.1f} {n['window_mean']:12.1f}"
                    )
            base = by_precision.get("fp32", {})
            for precision in sorted(set(by_precision) - {"fp32"}):
                seeds = sorted(set(base) & set(by_precision[precision]))
                for key in keys:
                    diffs = [by_precision[precision][s][key] - base[s][key] for s in seeds]
                    means = {
                        p: mean_ci([by_precision[p][s][key] for s in seeds]) for p in ("fp32", precision)
                    }
                    print(
                        f"{key:11} fp32 {means['fp32'].fmt(digits=1)}  {precision} "
                        f"{means[precision].fmt(digits=1)}  {precision}-fp32 per seed "
                        f"{[round(d, 1) for d in diffs]}: {mean_ci(diffs).fmt(digits=1)}, "
                        f"{sum(d < 0 for d in diffs)}/{len(diffs)} below"
                    )


if __name__ == "__main__":
    main()
