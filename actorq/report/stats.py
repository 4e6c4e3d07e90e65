"""The report's statistics: pure functions on numbers (no files, no plotting).

Definitions (the report prints them too):

* **Smoothed return**: the trailing mean (or median) of the last ``k`` evaluations; undefined until ``k``
  evaluations exist, so a single lucky evaluation early on cannot count as "reached".
* **Best fp32 return**: the highest smoothed return any fp32 seed reached (the raw maximum is reported beside
  it; it is biased upward by evaluation noise, which is why the threshold does not use it).
* **Threshold** ("95% of the best fp32 return", the paper's Table 2 criterion): ``best - 0.05 * |best|``, i.e.
  ``0.95 * best`` for positive returns and 5% worse than ``best`` for negative ones (MountainCar, Acrobot),
  where ``0.95 * best`` would lie above the best and be unreachable.
* **Time to threshold**: the time (since the run started) of the first evaluation at which the smoothed return
  is at or above the threshold, smoothing only evaluations made after the learner's first update (an untrained
  policy never "reaches" it); None when never reached. Unreached runs are *censored*: they count as slower
  than every reached run. Their median over seeds is the ``ceil(n/2)``-th fastest run (:func:`median_index`), the
  first time by which at least half the runs had reached it: the Kaplan-Meier median when no run was censored
  before it, so the time column and the speed-up read the same median. It exists only when at least half the
  seeds reached the threshold.
* **Untrained return**: the evaluations made before the learner's first update (learner step 0), smoothed as the
  threshold is (best trailing statistic of ``k``; all of them when fewer). When any run's is at or above the
  threshold, the threshold does not measure learning: the report flags it and claims no speed-up from it.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from actorq.target import DEFAULT_WINDOW, first_crossing, smooth, trained_evaluations

__all__ = [
    "DEFAULT_WINDOW",
    "first_crossing",
    "smooth",
    "trained_evaluations",
]  # the run's stopping rule, re-used

DEFAULT_FRACTION = 0.95


# -- curves --------------------------------------------------------------------------------------------------
def reward_threshold(best: float, fraction: float = DEFAULT_FRACTION) -> float:
    """``fraction`` of ``best`` for positive returns; ``(1 - fraction)`` worse than ``best`` for negative ones."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    return float(best - (1.0 - fraction) * abs(best))


def best_smoothed(
    curves: Sequence[Sequence[float]], k: int = DEFAULT_WINDOW, statistic: str = "mean"
) -> float | None:
    """The highest smoothed value over several runs' evaluation returns (None when no run has k evaluations)."""
    best = None
    for values in curves:
        s = smooth(values, k, statistic)
        if np.isfinite(s).any():
            peak = float(np.nanmax(s))
            best = peak if best is None else max(best, peak)
    return best


def time_to_threshold(
    times: Sequence[float],
    values: Sequence[float],
    learner_steps: Sequence[float],
    threshold: float,
    k: int = DEFAULT_WINDOW,
    statistic: str = "mean",
) -> float | None:
    """``times[i]`` of :func:`first_crossing` (``times`` may be seconds, actor steps or anything monotonic)."""
    if len(times) != len(values):
        raise ValueError(f"times ({len(times)}) and values ({len(values)}) differ in length")
    i = first_crossing(values, learner_steps, threshold, k, statistic)
    return None if i is None else float(times[i])


def untrained_return(
    learner_steps: Sequence[float], values: Sequence[float], k: int = DEFAULT_WINDOW, statistic: str = "mean"
) -> float | None:
    """The initial policy's score, smoothed as the threshold is: the best trailing ``statistic`` of ``k``
    evaluations made before the learner's first update (learner step 0); with fewer than ``k`` of them, their
    ``statistic``. None when there are none."""
    steps, returns = np.asarray(learner_steps, np.float64), np.asarray(values, np.float64)
    if steps.shape != returns.shape:
        raise ValueError(f"learner_steps ({steps.size}) and values ({returns.size}) differ in length")
    before = returns[(steps == 0) & np.isfinite(returns)]
    if not before.size:
        return None
    if before.size < k:
        return float(before.mean() if statistic == "mean" else np.median(before))
    return float(np.nanmax(smooth(before, k, statistic)))


