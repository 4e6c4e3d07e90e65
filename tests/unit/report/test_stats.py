"""The report's statistics on hand-computed cases: threshold, time to threshold on noisy curves, medians."""

from __future__ import annotations

import math

import numpy as np
import pytest

from actorq.report import intervals, stats


def test_smooth_is_trailing_and_undefined_until_k_values():
    s = stats.smooth([1, 2, 3, 10], k=3)
    assert np.isnan(s[:2]).all()
    assert s[2:].tolist() == [2.0, 5.0]
    assert stats.smooth([1, 100, 2, 3], k=3, statistic="median")[2:].tolist() == [2.0, 3.0]
    assert np.isnan(stats.smooth([5, 6], k=3)).all()
    with pytest.raises(ValueError):
        stats.smooth([1], k=0)


def test_threshold_is_95_percent_of_best_and_5_percent_worse_for_negative_returns():
    assert stats.reward_threshold(1000.0) == pytest.approx(950.0)
    assert stats.reward_threshold(-100.0) == pytest.approx(-105.0)  # 0.95 * -100 = -95 would be unreachable
    assert stats.reward_threshold(200.0, fraction=0.9) == pytest.approx(180.0)
    with pytest.raises(ValueError):
        stats.reward_threshold(1.0, fraction=0.0)


def test_best_smoothed_ignores_single_spikes():
    spiky = [0, 0, 1000, 0, 0, 500, 500, 500]
    assert stats.best_smoothed([spiky], k=3) == pytest.approx(500.0)
    assert stats.best_smoothed([spiky, [600, 600, 600]], k=3) == pytest.approx(600.0)
    assert stats.best_smoothed([[1, 2]], k=3) is None


def test_time_to_threshold_on_a_noisy_curve_needs_a_sustained_crossing():
    times = [10, 20, 30, 40, 50, 60, 70, 80]
    # One lucky evaluation at t=20 (above 950), then a real climb: windows of 3 first reach >= 950 at t=70.
    values = [100, 990, 200, 700, 900, 960, 1000, 990]
    trained = [1] * len(values)
    assert stats.first_crossing(values, trained, 950.0, k=1) == 1  # unsmoothed: fooled by the spike
    assert stats.smooth(values, 3)[6] == pytest.approx(953.33, abs=0.01)  # (900+960+1000)/3 at t=70
    assert stats.time_to_threshold(times, values, trained, 950.0, k=3) == 70.0
    assert (
        stats.time_to_threshold(times, values, trained, 950.0, k=3, statistic="median") == 70.0
    )  # median(900,960,1000)
    assert stats.time_to_threshold(times, values, trained, 2000.0, k=3) is None
    with pytest.raises(ValueError):
        stats.time_to_threshold([1, 2], [1.0], [1.0], 0.0)


def test_first_crossing_index_is_exact():
    values = [100, 990, 200, 700, 900, 960, 1000, 990]
    # windows: [100,990,200]=430, [990,200,700]=630, [200,700,900]=600, [700,900,960]=853, [900,960,1000]=953
    trained = [1] * len(values)
    assert stats.first_crossing(values, trained, 950.0, k=3) == 6
    assert stats.first_crossing(values, trained, 954.0, k=3) == 7


def test_censored_median_counts_unreached_runs_as_slowest():
    assert stats.censored_median([30.0, 10.0, 20.0]) == stats.SeedSummary(20.0, 10.0, 30.0, 3, 3)
    s = stats.censored_median([10.0, None, 20.0])
    assert (s.median, s.low, s.high, s.n_reached) == (20.0, 10.0, 20.0, 2)
    assert stats.censored_median([10.0, None, None]).median is None  # the median seed never got there
    # An even count: the ceil(n/2)-th fastest, the first time by which half the runs had reached it.
    assert stats.censored_median([10.0, 20.0, 30.0, None]).median == 20.0
    assert stats.censored_median([10.0, 20.0, None, None]).median == 20.0
    assert stats.censored_median([10.0, None, None, None]).median is None
    assert stats.censored_median([]).n == 0
    assert "not reached (1/3)" in stats.censored_median([5.0, None, None]).fmt()
    assert stats.censored_median([10.0, 20.0, 30.0]).fmt(0, " s") == "20 s [10-30] (3/3)"


def test_the_censored_median_is_the_kaplan_meier_median_when_no_run_was_censored_early():
    # One rule for a cell's median time and the speed-up computed from it: for every n and number reached, with
    # the unreached runs censored after every reached time, the two agree (None where Kaplan-Meier says never).
    rng = np.random.default_rng(3)
    for n in range(1, 13):
        for n_reached in range(n + 1):
            times: list[float | None] = [
                *rng.uniform(100.0, 400.0, n_reached).round(1),
                *[None] * (n - n_reached),
            ]
            rng.shuffle(times)
            km = intervals.km_median(times, [480.0] * n).value
            median = stats.censored_median(times).median
            assert (median is None and math.isinf(km)) or median == pytest.approx(km), (n, n_reached)
    with pytest.raises(ValueError, match="at least one"):
        stats.median_index(0)


