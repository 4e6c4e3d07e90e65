"""The report's "Speed-ups that stay finite" table: per comparison the Kaplan-Meier medians, the ratio of medians,
the RMST ratio, the log-normal AFT ratio, the log-rank p, what may be said, and the intervals' real coverage
simulated at the comparison's own censoring; and how many intervals of the table are unbounded."""

from __future__ import annotations

import functools
import math
from typing import Any

from actorq.report import censored, coverage
from actorq.report.analysis import TaskTable
from actorq.report.bootstrap import Interval
from actorq.report.comparisons import Comparison, comparisons
from actorq.report.markdown import table


def _ratio(interval: Interval) -> str:
    if interval.value is None:
        return "-"
    return interval.fmt(2, "x", inf="inf").rsplit(" (", 1)[0]


def _km(interval: Interval) -> str:
    if interval.value is None:
        return "-"
    value = "not reached" if math.isinf(interval.value) else f"{interval.value:,.0f}"
    return f"{value} ({interval.n_reached}/{interval.n})"


@functools.lru_cache(maxsize=256)
def simulated(
    n: int, share: float, sigma: float, paired: bool, sims: int
) -> tuple[coverage.EffectCoverage, ...]:
    """:func:`actorq.report.coverage.effect_coverage` at each true ratio, remembered (markdown and JSON ask)."""
    return tuple(
        coverage.effect_coverage(n, share, r, sigma, sims=sims, paired=paired) for r in coverage.TRUE_RATIOS
    )


def coverage_of(c: Comparison, sims: int) -> tuple[coverage.EffectCoverage, ...]:
    """The comparison's simulated coverage (none for best against best, whose selection is not simulated, or
    with ``sims`` 0)."""
    if sims <= 0 or c.kind != "same setting" or c.n < 3:
        return ()
    sigma = round(c.sigma if c.sigma else coverage.DEFAULT_SIGMA, 2)
    return simulated(c.n, round(c.censored_share, 2), sigma, c.paired, sims)


def _coverage_cell(c: Comparison, sims: int) -> str:
    cov = coverage_of(c, sims)
    if not cov:
        return "not simulated" if c.kind == "same setting" else "not simulated (selection)"
    return "; ".join(
        f"{e.ratio:g}x: {e.median:.0%} ({e.median_unbounded:.0%} unbounded), {e.rmst:.0%}" for e in cov
    )


def comparison_table(t: TaskTable, sims: int = coverage.EFFECT_SIMS) -> tuple[str, list[Comparison]]:
    """The table (markdown) and its comparisons; empty without a comparison."""
    found = [] if t.degenerate or t.threshold is None else comparisons(t)
    if not found:
        return "", []
    header = [
        "comparison", "pairing", "Kaplan-Meier median (s): fp32; precision (reached/runs)",
        "ratio of medians [95% CI]", "RMST to the budget (s): fp32; precision", "RMST ratio [95% CI]",
        "log-normal AFT ratio [95% CI]", "log-rank p", "what may be said (RMST ratio)",
        "coverage at true 1x/2x/3x, this censoring: medians (unbounded), RMST",
    ]  # fmt: skip
    rows = []
    for c in found:
        name = f"{c.label} vs {c.base}" + (" (best against best)" if c.kind != "same setting" else "")
        chosen = (
            f"; the same best cells in {c.chosen_share[0]:.0%} / {c.chosen_share[1]:.0%} of resamples"
            if c.chosen_share and not math.isnan(c.chosen_share[0])
            else ""
        )
        rows.append([
            name, ("paired" if c.paired else "unpaired") + chosen, f"{_km(c.km_base)}; {_km(c.km_other)}",
            _ratio(c.median_ratio), f"{c.rmst_base:,.0f}; {c.rmst_other:,.0f} (to {c.tau:,.0f} s)",
            _ratio(c.rmst_ratio), _ratio(c.aft_ratio), "-" if c.logrank_p is None else f"{c.logrank_p:.3f}",
            c.reading, _coverage_cell(c, sims),
        ])  # fmt: skip
    return table(header, rows), found


