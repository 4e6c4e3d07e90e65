"""Ratios of censored times to threshold that stay finite, and the log-rank test, beside the Kaplan-Meier medians.

A ratio of Kaplan-Meier medians is unbounded as soon as a resample leaves either median unreached, so with a few
censored runs its interval runs to 0 or infinity and says nothing. Two ratios that stay finite:

* **Restricted mean time to threshold** (RMST) at a horizon ``tau`` (the runs' budget): the area under the
  Kaplan-Meier curve up to ``tau``, i.e. the mean of ``min(T, tau)`` where no run was censored before ``tau``
  (lifelines' :func:`~lifelines.utils.restricted_mean_survival_time`). The ratio ``RMST(base) / RMST(other)``
  always exists; its interval is a percentile bootstrap, paired by seed where the runs are pairs. The bootstrap
  needs one RMST per resample (4,000 of them), which lifelines computes one fit at a time (~7 ms each), so
  :func:`rmst_rows` computes the same Kaplan-Meier area row by row in NumPy (tested against lifelines).
* **Log-normal accelerated failure time** (AFT) time ratio: ``exp(-beta)`` of lifelines'
  :class:`~lifelines.LogNormalAFTFitter` with the compared precision as the one covariate (censored runs enter the
  likelihood as "longer than"), with its Wald 95% interval. It assumes log-normal times with one spread for both
  groups, and it treats the runs as independent (lifelines' AFT fitters take no cluster): where a seed's runs are
  correlated, as a cell's pairs are, that overstates the ratio's variance (a wider, conservative interval).

The **log-rank test** (:func:`lifelines.statistics.logrank_test`) asks whether the two survival curves differ at all
(unpaired: it ignores seeds).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from lifelines import KaplanMeierFitter, LogNormalAFTFitter
from lifelines.statistics import logrank_test
from lifelines.utils import restricted_mean_survival_time

from actorq.report import bootstrap
from actorq.report.bootstrap import LEVEL, MIN_RUNS, RESAMPLES, RNG_SEED, Interval

EQUIVALENCE_MARGIN = 1.25
"""A ratio whose 90% interval lies inside [1/1.25, 1.25] counts as "about as fast" (two one-sided tests at 5%,
TOST); nothing else may be read as equivalence."""


@dataclass(frozen=True)
class Times:
    """One group's runs as survival data: ``durations`` (time to threshold, or the time last seen short of it) and
    ``events`` (reached). ``seeds`` pair groups run by run."""

    durations: np.ndarray
    events: np.ndarray
    seeds: tuple[int, ...] = ()

    @classmethod
    def of(
        cls,
        reach: Sequence[float | None],
        censored_at: Sequence[float | None],
        seeds: Sequence[int] = (),
    ) -> Times:
        """From per-run times to threshold (None: not reached) and censoring times (None: unknown, 0)."""
        events = np.asarray([t is not None and math.isfinite(t) for t in reach])
        durations = np.asarray(
            [
                float(t) if ok else (float(c) if c is not None and math.isfinite(c) else 0.0)
                for t, ok, c in zip(reach, events, censored_at, strict=True)
            ],
            np.float64,
        )
        return cls(durations, events, tuple(int(s) for s in seeds))

    @property
    def n(self) -> int:
        return int(self.durations.size)

    @property
    def censored_share(self) -> float:
        return float(1.0 - self.events.mean()) if self.n else math.nan


def rmst(times: Times, tau: float) -> float:
    """Restricted mean time to threshold up to ``tau`` (lifelines)."""
    kmf = KaplanMeierFitter().fit(times.durations, event_observed=times.events)
    return float(restricted_mean_survival_time(kmf, t=tau))


def rmst_rows(durations: np.ndarray, events: np.ndarray, tau: float) -> np.ndarray:
    """Row-wise RMST up to ``tau`` of a (resamples, n) matrix of durations and event flags: the Kaplan-Meier area,
    the same as :func:`rmst` per row. Ties: events before censorings at the same time, and tied events one after
    the other (the product ``(1 - 1/r)(1 - 1/(r-1))`` is ``1 - 2/r``, Kaplan-Meier's tie rule)."""
    d = np.atleast_2d(np.asarray(durations, np.float64))
    e = np.atleast_2d(np.asarray(events, bool))
    order = np.lexsort((~e, d), axis=1)
    d, e = np.take_along_axis(d, order, 1), np.take_along_axis(e, order, 1)
    n = d.shape[1]
    at_risk = n - np.arange(n)[None, :]
    survival = np.cumprod(np.where(e, 1.0 - 1.0 / at_risk, 1.0), axis=1)
    clipped = np.minimum(d, tau)
    before = np.concatenate([np.ones((d.shape[0], 1)), survival[:, :-1]], axis=1)
    steps = np.diff(np.concatenate([np.zeros((d.shape[0], 1)), clipped], axis=1), axis=1)
    return (before * steps).sum(axis=1) + survival[:, -1] * (tau - clipped[:, -1])


def rmst_ratio_ci(
    base: Times, other: Times, tau: float, paired: bool, level: float = LEVEL
) -> tuple[Interval, Interval]:
    """``RMST(base) / RMST(other)`` up to ``tau`` with its percentile bootstrap interval at ``level`` and at 90%
    (the equivalence test's); resampled by seed when ``paired`` (``base`` and ``other`` in the same seed order).

    Raises:
        ValueError: ``paired`` groups of different sizes.
    """
    if paired and base.n != other.n:
        raise ValueError(
            f"paired RMST ratio needs one run per seed in each group, got {base.n} and {other.n}"
        )
    reached = int(other.events.sum())
    if not base.n or not other.n:
        return Interval(None, None, None, other.n, reached), Interval(None, None, None, other.n, reached)
    value = rmst(base, tau) / rmst(other, tau)
    if min(base.n, other.n) < MIN_RUNS:
        point = Interval(value, None, None, other.n, reached)
        return point, point
    rng = np.random.default_rng(RNG_SEED)
    ib = rng.integers(0, base.n, size=(RESAMPLES, base.n))
    io = ib if paired else rng.integers(0, other.n, size=(RESAMPLES, other.n))
    ratios = rmst_rows(base.durations[ib], base.events[ib], tau) / rmst_rows(
        other.durations[io], other.events[io], tau
    )
    out = []
    for lev in (level, 0.90):
        low, high = bootstrap.percentile_bounds(ratios, lev)
        out.append(Interval(value, low, high, other.n, reached))
    return out[0], out[1]


def selected_rmst_ratio_ci(
    base_cells: Sequence[Times], other_cells: Sequence[Times], tau: float, level: float = LEVEL
) -> tuple[Interval, Interval]:
    """Best against best by RMST up to ``tau``: each precision's cell with the lowest RMST, chosen again inside
    every resample, cells resampled independently (unpaired); the interval at ``level`` and at 90%."""
    n_other = sum(c.n for c in other_cells)
    reached = int(sum(c.events.sum() for c in other_cells))
    if not base_cells or not other_cells or any(not c.n for c in (*base_cells, *other_cells)):
        empty = Interval(None, None, None, n_other, reached)
        return empty, empty
    value = min(rmst(c, tau) for c in base_cells) / min(rmst(c, tau) for c in other_cells)
    if min(c.n for c in (*base_cells, *other_cells)) < MIN_RUNS:
        point = Interval(value, None, None, n_other, reached)
        return point, point
    rng = np.random.default_rng(RNG_SEED)

    def best(cells: Sequence[Times]) -> np.ndarray:
        rows = []
        for c in cells:
            idx = rng.integers(0, c.n, size=(RESAMPLES, c.n))
            rows.append(rmst_rows(c.durations[idx], c.events[idx], tau))
        return np.vstack(rows).min(axis=0)

    ratios = best(base_cells) / best(other_cells)
    out = []
    for lev in (level, 0.90):
        low, high = bootstrap.percentile_bounds(ratios, lev)
        out.append(Interval(value, low, high, n_other, reached))
    return out[0], out[1]


def aft_ratio(base: Times, other: Times, level: float = LEVEL) -> tuple[Interval, float | None]:
    """The log-normal AFT time ratio ``T(base) / T(other)`` (lifelines) with its Wald interval at ``level`` (runs
    taken as independent), and the fit's spread of log times (shared by both groups: what coverage is simulated
    with). The ratio is undefined (None parts) below :data:`MIN_RUNS` runs a group, without a reached run in each
    group, or when the fit fails; the spread is None when there is no fit."""
    reached = int(other.events.sum())
    undefined = Interval(None, None, None, other.n, reached)
    if min(base.n, other.n) < MIN_RUNS or not (base.events.any() and other.events.any()):
        return undefined, None
    frame = pd.DataFrame(
        {
            "T": np.maximum(np.r_[base.durations, other.durations], 1e-6),
            "E": np.r_[base.events, other.events].astype(int),
            "other": np.r_[np.zeros(base.n), np.ones(other.n)],
        }
    )
    fitter = LogNormalAFTFitter(alpha=1.0 - level)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fitter.fit(frame, "T", "E")
    except Exception:  # lifelines raises ConvergenceError and numpy errors on degenerate data: no ratio then
        return undefined, None
    row = fitter.summary.loc[("mu_", "other")]
    lower, upper = (next(c for c in row.index if c.startswith(f"coef {side}")) for side in ("lower", "upper"))
    coef, low, high = float(row["coef"]), float(row[lower]), float(row[upper])
    sigma = math.exp(float(fitter.summary.loc[("sigma_", "Intercept"), "coef"]))
    if not all(math.isfinite(x) for x in (coef, low, high, sigma)):
        return undefined, None
    return Interval(math.exp(-coef), math.exp(-high), math.exp(-low), other.n, reached), sigma


def logrank_p(base: Times, other: Times) -> float | None:
    """The log-rank test's p-value (lifelines) that both groups' times to threshold come from one distribution;
    None without runs or without any reached run."""
    if not base.n or not other.n or not (base.events.any() or other.events.any()):
        return None
    result = logrank_test(base.durations, other.durations, base.events, other.events)
    return float(result.p_value)


def unbounded(interval: Interval) -> bool:
    """Whether an interval says nothing on one side at least: an end at 0 or infinity, or no interval."""
    if interval.low is None or interval.high is None:
        return True
    return interval.low <= 0 or math.isinf(interval.high)


def reading(interval: Interval, equivalence: Interval | None = None) -> str:
    """The words a speed-up interval allows: "faster", "slower", "about as fast" (only where the 90% interval
    ``equivalence`` lies within :data:`EQUIVALENCE_MARGIN`), else "no speed-up shown (compatible with a..b)"."""
    if interval.low is None or interval.high is None:
        return "no interval (too few runs)"
    if interval.low > 1:
        return f"faster ({_x(interval.low)}..{_x(interval.high)})"
    if interval.high < 1:
        return f"slower ({_x(interval.low)}..{_x(interval.high)})"
    if (
        equivalence is not None
        and equivalence.low is not None
        and equivalence.high is not None
        and equivalence.low >= 1 / EQUIVALENCE_MARGIN
        and equivalence.high <= EQUIVALENCE_MARGIN
    ):
        return f"about as fast (90% interval {_x(equivalence.low)}..{_x(equivalence.high)} within 1/{EQUIVALENCE_MARGIN:g}..{EQUIVALENCE_MARGIN:g}x)"
    return f"no speed-up shown (compatible with {_x(interval.low)}..{_x(interval.high)})"


def _x(value: float) -> str:
    return "inf" if math.isinf(value) else f"{value:.2f}x"
