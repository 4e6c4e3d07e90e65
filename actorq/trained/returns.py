"""Episode returns summarised as RL papers report them: mean and interquartile mean, each with a bootstrap
interval that names its method.

The IQM (the mean of the middle 50% of episodes, ``scipy.stats.trim_mean(x, 0.25)``) is the statistic rliable
recommends over the mean for few, skewed runs. Its interval is scipy's bias-corrected and accelerated (BCa)
bootstrap over episodes; with returns that are all equal (a solved CartPole) there is nothing to resample and the
interval is that value.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
RESAMPLES = 10_000
METHOD = "BCa"


@dataclass(frozen=True)
class Interval:
    """A statistic of the returns and its bootstrap confidence interval."""

    value: float
    low: float
    high: float


@dataclass(frozen=True)
class ReturnSummary:
    """Mean and IQM of the episodes' returns with their intervals, and how the intervals were made."""

    episodes: int
    mean: Interval
    iqm: Interval
    std: float
    method: str
    """How the intervals were made, in words (printed beside them)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def iqm(values: np.ndarray, axis: int = -1) -> np.ndarray:
    """Interquartile mean along ``axis`` (25% trimmed from each end)."""
    return stats.trim_mean(values, 0.25, axis=axis)


def _interval(returns: np.ndarray, statistic, seed: int) -> Interval:
    value = float(statistic(returns))
    if len(returns) < 2 or np.ptp(returns) == 0:
        return Interval(value, value, value)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy warns when a few resamples are degenerate
        result = stats.bootstrap(
            (returns,),
            statistic,
            confidence_level=CONFIDENCE,
            n_resamples=RESAMPLES,
            method=METHOD,
            random_state=np.random.default_rng(seed),
        )
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    if not (np.isfinite(low) and np.isfinite(high)):  # BCa undefined (e.g. every resample's IQM equal)
        low, high = value, value
    return Interval(value, low, high)


def summarise(returns: list[float] | np.ndarray, seed: int = 0) -> ReturnSummary:
    """Mean and IQM of ``returns`` with 95% BCa bootstrap intervals over the episodes (``seed``: resampling)."""
    x = np.asarray(returns, np.float64).reshape(-1)
    if x.size == 0:
        raise ValueError("no episode returns to summarise")
    method = f"{CONFIDENCE:.0%} {METHOD} bootstrap over {x.size} episodes ({RESAMPLES:,} resamples, scipy)"
    return ReturnSummary(
        episodes=int(x.size),
        mean=_interval(x, lambda a, axis=-1: np.mean(a, axis=axis), seed),
        iqm=_interval(x, iqm, seed),
        std=float(np.std(x, ddof=1)) if x.size > 1 else 0.0,
        method=method,
    )
