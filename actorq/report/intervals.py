"""The report's intervals from the field's packages: rliable (Agarwal et al. 2021) and lifelines.

* **IQM** and **mean** of a reward over seeds, with rliable's stratified bootstrap percentile interval
  (:func:`rliable.library.get_interval_estimates` with :func:`rliable.metrics.aggregate_iqm` /
  :func:`rliable.metrics.aggregate_mean`). rliable takes a score matrix (runs x tasks); a cell of the report is one
  task, so the matrix is one column and the stratified bootstrap is the plain bootstrap over runs (seeds).
* **Probability of improvement** P(X > Y) (ties count half: the Mann-Whitney U over ``n_x * n_y``) of one
  precision's runs over fp32's, :func:`rliable.metrics.probability_of_improvement`, with rliable's interval
  (each group resampled independently).
* **Median time to threshold** with censored runs: the Kaplan-Meier estimate (:class:`lifelines.KaplanMeierFitter`),
  read as the first time its survival estimate is at or below 0.5, and the interval where the survival function's
  pointwise 95% band (lifelines' exponential Greenwood band) is. Both are read here, not by lifelines'
  ``median_survival_time_`` / ``median_survival_times``: those compare the float estimate with 0.5 exactly, and
  lifelines computes it as ``exp`` of a sum of logs, which lands one ulp either side of an exact half (5 of 10 runs
  reached) depending on the CPU's ``log``/``exp`` kernels (NumPy's AVX-512 ones or its AVX2 ones): the same runs got
  a median a whole run later on a Zen 4 than on a Zen 3. A run that never reached the threshold is censored at the
  time it was last seen short of it. When fewer than half the runs reach it the median is infinite: "not reached",
  never a number.

Every interval needs :data:`actorq.report.bootstrap.MIN_RUNS` runs (a bootstrap of one or two runs returns their
own values). rliable draws its resamples from NumPy's global generator (its ``random_state`` argument does not
reach the resampling, checked with rliable 1.2.0), so each call seeds it with :data:`RNG_SEED` and restores the
caller's state afterwards: a report is reproducible from the same runs.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
from collections.abc import Callable, Iterator, Sequence

import numpy as np
from lifelines import KaplanMeierFitter
from rliable import library as rly
from rliable import metrics

from actorq.report.bootstrap import LEVEL, MIN_RUNS, Interval

REPS = 2000
"""Bootstrap resamples per rliable interval (rliable's default of 50,000 takes ~30 s per probability of
improvement; 2,000 moves the interval's ends by Monte Carlo error only, well inside their width at 5 seeds)."""
RNG_SEED = 20
"""The seed of NumPy's global generator during each rliable call."""


@contextlib.contextmanager
def _seeded() -> Iterator[None]:
    """NumPy's global generator at :data:`RNG_SEED`, and rliable's per-call INFO line ("Calculating estimates
    for x ...", hundreds per report) held back, both restored afterwards."""
    state, absl = np.random.get_state(), logging.getLogger("absl")
    level = absl.level
    np.random.seed(RNG_SEED)
    absl.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        np.random.set_state(state)
        absl.setLevel(level)


def _finite(values: Sequence[float | None]) -> np.ndarray:
    return np.asarray([float(v) for v in values if v is not None and math.isfinite(v)], np.float64)


@functools.lru_cache(maxsize=4096)
def _cached(
    columns: tuple[tuple[float, ...], ...], func: Callable[..., object]
) -> tuple[float, float, float]:
    """:func:`_rliable` of runs x 1 score columns, remembered: the report asks for some figures twice (markdown
    and JSON), and a probability of improvement's interval takes about a second."""
    scores = [np.asarray(c, np.float64)[:, None] for c in columns]
    return _rliable(scores[0] if len(scores) == 1 else scores, func)


def _rliable(
    scores: np.ndarray | list[np.ndarray], func: Callable[..., object]
) -> tuple[float, float, float]:
    """(point, low, high) of ``func`` by rliable's stratified percentile bootstrap at :data:`LEVEL`."""
    with _seeded():
        point, interval = rly.get_interval_estimates(
            {"x": scores}, func, method="percentile", reps=REPS, confidence_interval_size=LEVEL
        )
    ends = np.asarray(interval["x"], np.float64).reshape(2)
    return float(np.asarray(point["x"]).reshape(-1)[0]), float(ends[0]), float(ends[1])


def _aggregate(values: Sequence[float | None], aggregate: Callable[[np.ndarray], float]) -> Interval:
    x = _finite(values)
    if not x.size:
        return Interval(None, None, None, len(values), 0)
    scores = x[:, None]  # runs x 1 task
    if x.size < MIN_RUNS:
        return Interval(float(aggregate(scores)), None, None, len(values), int(x.size))
    point, low, high = _cached((tuple(x),), _ONE_TASK[aggregate])
    return Interval(point, low, high, len(values), int(x.size))


def _iqm(scores: np.ndarray) -> np.ndarray:
    return np.array([metrics.aggregate_iqm(scores)])


def _mean(scores: np.ndarray) -> np.ndarray:
    return np.array([metrics.aggregate_mean(scores)])


_ONE_TASK = {metrics.aggregate_iqm: _iqm, metrics.aggregate_mean: _mean}
"""rliable wants ``func`` to return a 1-D array; one function object per aggregate keeps the cache's keys
stable."""


def iqm_ci(values: Sequence[float | None]) -> Interval:
    """Interquartile mean (rliable: scipy's 25% trimmed mean) of the values that exist, with rliable's interval."""
    return _aggregate(values, metrics.aggregate_iqm)


def mean_ci(values: Sequence[float | None]) -> Interval:
    """Mean of the values that exist, with rliable's interval."""
    return _aggregate(values, metrics.aggregate_mean)


def improvement_ci(scores: Sequence[float | None], base: Sequence[float | None]) -> Interval:
    """P(a run of ``scores`` beats a run of ``base``) with rliable's interval (groups resampled independently);
    ``n`` counts ``scores``' runs."""
    x, y = _finite(scores), _finite(base)
    if not x.size or not y.size:
        return Interval(None, None, None, len(scores), int(x.size))
    point = float(metrics.probability_of_improvement(x[:, None], y[:, None]))
    if min(x.size, y.size) < MIN_RUNS:
        return Interval(point, None, None, len(scores), int(x.size))
    _, low, high = _cached((tuple(x), tuple(y)), metrics.probability_of_improvement)
    return Interval(point, low, high, len(scores), int(x.size))


def km_median(times: Sequence[float | None], censored_at: Sequence[float | None] | None = None) -> Interval:
    """Kaplan-Meier median time to threshold with lifelines' interval.

    Args:
        times: per run, its time to threshold (None: never reached).
        censored_at: per run, when it was last seen short of the threshold (used where it never reached it;
            None or missing: 0, a run that adds nothing past its start).

    Returns:
        The median (``math.inf``: fewer than half reached it) and its interval (``high`` infinite: the band never
        falls below 0.5), ``n`` runs of which ``n_reached`` reached it. No interval below :data:`MIN_RUNS` runs.

    Raises:
        ValueError: censoring times that don't match the runs.
    """
    n = len(times)
    if censored_at is not None and len(censored_at) != n:
        raise ValueError(f"{len(censored_at)} censoring times for {n} runs")
    if not n:
        return Interval(None, None, None, 0, 0)
    reached = np.asarray([t is not None and math.isfinite(t) for t in times])
    floor = [0.0 if censored_at is None or c is None or not math.isfinite(c) else float(c) for c in
             (censored_at if censored_at is not None else [None] * n)]  # fmt: skip
    durations = [float(t) if ok else f for t, ok, f in zip(times, reached, floor, strict=True)]
    kmf = KaplanMeierFitter(alpha=1.0 - LEVEL).fit(durations, event_observed=reached)
    median = first_at_or_below_half(kmf.survival_function_.index, kmf.survival_function_.iloc[:, 0])
    if n < MIN_RUNS:
        return Interval(median, None, None, n, int(reached.sum()))
    band = kmf.confidence_interval_  # lifelines' columns: the lower band, then the upper one
    low, high = (first_at_or_below_half(band.index, band.iloc[:, i]) for i in range(2))
    return Interval(median, low, high, n, int(reached.sum()))


HALF_TOLERANCE = 1e-9
"""How far above 0.5 a survival estimate may be and still count as at 0.5: far above the one-ulp error of
lifelines' ``exp(sum(log))`` (~1e-16), far below any step a Kaplan-Meier curve of fewer than 10^8 runs takes."""


def first_at_or_below_half(times: Sequence[float], survival: Sequence[float]) -> float:
    """The first of ``times`` whose ``survival`` is at or below 0.5 (within :data:`HALF_TOLERANCE`, so the answer
    does not depend on the CPU's rounding); ``math.inf`` when it never is."""
    hit = np.flatnonzero(np.asarray(survival, np.float64) <= 0.5 + HALF_TOLERANCE)
    return float(np.asarray(times, np.float64)[hit[0]]) if hit.size else math.inf
