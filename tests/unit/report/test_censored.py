"""Finite ratios of censored times (RMST, log-normal AFT), the log-rank test, pairing only inside a cell, best
against best with the choice inside the bootstrap, and coverage simulated with an effect."""

from __future__ import annotations

import math

import numpy as np
import pytest
from lifelines import KaplanMeierFitter
from lifelines.utils import restricted_mean_survival_time
from scipy.stats import norm

from actorq.report import bootstrap, censored, coverage
from actorq.report.bootstrap import Interval
from actorq.report.censored import Times
from actorq.report.pairing import pairing


def _lognormal(rng, n, scale=1000.0, sigma=0.5, budget=math.inf):
    t = scale * np.exp(sigma * rng.normal(size=n))
    return [float(x) if x <= budget else None for x in t], [budget if math.isfinite(budget) else 0.0] * n


def test_rmst_rows_is_lifelines_kaplan_meier_area_with_ties_and_early_censoring():
    rng = np.random.default_rng(3)
    for _ in range(20):
        n = int(rng.integers(3, 12))
        d = np.round(rng.uniform(1, 10, n))  # rounded: ties, also between an event and a censoring
        e = rng.random(n) < 0.7
        tau = float(rng.uniform(4, 12))
        kmf = KaplanMeierFitter().fit(d, event_observed=e)
        expected = restricted_mean_survival_time(kmf, t=tau)
        assert censored.rmst_rows(d[None, :], e[None, :], tau)[0] == pytest.approx(expected, rel=1e-9)
        assert censored.rmst(Times(d, e), tau) == pytest.approx(expected, rel=1e-9)


def test_the_rmst_ratio_stays_finite_where_the_ratio_of_medians_is_unbounded():
    # fp32 reached the threshold in 4 of 10 seeds within its 3,000 s, int8 in all: the medians' ratio has no
    # upper end, the RMST ratio has one, and it excludes 1.
    fp32 = [900.0, 1500.0, 2200.0, 2800.0, *[None] * 6]
    int8 = [300.0, 400.0, 500.0, 600.0, 700.0, 800.0, 900.0, 1000.0, 1100.0, 1200.0]
    at = [3000.0] * 10
    medians = bootstrap.speedup_ci(fp32, int8, paired=True, base_censored_at=at, other_censored_at=at)
    assert censored.unbounded(medians)
    base, other = Times.of(fp32, at, range(10)), Times.of(int8, at, range(10))
    ratio, ratio90 = censored.rmst_ratio_ci(base, other, 3000.0, paired=True)
    assert not censored.unbounded(ratio) and 1.0 < ratio.low < ratio.value < ratio.high < 10
    assert ratio.low <= ratio90.low <= ratio90.high <= ratio.high
    assert censored.reading(ratio, ratio90).startswith("faster")


def test_the_aft_ratio_finds_a_known_time_ratio_and_log_rank_tells_groups_apart():
    rng = np.random.default_rng(0)
    fp32, at = _lognormal(rng, 40, 2000.0, budget=4000.0)
    int8, _ = _lognormal(rng, 40, 1000.0, budget=4000.0)
    base, other = Times.of(fp32, at), Times.of(int8, at)
    ratio, sigma = censored.aft_ratio(base, other)
    assert ratio.low < 2.0 < ratio.high and 1.4 < ratio.value < 2.8
    assert 0.3 < sigma < 0.8
    assert censored.logrank_p(base, other) < 0.01
    same, _ = _lognormal(rng, 40, 2000.0, budget=4000.0)
    assert censored.logrank_p(base, Times.of(same, at)) > 0.01
    assert censored.aft_ratio(base, Times.of([None] * 40, at))[0].value is None  # nothing reached: no fit