def unbounded_line(found: list[Comparison]) -> str:
    """How many of the table's intervals say nothing on one side."""
    medians = sum(censored.unbounded(c.median_ratio) for c in found)
    aft = sum(c.aft_ratio.value is None for c in found)
    rmst = sum(censored.unbounded(c.rmst_ratio) for c in found)
    return (
        f"**Unbounded intervals: {medians} of {len(found)} ratio-of-medians intervals** have an end at 0x or inf (or "
        f"none), {rmst} of {len(found)} RMST-ratio intervals (finite by construction) and {aft} of {len(found)} "
        "AFT ratios could not be fitted. An unbounded interval holds almost any prediction: it is no check of one."
    )


NOTE = (
    "Pairing: a seed's runs are pairs only inside one cell (one experiment, one machine: the grid ran them back to "
    "back); runs of two cells share only their seed numbers and are resampled apart. Best against best: each "
    "precision's best cell (lowest median, or lowest RMST) is chosen again inside every resample, cells resampled "
    "apart, so the interval includes the optimism of picking a minimum. RMST (restricted mean time to threshold): "
    "the area under the Kaplan-Meier curve up to the budget (the smaller of the two sides'), i.e. the mean time "
    "with an unreached run counted at the budget; its ratio fp32/precision is always finite, with a percentile "
    "bootstrap (4,000 resamples, by seed where paired). Log-normal AFT ratio: lifelines' LogNormalAFTFitter with the "
    "precision as covariate, censored runs as 'longer than', Wald 95% interval, runs taken as independent "
    "(conservative for a cell's correlated pairs). Log-rank p: lifelines' test that both precisions' times come "
    "from one distribution (unpaired). What may be said: 'faster'/'slower' where the RMST ratio's 95% interval "
    f"excludes 1; 'about as fast' only where its 90% interval lies within 1/{censored.EQUIVALENCE_MARGIN:g} to "
    f"{censored.EQUIVALENCE_MARGIN:g}x (two one-sided tests); otherwise 'no speed-up shown' with the range the "
    "data are compatible with. Coverage: the share of simulated intervals (ratio of medians; RMST ratio) that held "
    "the true ratio, and the share of medians' intervals that were unbounded, at this comparison's seeds and "
    "its share of unreached runs (both sides), log-normal times with the "
    f"comparison's fitted spread and a within-seed correlation of {coverage.SEED_CORRELATION:g} "
    "(`actorq.report.coverage.effect_coverage`; an undefined interval counts as holding)."
)


def as_json(found: list[Comparison], sims: int = coverage.EFFECT_SIMS) -> list[dict[str, Any]]:
    """The comparisons' numbers for ``report.json``."""
    return [
        {
            "kind": c.kind, "base": c.base, "label": c.label, "paired": c.paired, "pairing": c.pairing,
            "tau_s": c.tau, "km_median_base": c.km_base.as_dict(), "km_median": c.km_other.as_dict(),
            "median_ratio": c.median_ratio.as_dict(), "rmst_base_s": c.rmst_base, "rmst_s": c.rmst_other,
            "rmst_ratio": c.rmst_ratio.as_dict(), "rmst_ratio_90": c.rmst_ratio90.as_dict(),
            "aft_ratio": c.aft_ratio.as_dict(), "aft_sigma": c.sigma, "logrank_p": c.logrank_p,
            "censored_share_base": c.censored_share, "reading": c.reading,
            "median_ratio_unbounded": censored.unbounded(c.median_ratio),
            "chosen_share": list(c.chosen_share) if c.chosen_share else None,
            "coverage": [e.__dict__ for e in coverage_of(c, sims)],
        }
        for c in found
    ]  # fmt: skip
