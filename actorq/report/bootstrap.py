"""The speed-up's bootstrap interval (censored times, paired by seed), the interval type, and the rate limiter's
blocked shares. The other intervals come from packages (:mod:`actorq.report.intervals`: rliable, lifelines).

* **Speed-up** ``median(base) / median(other)`` of times to threshold: neither rliable nor lifelines gives an
  interval for a ratio of censored medians, so this one stays hand-written (a percentile bootstrap). When both
  groups ran the same seeds, seeds are resampled as
  pairs (the fp32 and int8 runs of one seed share its environment seeds and, in a grid that goes on across
  sessions, its machine: a 2x slower CPU slows both, and resampling the groups independently would count that as
  noise in the ratio); otherwise the groups are resampled independently. The medians are the censored medians of
  the runs (a run that never reached the threshold counts as slower than every run that did; the
  ``ceil(n/2)``-th fastest, :func:`actorq.report.stats.median_index`, as the Kaplan-Meier median reads it). A run
  that did not reach the threshold took longer than the time it was last seen short of it (its censoring time; 0
  when unknown), so a median involving it bounds the ratio from one side only: the lower end of the ratio takes
  the base's unreached runs at their censoring times and the other's as never, the upper end the reverse. fp32 never
  reaching the threshold in 480 s while int8 takes 400 s is a speed-up of at least 1.2x (``>= 1.20``), not
  infinity. A resample where both medians are unreached bounds nothing, its ratio anywhere from 0 to infinity, and
  it counts so: dropping such resamples would raise the interval's lower end (dropping 3 of 100 claimed a speed-up
  whose lower end 3 of 100 resamples leave at 0). Only when every resample is like that is there no interval
  (None).
* **Relative loss** E% of the means of two groups paired by seed (:func:`relative_loss_ci`): rliable resamples
  each group independently, which would count fp32's seed-to-seed spread as noise in a quantized policy's loss.
* Every interval needs at least :data:`MIN_RUNS` runs (pairs, for a paired speed-up): resampling one or two runs
  gives back their own values, not a 95% interval, and a grid that goes on across sessions reports its first seeds.

Resamples use a fixed seed, so a report is reproducible from the same runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from actorq.report import stats

RESAMPLES = 4000
LEVEL = 0.95
RNG_SEED = 20
MIN_RUNS = 3
"""Fewest runs (with values) behind a bootstrap interval; with fewer the interval is undefined (None), and no
speed-up can be claimed from it."""


@dataclass(frozen=True)
class Interval:
    """A point estimate with a bootstrap interval over ``n`` runs (``n_reached`` of which reached the threshold).

    ``value``/``low``/``high`` may be ``math.inf`` (not reached) and are None when undefined."""

    value: float | None
    low: float | None
    high: float | None
    n: int
    n_reached: int
    bound: str = ""
    """``">="`` / ``"<="`` when censoring makes ``value`` a lower / upper bound of the estimate (speed-ups)."""

    def fmt(self, digits: int = 0, unit: str = "", inf: str = "not reached") -> str:
        """``"412 s [380, 460] (5/5)"``; infinity shows as ``inf`` ("not reached" for times; "inf" for ratios)."""

        def one(x: float | None) -> str:
            if x is None:
                return "-"
            return inf if math.isinf(x) else f"{x:,.{digits}f}{unit}"

        if not self.n:
            return "-"
        ci = f" [{one(self.low)}, {one(self.high)}]" if self.low is not None else " [CI undefined]"
        value = (
            f"{self.bound} {one(self.value)}" if self.bound and self.value is not None else one(self.value)
        )
        return f"{value}{ci} ({self.n_reached}/{self.n})"

    def as_dict(self) -> dict[str, float | int | None]:
        """JSON-ready, with infinity as the string "inf"."""

        def one(x: float | None) -> float | str | None:
            return "inf" if x is not None and math.isinf(x) else x

        return {"value": one(self.value), "low": one(self.low), "high": one(self.high), "n": self.n,
                "n_reached": self.n_reached, "bound": self.bound}  # fmt: skip


def _censored(values: Sequence[float | None]) -> np.ndarray:
    return np.asarray(
        [math.inf if v is None or not math.isfinite(v) else float(v) for v in values], np.float64
    )


def _medians(samples: np.ndarray) -> np.ndarray:
    """Row medians (:func:`actorq.report.stats.median_index`) of a (resamples, n) matrix that may hold +inf."""
    return np.sort(samples, axis=1)[:, stats.median_index(samples.shape[1])]


def percentile_bounds(stat: np.ndarray, level: float) -> tuple[float, float]:
    tail = (1.0 - level) / 2 * 100
    return (
        float(np.percentile(stat, tail, method="lower")),
        float(np.percentile(stat, 100 - tail, method="higher")),
    )


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        out = num / den  # inf/inf -> nan (undefined); finite/inf -> 0; inf/finite -> inf
    return out


def _at_censoring(x: np.ndarray, censored_at: Sequence[float | None] | None) -> np.ndarray:
    """``x`` with each unreached run at its censoring time (a lower bound of its time; 0 when unknown)."""
    floor = (
        np.zeros(x.size)
        if censored_at is None
        else np.asarray(
            [float(c) if c is not None and math.isfinite(c) else 0.0 for c in censored_at], np.float64
        )
    )
    if floor.size != x.size:
        raise ValueError(f"{floor.size} censoring times for {x.size} runs")
    return np.where(np.isinf(x), floor, x)


def _point(low: float, high: float) -> tuple[float | None, str]:
    """The estimate from its two ends: one value, a one-sided bound, or undefined (None)."""
    if math.isnan(low) or math.isnan(high) or (low == 0 and math.isinf(high)):
        return None, ""
    if low == high:
        return low, ""
    return (low, ">=") if math.isinf(high) else (high, "<=") if low == 0 else (low, ">=")


def speedup_ci(
    base: Sequence[float | None],
    other: Sequence[float | None],
    level: float = LEVEL,
    paired: bool = False,
    base_censored_at: Sequence[float | None] | None = None,
    other_censored_at: Sequence[float | None] | None = None,
) -> Interval:
    """``median(base) / median(other)`` of censored times with its bootstrap interval; None parts when either
    group is empty, it has fewer than :data:`MIN_RUNS` runs, or too many resamples have no ratio.

    Args:
        base: times of the reference runs (None: not reached).
        other: times of the compared runs.
        level: the interval's coverage.
        paired: ``base[i]`` and ``other[i]`` are the same seed (same machine): resample seeds, not runs.
        base_censored_at: per base run, when it was last seen short of the threshold (used where it never
            reached it; None: unknown, taken as 0).
        other_censored_at: the same for ``other``.

    Raises:
        ValueError: ``paired`` with groups of different sizes, or censoring times that don't match the runs.
    """
    b, o = _censored(base), _censored(other)
    if paired and b.size != o.size:
        raise ValueError(f"paired speed-up needs one run per seed in each group, got {b.size} and {o.size}")
    n_reached = int(np.isfinite(o).sum())
    if not b.size or not o.size:
        return Interval(None, None, None, int(o.size), n_reached)
    b_floor, o_floor = _at_censoring(b, base_censored_at), _at_censoring(o, other_censored_at)

    def ends(ib: np.ndarray, io: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Lower and upper ends of the ratio per resample, and which resamples bound nothing (both unreached:
        their ends are 0 and infinity)."""
        none = np.isinf(_medians(b[ib])) & np.isinf(_medians(o[io]))
        low = np.where(none, 0.0, _ratio(_medians(b_floor[ib]), _medians(o[io])))
        high = np.where(none, math.inf, _ratio(_medians(b[ib]), _medians(o_floor[io])))
        return low, high, none

    low0, high0, none0 = ends(np.arange(b.size)[None, :], np.arange(o.size)[None, :])
    value, bound = (None, "") if none0[0] else _point(float(low0[0]), float(high0[0]))
    if min(b.size, o.size) < MIN_RUNS:
        return Interval(value, None, None, int(o.size), n_reached, bound)
    rng = np.random.default_rng(RNG_SEED)
    if paired:
        idx = rng.integers(0, b.size, size=(RESAMPLES, b.size))
        lows, highs, none = ends(idx, idx)
    else:
        lows, highs, none = ends(
            rng.integers(0, b.size, size=(RESAMPLES, b.size)),
            rng.integers(0, o.size, size=(RESAMPLES, o.size)),
        )
    if none.all():
        return Interval(value, None, None, int(o.size), n_reached, bound)
    return Interval(
        value,
        percentile_bounds(lows, level)[0],
        percentile_bounds(highs, level)[1],
        int(o.size),
        n_reached,
        bound,
    )


