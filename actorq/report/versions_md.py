"""How many weight versions the threshold's evaluations scored, per precision.

A run reaches the threshold on the mean of k consecutive evaluations. When the evaluator scores the newest
weights on a clock and the learner publishes them every so many learner steps, a slow learner's evaluations
re-score one version: its k evaluations can all be one good snapshot, while a faster learner's must span k
versions (learning that stayed good for k publications: a much higher bar where the greedy policy changes from
version to version, as Acrobot's does). Quantized actors make the learner faster where the actors bound it, so the
bar is then easier for fp32 than for int8, and the measured speed-up is biased against the faster actors (found in
the Zen 3's actor-bound Acrobot cell:
``reports/experiments/table2-actorbound/README.md``, "Decision: evaluations per weight version").
``evaluator.each_version_once`` evaluates each published version once; this table shows whether a report's runs
had the same bar.
"""

from __future__ import annotations

import numpy as np

from actorq.report.analysis import TaskTable
from actorq.report.markdown import fmt, table

VERSION_GAP = 1.5
"""A precision whose median evaluations per version is this many times its fp32 cell's (or that fraction of it)
gets the caveat that its threshold was not the same bar."""

NOTE = (
    "Evaluations per version: a run's evaluations after the learner's first update over the distinct weight "
    "versions (learner steps) they scored; 1.00 when each version was evaluated once "
    "(`evaluator.each_version_once`). Reached on: of the runs that reached the threshold, how many distinct "
    "versions the k evaluations whose mean first reached it scored (k: all different versions; 1: one snapshot "
    "scored k times). Where precisions differ, so does the bar: k evaluations of one snapshot test that snapshot, "
    "one evaluation each of k versions tests that learning stayed good for k publications, a higher bar where the "
    "greedy policy changes from version to version."
)


def _per_run(t: TaskTable, label: str) -> list[float]:
    """The label's runs' evaluations per version (runs whose learner updated)."""
    return [m.evaluations_per_version for m in t.runs.get(label, []) if m.evaluations_per_version]


def _median(per: list[float]) -> float | None:
    return float(np.median(per)) if per else None


def _label_median(t: TaskTable, label: str) -> float | None:
    return _median(_per_run(t, label))


def versions_table(t: TaskTable) -> str:
    """Per precision: evaluations per weight version (median and range over runs) and how many versions the
    threshold's window scored in the runs that reached it; "" when no run has evaluations after learning began."""
    k = t.window
    rows = []
    for label in t.labels():
        per = _per_run(t, label)
        if not per:
            continue
        reached = [m.reach_versions for m in t.runs[label] if m.reach_versions is not None]
        counts = ", ".join(f"{v}: {n}" for v in range(k, 0, -1) if (n := reached.count(v)))
        rows.append(
            [
                label,
                str(len(per)),
                f"{fmt(_median(per), 2)} [{fmt(min(per), 2)}, {fmt(max(per), 2)}]",
                f"{counts} ({len(reached)} reached)" if reached else "none reached",
            ]
        )
    if not rows:
        return ""
    return table(
        ["precision", "runs", "evaluations per version", f"reached on (versions: runs; k = {k})"], rows
    )


def versions_caveat(t: TaskTable) -> str:
    """A caveat naming each precision whose median evaluations per version differs from its fp32 cell's by
    :data:`VERSION_GAP` or more; "" when none does."""
    differ = []
    for label in t.labels():
        base = t.base_of(label)
        if label == base or base not in t.runs:
            continue
        mine, theirs = _label_median(t, label), _label_median(t, base)
        if mine and theirs and max(mine / theirs, theirs / mine) >= VERSION_GAP:
            differ.append(f"{label} {mine:.2f} against {base} {theirs:.2f}")
    if not differ:
        return ""
    return (
        "**Caveat: the threshold was not the same bar for every precision.** Median evaluations per weight "
        f"version: {'; '.join(differ)}. The precision with more evaluations per version reached the threshold "
        "on fewer versions (see the table of evaluations per version), so these speed-ups mix the actors' speed "
        "with the evaluator's clock; `evaluator.each_version_once` makes the bar the same."
    )
