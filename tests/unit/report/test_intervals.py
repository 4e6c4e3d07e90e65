"""The report's package-made intervals (rliable, lifelines) on cases with answers computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from actorq.report import coverage, intervals
from actorq.report.grid_md import km_cell


def test_km_median_of_a_hand_made_censored_sample():
    # Events at 2, 4, 5, 8; censored at 3 and 6. By hand: S(2) = 5/6, S(4) = 5/6 * 3/4 = 0.625 (3 censored
    # leaves 4 at risk), S(5) = 0.625 * 2/3 = 0.4167 <= 0.5: the median is 5. (Censored runs as never reached
    # would make it 6.5; dropped, 4.5.) The log(-log) Greenwood band at t=2: V = (1/(6*5)) / log(5/6)^2 = 1.0027,
    # lower S^exp(+1.96 sqrt V) = 0.273 <= 0.5 already, so the interval's lower end is 2; the upper band stays
    # above 0.5 (0.767 at t=5) until S = 0 at 8: the upper end is 8.
    ci = intervals.km_median([2.0, None, 4.0, 5.0, None, 8.0], [None, 3.0, None, None, 6.0, None])
    assert ci.value == 5.0 and (ci.low, ci.high) == (2.0, 8.0) and (ci.n, ci.n_reached) == (6, 4)
    assert km_cell(ci) == "5 [2, 8] (4/6 reached)"


def test_a_survival_estimate_of_exactly_one_half_is_the_median_on_every_cpu():
    # 10 runs, the 5th reaching the threshold at 500 s: S(500) = 0.5 exactly, so by the rule (the first time S is
    # at or below 0.5) the median is 500. lifelines computes S as exp(sum(log)), which lands one ulp above or below
    # 0.5 depending on the CPU's log/exp kernels, and its own median_survival_time_ compares exactly: on a Zen 4
    # it said 600, a whole run later, where a Zen 3 said 500.
    times = [100.0, 200.0, 300.0, 400.0, 500.0, 600.0, 700.0, 800.0, None, None]
    ci = intervals.km_median(times, [None] * 8 + [1000.0, 1000.0])
    assert ci.value == 500.0 and (ci.n, ci.n_reached) == (10, 8)
    above, below = 0.5 + 2**-53, 0.5 - 2**-54  # one ulp either side of a half
    for half in (above, 0.5, below):
        assert intervals.first_at_or_below_half([0.0, 10.0, 20.0, 30.0], [1.0, 0.6, half, 0.3]) == 20.0
    assert math.isinf(intervals.first_at_or_below_half([0.0, 10.0], [1.0, 0.6]))


def test_km_interval_ends_agree_with_lifelines_away_from_a_tie():
    from lifelines import KaplanMeierFitter
    from lifelines.utils import median_survival_times

    rng = np.random.default_rng(3)
    for _ in range(20):
        t = rng.exponential(300.0, 12).round(1)
        reached = rng.random(12) < 0.7
        ci = intervals.km_median([float(x) if r else None for x, r in zip(t, reached, strict=True)], list(t))
        kmf = KaplanMeierFitter(alpha=0.05).fit(t, event_observed=reached)
        s = kmf.survival_function_.iloc[:, 0].to_numpy()
        if np.any(np.abs(s - 0.5) < 1e-6):
            continue  # a tie at one half: lifelines' exact comparison is what the other test is about
        low, high = np.asarray(median_survival_times(kmf.confidence_interval_), float).reshape(2)
        assert (ci.value, ci.low, ci.high) == (kmf.median_survival_time_, low, high)


def test_a_median_fewer_than_half_reached_is_not_a_number():
    ci = intervals.km_median([100.0, None, None, None, 130.0], [None, 480.0, 480.0, 480.0, None])
    assert math.isinf(ci.value) and ci.n_reached == 2
    assert km_cell(ci).startswith("not reached (2/5 reached) [")
    assert not any(ch.isdigit() for ch in km_cell(ci).split("(")[0])  # no number in place of the median
    with pytest.raises(ValueError, match="censoring times"):
        intervals.km_median([1.0, 2.0], [1.0])


def test_iqm_of_a_known_array():
    # 25% trimmed from each end of 8 values: 3, 4, 5, 6 remain, IQM 4.5 (the mean, 16, is the outlier's).
    ci = intervals.iqm_ci([100.0, 1.0, 7.0, 2.0, 6.0, 3.0, 5.0, 4.0, None])
    assert ci.value == pytest.approx(4.5) and (ci.n, ci.n_reached) == (9, 8)
    assert ci.low <= 4.5 <= ci.high < 100.0
    flat = intervals.iqm_ci([3.0] * 5)
    assert (flat.value, flat.low, flat.high) == (3.0, 3.0, 3.0)
    mean = intervals.mean_ci([190.0, 200.0, 180.0, 195.0, 210.0])
    assert mean.value == pytest.approx(195.0) and 180.0 < mean.low < 195.0 < mean.high < 210.0


def test_probability_of_improvement_known_cases():
    dominated = intervals.improvement_ci([5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0])
    assert (dominated.value, dominated.low, dominated.high) == (1.0, 1.0, 1.0)
    assert intervals.improvement_ci([1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]).value == 0.0
    equal = intervals.improvement_ci([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    assert equal.value == 0.5 and equal.low < 0.5 < equal.high
    # x > y in 3 of the 9 pairs (3>2, 5>2, 5>4): 1/3.
    assert intervals.improvement_ci([1.0, 3.0, 5.0], [2.0, 4.0, 6.0]).value == pytest.approx(1 / 3)


def test_intervals_are_reproducible_and_leave_the_global_generator_alone():
    np.random.seed(7)
    expected = np.random.random()
    np.random.seed(7)
    intervals._cached.cache_clear()
    first = intervals.iqm_ci([1.0, 2.0, 3.0, 4.0, 10.0])
    assert np.random.random() == expected  # the caller's stream goes on as if nothing had drawn from it
    intervals._cached.cache_clear()
    assert intervals.iqm_ci([1.0, 2.0, 3.0, 4.0, 10.0]) == first


def test_coverage_simulation_finds_the_percentile_bootstrap_undercovers_at_five_seeds():
    # A percentile bootstrap of the mean of 5 normal draws is about mean +- 1.96 * sd * sqrt(4/5) / sqrt(5), a
    # t interval with 1.75 in place of t(4)'s 2.78: P(|T_4| < 1.75) = 0.85, not 0.95.
    share = coverage.simulate("mean", 5, 100)
    assert 0.75 < share < 0.92
    measured = coverage.COVERAGE["mean"][5][0]
    assert abs(measured - share) < 0.1  # the committed figure is what the simulation gives
    assert f"n=5 seeds: real coverage {measured:.0%} (simulated" in coverage.note("mean", 5)
    assert "not measured at this n" in coverage.note("mean", 4)
    with pytest.raises(ValueError, match="method must be"):
        coverage.one("median", 5, np.random.default_rng(0))