Group = tuple[Sequence[float | None], Sequence[float | None]]
"""One cell's runs: times to threshold (None: not reached) and when each was last seen short of it."""


def selected_speedup_ci(
    base_cells: Sequence[Group], other_cells: Sequence[Group], level: float = LEVEL
) -> tuple[Interval, tuple[float, float]]:
    """Best against best: ``median(base's best cell) / median(other's best cell)``, each precision's best cell (the
    lowest censored median) chosen again inside every resample, the cells resampled independently (runs of two
    cells share only their seed numbers, not their machine's state). Ends as :func:`speedup_ci`'s. Also returns how
    often each side's best cell in the resamples was the one chosen from the runs themselves.

    Without selection inside the bootstrap, the interval would treat the chosen cell as fixed in advance and miss
    the optimism of picking the minimum of noisy medians.
    """
    base = [(_censored(t), c) for t, c in base_cells]
    other = [(_censored(t), c) for t, c in other_cells]
    n_other = sum(x.size for x, _ in other)
    if not base or not other or any(not x.size for x, _ in (*base, *other)):
        return Interval(None, None, None, n_other, 0), (math.nan, math.nan)
    rng = np.random.default_rng(RNG_SEED)

    def pick(cells: list[tuple[np.ndarray, Sequence[float | None]]], rows: int) -> tuple[np.ndarray, ...]:
        """Per row: the chosen cell's median, its censoring-floor median, and the chosen cell's index."""
        med, floor = [], []
        for x, at in cells:
            idx = np.arange(x.size)[None, :] if rows == 0 else rng.integers(0, x.size, (rows, x.size))
            med.append(_medians(x[idx]))
            floor.append(_medians(_at_censoring(x, at)[idx]))
        m, f = np.vstack(med), np.vstack(floor)
        choice = np.lexsort((f, m), axis=0)[0]
        cols = np.arange(m.shape[1])
        return m[choice, cols], f[choice, cols], choice

    def ends(rows: int) -> tuple[np.ndarray, ...]:
        mb, fb, cb = pick(base, rows)
        mo, fo, co = pick(other, rows)
        none = np.isinf(mb) & np.isinf(mo)
        low = np.where(none, 0.0, _ratio(fb, mo))
        high = np.where(none, math.inf, _ratio(mb, fo))
        return low, high, none, cb, co

    low0, high0, none0, cb0, co0 = ends(0)
    n_reached = int(sum(np.isfinite(x).sum() for x, _ in other))
    value, bound = (None, "") if none0[0] else _point(float(low0[0]), float(high0[0]))
    if min(x.size for x, _ in (*base, *other)) < MIN_RUNS:
        return Interval(value, None, None, n_other, n_reached, bound), (math.nan, math.nan)
    lows, highs, none, cb, co = ends(RESAMPLES)
    stable = (float((cb == cb0[0]).mean()), float((co == co0[0]).mean()))
    if none.all():
        return Interval(value, None, None, n_other, n_reached, bound), stable
    return Interval(
        value,
        percentile_bounds(lows, level)[0],
        percentile_bounds(highs, level)[1],
        n_other,
        n_reached,
        bound,
    ), stable


