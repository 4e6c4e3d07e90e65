"""Reward of one precision against fp32, seed by seed, over the same env steps or the same learner steps.

The regime model predicts a speed-up from env steps/s alone, assuming reward per env step does not depend on the
actors' precision; this is the test of that assumption (and, over learner steps, of whether quantized actors'
experience teaches the learner as much per update). For each seed both labels ran, the two runs are compared up
to the smaller of their last evaluations' step counts, X, so neither is credited with steps the other did not
make:

* **mean over (0, X]**: the mean of each run's evaluations at or before X (the area under its curve, per
  evaluation);
* **final at X**: the mean of each run's last ``k`` evaluations at or before X (the report's final reward, cut at X).

Over ``"run"`` nothing is cut: each run's whole curve (what a wall-clock budget gave it).

The per-seed differences (label - fp32) get their mean with rliable's stratified bootstrap 95% interval
(:func:`actorq.report.intervals.mean_ci`); an interval that holds 0 finds no difference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from actorq.report import bootstrap, intervals
from actorq.report.measure import RunMetrics

AXES = {"actor_steps": "env steps", "learner_steps": "learner steps", "run": "whole runs"}
"""What runs are compared over, and how the report names it: the same env steps, the same learner steps, or each
run whole (no cut: a run that made more steps in its budget is credited with them)."""


@dataclass(frozen=True)
class PairedReward:
    """One label against its base over one axis, seed by seed."""

    axis: str
    seeds: list[int]
    upto: list[float]
    """Per seed: X, the step count both runs reached."""
    base_mean: list[float]
    mean: list[float]
    base_final: list[float]
    final: list[float]

    def difference(self, which: str = "mean") -> bootstrap.Interval:
        """Mean of the per-seed differences (label - base) of ``which`` ("mean" or "final"), with its CI."""
        ours, base = (self.mean, self.base_mean) if which == "mean" else (self.final, self.base_final)
        return intervals.mean_ci([a - b for a, b in zip(ours, base, strict=True)])

    def below(self, which: str = "mean") -> int:
        """Seeds where the label's value is below the base's."""
        ours, base = (self.mean, self.base_mean) if which == "mean" else (self.final, self.base_final)
        return sum(a < b for a, b in zip(ours, base, strict=True))


def _curve(m: RunMetrics, axis: str) -> tuple[np.ndarray, np.ndarray]:
    if axis == "run":  # every evaluation at 0, the limit at infinity: none is cut
        keep = np.isfinite(m.run.eval_return)
        return np.zeros(int(keep.sum())), m.run.eval_return[keep]
    x = m.run.eval_steps if axis == "actor_steps" else m.run.eval_learner_steps
    keep = np.isfinite(x) & np.isfinite(m.run.eval_return)
    return x[keep], m.run.eval_return[keep]


def up_to(x: np.ndarray, y: np.ndarray, limit: float, k: int) -> tuple[float, float] | None:
    """(mean of ``y`` where ``x <= limit``, mean of the last ``k`` of those); None when there are none."""
    inside = y[x <= limit]
    if not inside.size:
        return None
    return float(inside.mean()), float(inside[-k:].mean())


def paired_reward(
    base: list[RunMetrics], runs: list[RunMetrics], axis: str = "actor_steps", k: int = 3
) -> PairedReward | None:
    """``runs`` against ``base`` over ``axis`` for the seeds both ran once; None without such a seed.

    Raises:
        ValueError: an unknown axis.
    """
    if axis not in AXES:
        raise ValueError(f"axis must be one of {sorted(AXES)}, got {axis!r}")
    by_seed = {m.seed: m for m in base}
    if len(by_seed) != len(base):
        return None
    out: dict[str, list] = {key: [] for key in ("seeds", "upto", "base_mean", "mean", "base_final", "final")}
    for m in sorted(runs, key=lambda r: r.seed):
        other = by_seed.get(m.seed)
        if other is None:
            continue
        (xb, yb), (x, y) = _curve(other, axis), _curve(m, axis)
        if not xb.size or not x.size:
            continue
        limit = float(min(xb.max(), x.max())) if axis != "run" else math.inf
        a, b = up_to(x, y, limit, k), up_to(xb, yb, limit, k)
        if a is None or b is None:
            continue
        for key, value in zip(out, (m.seed, limit, b[0], a[0], b[1], a[1]), strict=True):
            out[key].append(value)
    return PairedReward(axis, **out) if out["seeds"] else None