def test_the_words_follow_the_interval_and_equivalence_needs_its_own_test():
    wide = Interval(1.05, 0.86, 1.38, 10, 10)
    assert (
        censored.reading(wide, Interval(1.05, 0.9, 1.3, 10, 10))
        == "no speed-up shown (compatible with 0.86x..1.38x)"
    )
    assert censored.reading(wide, Interval(1.0, 0.85, 1.2, 10, 10)).startswith("about as fast")
    assert censored.reading(Interval(0.8, 0.7, 0.95, 10, 10)).startswith("slower")
    assert censored.reading(Interval(2.0, 1.5, 3.0, 10, 10)).startswith("faster")
    assert censored.reading(Interval(2.0, None, None, 2, 2)) == "no interval (too few runs)"


def test_best_against_best_of_one_cell_each_is_the_unpaired_interval_and_choice_widens_it():
    rng = np.random.default_rng(1)
    a, at = _lognormal(rng, 10, 2000.0)
    b, _ = _lognormal(rng, 10, 1000.0)
    one, chosen = bootstrap.selected_speedup_ci([(a, at)], [(b, at)])
    fixed = bootstrap.speedup_ci(a, b, base_censored_at=at, other_censored_at=at)
    assert (one.value, one.low, one.high) == (fixed.value, fixed.low, fixed.high) and chosen == (1.0, 1.0)
    # Two fp32 cells of one distribution: which is "best" is luck, and choosing it again in every resample
    # moves the ratio's lower end down (picking a minimum of noisy medians flatters the base).
    twin = [x * 1.02 for x in reversed(a)]
    two, chosen = bootstrap.selected_speedup_ci([(a, at), (twin, at)], [(b, at)])
    assert 0.2 < chosen[0] < 0.8 and two.low < fixed.low


class _Run:
    def __init__(self, experiment, hardware):
        self.experiment, self.summary = experiment, {"hardware": hardware}


class _M:
    def __init__(self, seed, experiment=None, hardware=None):
        self.seed, self.run = seed, _Run(experiment, hardware or {"model": "zen3", "cores": 2})


def test_runs_pair_only_inside_one_cell_one_experiment_and_one_machine():
    fp32, int8 = [_M(s) for s in range(3)], [_M(s) for s in range(3)]
    assert pairing("fp32 [e=1]", fp32, "int8 [e=1]", int8)[0]
    assert pairing("fp32 [e=8]", fp32, "int8 [e=1]", int8) == (
        False, "unpaired: different cells (their runs share only their seed numbers)",
    )  # fmt: skip
    named = [_M(s, {"name": "env1"}) for s in range(3)]
    assert pairing("fp32 [e=1]", named, "int8 [e=1]", [_M(s, {"name": "env1"}) for s in range(3)])[0]
    assert not pairing("fp32 [e=1]", named, "int8 [e=1]", [_M(s, {"name": "rerun"}) for s in range(3)])[0]
    elsewhere = [_M(s, hardware={"model": "xeon", "cores": 2}) for s in range(3)]
    assert "different machines" in pairing("fp32 [e=1]", fp32, "int8 [e=1]", elsewhere)[1]
    assert not pairing("fp32 [e=1]", fp32, "int8 [e=1]", int8[:2])[0]


def test_the_simulated_budget_leaves_the_asked_share_unreached_and_coverage_is_a_share():
    tau = coverage.budget_for(0.3, 2.0, 0.6)
    pooled = (norm.sf(math.log(tau) / 0.6) + norm.sf((math.log(tau) + math.log(2.0)) / 0.6)) / 2
    assert pooled == pytest.approx(0.3, abs=1e-6)
    assert coverage.true_rmst(0.0, 0.5, 1e9) == pytest.approx(
        math.exp(0.125), rel=1e-6
    )  # the mean, uncensored
    c = coverage.effect_coverage(10, 0.4, 2.0, 0.6, sims=30)
    assert 0.6 <= c.median <= 1.0 and 0.6 <= c.rmst <= 1.0 and c.median_unbounded > 0.2 and c.sims == 30
    assert coverage.effect_coverage(10, 0.0, 2.0, 0.6, sims=30).median_unbounded == 0.0
