"""The rule that says a run reached its target return: the monitor stops a run on it, and the report times runs
by the same rule (lab code imports it from here; the runtime never imports the lab).

The smoothed return is the trailing mean (or median) of the last ``k`` evaluations, taken over the evaluations made
after the learner's first update only: a single lucky evaluation, or an untrained policy's, never counts.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

DEFAULT_WINDOW = 3
"""Evaluations in the trailing window (k) of the smoothed return."""


def smooth(values: Sequence[float], k: int = DEFAULT_WINDOW, statistic: str = "mean") -> np.ndarray:
    """Trailing mean/median over the last ``k`` values; NaN for the first ``k - 1`` positions."""
    if k < 1:
        raise ValueError(f"window k must be >= 1, got {k}")
    if statistic not in ("mean", "median"):
        raise ValueError(f"statistic must be 'mean' or 'median', got {statistic!r}")
    x = np.asarray(values, dtype=np.float64)
    out = np.full(x.shape, np.nan)
    if x.size < k:
        return out
    windows = np.lib.stride_tricks.sliding_window_view(x, k)
    out[k - 1 :] = windows.mean(axis=1) if statistic == "mean" else np.median(windows, axis=1)
    return out


def trained_evaluations(learner_steps: Sequence[float], values: Sequence[float]) -> np.ndarray:
    """Indices of the evaluations made after the learner's first update (learner step > 0)."""
    steps, returns = np.asarray(learner_steps, np.float64), np.asarray(values, np.float64)
    if steps.shape != returns.shape:
        raise ValueError(f"learner_steps ({steps.size}) and values ({returns.size}) differ in length")
    return np.flatnonzero(steps > 0)


def first_crossing(
    values: Sequence[float],
    learner_steps: Sequence[float],
    threshold: float,
    k: int = DEFAULT_WINDOW,
    statistic: str = "mean",
) -> int | None:
    """Index of the first evaluation whose smoothed return is >= ``threshold`` (None if never).

    Only evaluations after the learner's first update count, and they are smoothed among themselves: an untrained
    policy's evaluations neither reach the threshold nor lift a trained one's window to it.
    """
    trained = trained_evaluations(learner_steps, values)
    s = smooth(np.asarray(values, np.float64)[trained], k, statistic)
    hits = np.flatnonzero(np.isfinite(s) & (s >= threshold))
    return int(trained[hits[0]]) if hits.size else None