def evaluations_per_version(learner_steps: Sequence[float]) -> float | None:
    """Evaluations made after the learner's first update per distinct weight version they evaluated (an
    evaluation's learner step names the version it scored). 1 when each version was evaluated once; above 1 when
    an evaluator re-scored unchanged weights, which makes the mean of ``k`` evaluations a mean over fewer versions.
    None when the learner never updated."""
    steps = np.asarray(learner_steps, np.float64)
    steps = steps[np.isfinite(steps) & (steps > 0)]
    return float(steps.size / np.unique(steps).size) if steps.size else None


def versions_in_window(learner_steps: Sequence[float], index: int, k: int = DEFAULT_WINDOW) -> int:
    """How many distinct weight versions the ``k`` trained evaluations ending at ``index`` (an index of
    :func:`first_crossing`) scored: ``k`` when each was another version, 1 when all ``k`` re-scored one."""
    steps = np.asarray(learner_steps, np.float64)
    trained = np.flatnonzero(steps > 0)
    position = int(np.searchsorted(trained, index))
    if position >= trained.size or trained[position] != index:
        raise ValueError(f"evaluation {index} was made before the learner's first update")
    return int(np.unique(steps[trained[max(0, position - k + 1) : position + 1]]).size)


# -- across seeds -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SeedSummary:
    """A quantity over seeds: median (censoring-aware), min/max of the reached values, counts."""

    median: float | None
    low: float | None
    high: float | None
    n: int
    n_reached: int

    def fmt(self, digits: int = 0, unit: str = "") -> str:
        """``"412 s [380-460] (3/3)"``; ``"not reached (1/3)"`` when the median seed did not reach it."""
        if self.median is None:
            return f"not reached ({self.n_reached}/{self.n})" if self.n else "-"
        spread = f" [{self.low:.{digits}f}-{self.high:.{digits}f}]" if self.n_reached > 1 else ""
        return f"{self.median:.{digits}f}{unit}{spread} ({self.n_reached}/{self.n})"


def median_index(n: int) -> int:
    """Where the median of ``n`` sorted times to threshold sits (0-based): the ``ceil(n/2)``-th, the first time by
    which at least half the runs had reached the threshold.

    This is the Kaplan-Meier median's rule (the first time the share still short of it is at or below one half,
    :func:`actorq.report.intervals.first_at_or_below_half`) for runs none of which was censored before it. The
    mean of the two middle values, NumPy's median for an even ``n``, would make a cell's median time and the
    speed-up computed from it disagree: with 5 of 10 runs reached, Kaplan-Meier's median is the 5th time while
    the mean of the 5th and the unreached 6th is "not reached".
    """
    if n < 1:
        raise ValueError(f"a median needs at least one value, got n={n}")
    return (n - 1) // 2


def censored_median(values: Sequence[float | None]) -> SeedSummary:
    """Median (:func:`median_index`) where None means "not reached" (slower than any reached value).

    The median is None unless at least half of the values were reached. ``low``/``high`` span the reached values.
    """
    n = len(values)
    reached = sorted(float(v) for v in values if v is not None and math.isfinite(v))
    if not n:
        return SeedSummary(None, None, None, 0, 0)
    ordered = reached + [math.inf] * (n - len(reached))
    middle = ordered[median_index(n)]
    median = None if math.isinf(middle) else middle
    low, high = (reached[0], reached[-1]) if reached else (None, None)
    return SeedSummary(median, low, high, n, len(reached))


def plain_median(values: Sequence[float | None]) -> SeedSummary:
    """Median and range over the values that exist (no censoring: e.g. final returns, throughputs)."""
    have = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not have:
        return SeedSummary(None, None, None, len(values), 0)
    return SeedSummary(float(np.median(have)), min(have), max(have), len(values), len(have))


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """``numerator / denominator`` or None when either is missing or the denominator is not positive."""
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return float(numerator) / float(denominator)


def paired_ratios(base: dict[int, float | None], other: dict[int, float | None]) -> list[float]:
    """Per-seed ``base[s] / other[s]`` for seeds where both are reached (e.g. fp32 time / int8 time)."""
    out = []
    for seed in sorted(set(base) & set(other)):
        r = ratio(base[seed], other[seed])
        if r is not None:
            out.append(r)
    return out