def relative_loss_ci(base: Sequence[float], other: Sequence[float], level: float = LEVEL) -> Interval:
    """QuaRL's relative loss E% = 100 (mean(base) - mean(other)) / |mean(base)| of two groups paired by seed
    (``base[i]`` and ``other[i]`` come from seed i), with a paired percentile bootstrap: seeds are resampled as
    pairs, as for a paired speed-up (post-training quantization of seed i quantizes fp32 policy i, so fp32's
    seed-to-seed spread is not noise in the loss). ``n`` counts the pairs; no interval below :data:`MIN_RUNS`
    or when a resample's base mean is 0 (no relative loss defined).

    Raises:
        ValueError: groups of different sizes.
    """
    b, o = np.asarray(base, np.float64), np.asarray(other, np.float64)
    if b.size != o.size:
        raise ValueError(
            f"paired relative loss needs one value per seed in each group, got {b.size} and {o.size}"
        )
    n = int(b.size)
    if not n:
        return Interval(None, None, None, 0, 0)

    def loss(idx: np.ndarray) -> np.ndarray:
        mb = b[idx].mean(axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            return 100.0 * (mb - o[idx].mean(axis=-1)) / np.abs(mb)

    value = float(loss(np.arange(n)))
    if not math.isfinite(value):
        return Interval(None, None, None, n, n)
    if n < MIN_RUNS:
        return Interval(value, None, None, n, n)
    stat = loss(np.random.default_rng(RNG_SEED).integers(0, n, size=(RESAMPLES, n)))
    if not np.isfinite(stat).all():
        return Interval(value, None, None, n, n)
    low, high = percentile_bounds(stat, level)
    return Interval(value, low, high, n, n)


def limiter_blocked_shares(
    inserts: Sequence[float],
    samples: Sequence[float],
    samples_per_insert: float,
    min_size: int,
    buffer: float,
    batch_size: int,
) -> tuple[float, float] | None:
    """Shares of snapshots at which the samples-per-insert limiter held the learner back and held the actors back.

    Reverb's limiter lets the learner sample while ``d = spi * inserts - samples`` stays above ``min_diff = spi *
    min_size - buffer`` (and ``inserts >= min_size``), and actors insert while ``d + spi <= max_diff = spi * min_size +
    buffer``. A snapshot within one learner batch plus one insert (``batch_size + spi``) of a bound counts as that
    side blocked (the nearer bound when both are that close); snapshots taken at regular intervals make the shares
    estimates of the share of time. Pass only snapshots taken after acting started. None without snapshots.
    """
    ins, sam = np.asarray(inserts, np.float64), np.asarray(samples, np.float64)
    keep = np.isfinite(ins) & np.isfinite(sam)
    ins, sam = ins[keep], sam[keep]
    if not ins.size or samples_per_insert <= 0:
        return None
    d = samples_per_insert * ins - sam
    lo, hi = samples_per_insert * min_size - buffer, samples_per_insert * min_size + buffer
    tol = batch_size + samples_per_insert
    to_lo, to_hi = d - lo, hi - d
    learner = (ins < min_size) | ((to_lo < tol) & (to_lo <= to_hi))
    actors = ~learner & (to_hi < tol)
    return float(learner.mean()), float(actors.mean())