def test_plain_median_and_ratios():
    assert stats.plain_median([1.0, None, 3.0]).median == 2.0
    assert stats.plain_median([None]).median is None
    assert stats.ratio(10.0, 4.0) == 2.5 and stats.ratio(1.0, 0.0) is None and stats.ratio(None, 1.0) is None
    assert stats.paired_ratios({0: 100.0, 1: 90.0, 2: None}, {0: 50.0, 1: 30.0, 2: 20.0}) == [2.0, 3.0]


def test_band_never_extrapolates_a_run_past_its_end():
    grid = [0, 5, 10, 15, 20]
    mean, low, high, count = stats.band([([0, 10, 20], [0, 10, 20]), ([0, 10], [10, 30])], grid)
    assert count.tolist() == [2, 2, 2, 1, 1]
    assert mean[:3].tolist() == [5.0, 12.5, 20.0]
    assert (low[1], high[1]) == (5.0, 20.0)
    assert mean[4] == 20.0  # only the longer run covers t=20
    m, lo, hi, c = stats.band([], grid)
    assert np.isnan(m).all() and c.sum() == 0


def test_projection_model():
    # N = 10000 steps; actors could do 400/s; the learner lets in 64/s.
    assert stats.projected_time(10000, 400.0, 64.0, 1.0) == pytest.approx(10000 / 64)
    assert stats.projected_time(10000, 400.0, 64.0, 2.0, startup_s=20) == pytest.approx(20 + 10000 / 128)
    assert stats.projected_time(10000, 400.0, 64.0, math.inf) == pytest.approx(25.0)  # actor limit
    assert stats.projected_time(10000, 400.0, 64.0, 100.0) == pytest.approx(25.0)
    with pytest.raises(ValueError):
        stats.projected_time(10, 0.0, 1.0, 1.0)


def test_first_activity_time_and_intrinsic_cost():
    assert stats.first_activity_time([0, 5, 10, 15], [0, 0, 50, 100]) == 7.5
    assert stats.first_activity_time([10, 20], [100, 200]) == 0.0  # 100 steps at 10/s: started at t=0
    assert stats.first_activity_time([10, 20], [50, 150]) == pytest.approx(5.0)
    assert stats.first_activity_time([0, 5], [0, 0]) is None
    # 1 ms/step for the first 200 steps, then 5 ms/step (waiting): intrinsic = 1 ms.
    steps = [0, 100, 200, 300, 400]
    secs = [0, 0.1, 0.2, 0.7, 1.2]
    assert stats.intrinsic_cost_per_step(steps, secs) == pytest.approx(0.001)
    assert stats.intrinsic_cost_per_step([0, 10], [0, 1]) == 0.0  # no interval long enough


def test_untrained_return_is_smoothed_as_the_threshold_is():
    # Fewer than k evaluations before the first update: their mean.
    assert stats.untrained_return([0, 0, 100, 200], [690.0, 700.0, 135.0, 900.0], k=3) == pytest.approx(695.0)
    assert stats.untrained_return([5, 100], [690.0, 700.0]) is None
    assert stats.untrained_return([0, 0], [float("nan"), 10.0]) == pytest.approx(10.0)
    # Five untrained evaluations (the run: 39-201): the best mean of 3, as the threshold takes it, not
    # the mean of all five and not the single best.
    untrained = [39.0, 201.0, 150.0, 77.0, 120.0]
    assert stats.untrained_return([0] * 5 + [10], [*untrained, 500.0], k=3) == pytest.approx(428 / 3)
    assert stats.untrained_return([0] * 5, untrained, k=3, statistic="median") == pytest.approx(150.0)
    with pytest.raises(ValueError, match="differ in length"):
        stats.untrained_return([0], [1.0, 2.0])


def test_evaluations_before_the_first_update_never_reach_the_threshold():
    # The untrained network scores 142.6 on average: above a threshold of 135.5, but it has learned nothing.
    values = [39.0, 201.0, 187.8, 120.0, 130.0, 140.0, 150.0]
    steps = [0, 0, 0, 50, 100, 150, 200]
    times = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0]
    assert stats.first_crossing(values, steps, 135.5, k=3) == 6  # (130 + 140 + 150) / 3 = 140
    assert stats.time_to_threshold(times, values, steps, 135.5, k=3) == 70.0
    # A window mixing untrained and trained evaluations does not count either: 201 and 187.8 would lift
    # (201 + 187.8 + 120) / 3 = 169.6 over it at index 3.
    assert stats.first_crossing(values, steps, 160.0, k=3) is None
    assert stats.first_crossing(values, [1] * 7, 160.0, k=3) == 3  # the same curve, every evaluation trained
    with pytest.raises(ValueError, match="differ in length"):
        stats.first_crossing(values, steps[:-1], 135.5)


def test_cpu_rate_skips_the_start_up_cpu_of_the_first_sample():
    # 5 s of start-up CPU, then 2 ms of CPU per step.
    steps = [100, 600, 1100]
    cpu = [5.0 + 0.002 * s for s in steps]
    assert stats.cpu_rate(steps, cpu) == pytest.approx(500.0)
    assert stats.cpu_rate([100], [5.0]) is None
    assert stats.cpu_rate([100, 200], [5.0, 5.0]) is None