def band(curves: Sequence[tuple[Sequence[float], Sequence[float]]], grid: Sequence[float]):
    """Mean, min, max and count of several ``(x, y)`` curves on a common ``grid``.

    Each curve is interpolated linearly inside its own x range and missing (NaN) outside it, so the band never
    extrapolates a run beyond its end.

    Returns:
        ``(mean, low, high, count)`` arrays of ``len(grid)`` (NaN where no curve covers a grid point).
    """
    g = np.asarray(grid, dtype=np.float64)
    rows = []
    for x, y in curves:
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        keep = np.isfinite(x) & np.isfinite(y)
        x, y = x[keep], y[keep]
        row = np.full(g.shape, np.nan)
        if x.size:
            inside = (g >= x[0]) & (g <= x[-1])
            row[inside] = np.interp(g[inside], x, y)
        rows.append(row)
    if not rows:
        nan = np.full(g.shape, np.nan)
        return nan, nan, nan, np.zeros(g.shape, int)
    m = np.vstack(rows)
    count = np.isfinite(m).sum(axis=0)
    with warnings.catch_warnings():  # all-NaN columns (no curve there yet) are expected
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(m, axis=0), np.nanmin(m, axis=0), np.nanmax(m, axis=0), count


# -- projection ----------------------------------------------------------------------------------------------
def projected_time(
    steps_to_reward: float,
    actor_free_rate: float,
    learner_insert_rate: float,
    speedup_k: float,
    startup_s: float = 0.0,
) -> float:
    """Time to reward if the learner were ``speedup_k`` times faster (everything else as measured).

    Model: ``T(k) = startup + N / min(A, k * L)`` with N the actor steps needed to reach the reward, A the
    actors' unthrottled throughput and L the insert rate the measured learner allows (learner steps/s x batch /
    samples-per-insert). Assumes N does not change with the learner's speed (same samples-per-insert, same
    sample efficiency) and that A stays as measured.
    """
    if steps_to_reward < 0 or actor_free_rate <= 0 or learner_insert_rate <= 0 or speedup_k <= 0:
        raise ValueError("steps must be >= 0 and rates and k > 0")
    return float(startup_s + steps_to_reward / min(actor_free_rate, speedup_k * learner_insert_rate))


def first_activity_time(times: Sequence[float], counts: Sequence[float]) -> float | None:
    """When a cumulative counter (e.g. experience inserts) first moved, from periodic samples.

    The midpoint between the last sample at zero and the first above it; when the first sample is already above
    zero, extrapolated back at the rate of the first two samples (never before time 0). None without activity.
    """
    t, c = np.asarray(times, np.float64), np.asarray(counts, np.float64)
    pos = np.flatnonzero(np.isfinite(c) & (c > 0))
    if not pos.size:
        return None
    i = int(pos[0])
    if i > 0:
        return float((t[i - 1] + t[i]) / 2)
    if len(t) > 1 and c[1] > c[0] and t[1] > t[0]:
        rate = (c[1] - c[0]) / (t[1] - t[0])
        return float(max(0.0, t[0] - c[0] / rate))
    return float(max(0.0, t[0]))


def cpu_rate(steps: Sequence[float], cpu_seconds: Sequence[float]) -> float | None:
    """Steps per CPU second of one process, from cumulative samples, over the span after its first sample
    (which carries the start-up's CPU); None without two usable samples or CPU time."""
    s, c = np.asarray(steps, np.float64), np.asarray(cpu_seconds, np.float64)
    keep = np.isfinite(s) & np.isfinite(c)
    s, c = s[keep], c[keep]
    if s.size < 2 or c[-1] - c[0] <= 0 or s[-1] - s[0] <= 0:
        return None
    return float((s[-1] - s[0]) / (c[-1] - c[0]))


def intrinsic_cost_per_step(steps: Sequence[float], seconds: Sequence[float], min_steps: int = 100) -> float:
    """The cheapest per-step cost of a cumulative timer over sampling intervals of >= ``min_steps`` steps.

    Used for the adder: when the rate limiter blocks, adder time includes waiting; its cheapest interval (e.g.
    before the learner starts sampling) is the adder's own cost. 0 when no interval is long enough.
    """
    s, sec = np.asarray(steps, np.float64), np.asarray(seconds, np.float64)
    keep = np.isfinite(s) & np.isfinite(sec)
    s, sec = s[keep], sec[keep]
    best = None
    start = 0
    for j in range(1, len(s)):
        ds = s[j] - s[start]
        if ds >= min_steps:
            cost = max(0.0, (sec[j] - sec[start]) / ds)
            best = cost if best is None else min(best, cost)
            start = j
    return float(best or 0.0)
