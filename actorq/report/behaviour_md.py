"""How differently quantized actors behave, from runs made with ``evaluator.evaluate_quantized``.

Time to threshold assumes that reward per env step does not depend on the actors' precision; where it does, the
cause is the data: quantized actors acting otherwise than the learner's fp32 function would. Such runs record, at
every evaluation, how often the same learner step's weights quantized by the quantizer's rule pick another greedy
action on the states the fp32 episodes visit (:mod:`actorq.roles.agreement`), and the broadcast quantized policy's
own greedy return. This table reduces them per precision: each run's median over its evaluations after the
learner's first update, then the median and range over runs.
"""

from __future__ import annotations

import numpy as np

from actorq.report.analysis import TaskTable
from actorq.report.markdown import fmt, table
from actorq.report.measure import RunMetrics

NOTE = (
    "Agreement: the share of the states visited by the fp32 greedy episodes on which the quantized policy of the "
    "same weights picks the same greedy action (action error, for continuous actions: the largest per-dimension "
    "difference as a share of its range); 1 - agreement is how much extra, unasked-for exploration the quantized "
    "actors add beside their epsilon. Each run's value is its median over the evaluations after the learner's "
    "first update; the table gives the median over runs and their range. The return difference is the broadcast "
    "quantized policy's greedy return minus the fp32 one at the same evaluation (the broadcast can be a "
    "publication behind)."
)


def _run_median(m: RunMetrics, values: np.ndarray | None) -> float | None:
    """The run's median of an evaluation column (aligned with its evaluations) after learning began."""
    if values is None:
        return None
    kept = values[(m.run.eval_learner_steps > 0) & np.isfinite(values)]
    return float(np.median(kept)) if kept.size else None


def _return_gap(m: RunMetrics) -> np.ndarray | None:
    """The broadcast quantized policy's greedy return minus the fp32 one, per evaluation."""
    q = m.run.eval_quantized
    return q["quantized_return"] - m.run.eval_return if "quantized_return" in q else None


def _over_runs(values: list[float | None], digits: int, unit: str = "", scale: float = 1.0) -> str:
    got = [v * scale for v in values if v is not None]
    if not got:
        return ""
    return f"{fmt(float(np.median(got)), digits, unit)} [{fmt(min(got), digits, unit)}, {fmt(max(got), digits, unit)}]"


def behaviour_table(t: TaskTable) -> str:
    """The per-precision table of the task's ``evaluate_quantized`` runs, or "" when it has none."""
    rows = []
    for label in t.labels():
        runs = [m for m in t.runs[label] if m.run.eval_quantized]
        if not runs:
            continue
        rows.append(
            [
                label,
                str(len(runs)),
                _over_runs(
                    [_run_median(m, m.run.eval_quantized.get("quantized_agreement")) for m in runs],
                    1,
                    "%",
                    100.0,
                ),
                _over_runs(
                    [_run_median(m, m.run.eval_quantized.get("quantized_action_error")) for m in runs], 3
                ),
                _over_runs([_run_median(m, _return_gap(m)) for m in runs], 1),
            ]
        )
    if not rows:
        return ""
    header = ["precision", "runs", "greedy agreement", "action error", "quantized - fp32 return"]
    return table(header, rows)
