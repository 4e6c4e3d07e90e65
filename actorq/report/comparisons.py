"""Each speed-up the report reads, with every statistic that bears on it: the same setting (a precision against fp32
in its own sweep cell) and best against best (each precision's best cell against fp32's).

**Pairing** only inside one cell (:mod:`actorq.report.pairing`).

**Best against best** resamples each cell on its own and chooses each precision's best cell again in every resample
(:func:`actorq.report.bootstrap.selected_speedup_ci`, :func:`actorq.report.censored.selected_rmst_ratio_ci`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from actorq.report import bootstrap, censored
from actorq.report.analysis import TaskTable
from actorq.report.bootstrap import Interval
from actorq.report.censored import Times
from actorq.report.measure import RunMetrics
from actorq.report.pairing import pairing
from actorq.report.runs import split_label

PRECISIONS = ("fp16", "int8")
"""The precisions compared with fp32."""


@dataclass(frozen=True)
class Comparison:
    """One speed-up of ``label`` (cells) over ``base`` (cells): times ``base / label``."""

    kind: str
    """``same setting`` or ``best against best``."""
    base: str
    """fp32's label (its best cell for best against best)."""
    label: str
    paired: bool
    pairing: str
    """Why the runs are (not) paired."""
    tau: float
    """The RMST's horizon, seconds: the smaller of the two sides' budgets."""
    km_base: Interval
    km_other: Interval
    median_ratio: Interval
    """Ratio of Kaplan-Meier medians (censored medians), its percentile bootstrap."""
    rmst_base: float
    rmst_other: float
    rmst_ratio: Interval
    rmst_ratio90: Interval
    aft_ratio: Interval
    sigma: float | None
    """The log-normal fit's spread of log times (for the coverage simulation)."""
    logrank_p: float | None
    censored_share: float
    """The share of the compared runs (both sides) that never reached the threshold: what coverage is simulated
    at."""
    n: int
    chosen_share: tuple[float, float] | None = None
    """Best against best: how often fp32's and the precision's best cell in the resamples was the one chosen."""

    @property
    def reading(self) -> str:
        """The words its finite ratio (RMST) allows (:func:`actorq.report.censored.reading`)."""
        return censored.reading(self.rmst_ratio, self.rmst_ratio90)


def times_of(runs: list[RunMetrics]) -> Times:
    return Times.of([m.t_reach for m in runs], [m.t_censored for m in runs], [m.seed for m in runs])


def budget_s(runs: list[RunMetrics]) -> float:
    """The runs' wall-clock budget in seconds (the smallest, should they differ); inf without one."""
    minutes = [float(m) for r in runs if (m := (r.run.config or {}).get("max_minutes"))]
    return min(minutes) * 60 if minutes else math.inf


def _horizon(*groups: list[RunMetrics]) -> float:
    """The RMST horizon: the smaller budget; without budgets, the longest time any run was followed."""
    tau = min(budget_s(g) for g in groups)
    if math.isfinite(tau):
        return tau
    return max(d for g in groups for d in times_of(g).durations)


def same_setting(t: TaskTable, label: str) -> Comparison:
    """``label`` against fp32 in its own cell."""
    base_label = t.base_of(label)
    base_runs, runs = t.runs.get(base_label, []), t.runs.get(label, [])
    paired, why = pairing(base_label, base_runs, label, runs)
    if paired:
        by_seed = {m.seed: m for m in base_runs}
        base_runs = [by_seed[m.seed] for m in runs]
    base, other = times_of(base_runs), times_of(runs)
    tau = _horizon(base_runs, runs)
    rmst_ratio, rmst90 = censored.rmst_ratio_ci(base, other, tau, paired)
    aft, sigma = censored.aft_ratio(base, other)
    return Comparison(
        kind="same setting", base=base_label, label=label, paired=paired, pairing=why, tau=tau,
        km_base=t.time_ci(base_label), km_other=t.time_ci(label),
        median_ratio=bootstrap.speedup_ci(
            [m.t_reach for m in base_runs], [m.t_reach for m in runs], paired=paired,
            base_censored_at=[m.t_censored for m in base_runs], other_censored_at=[m.t_censored for m in runs],
        ),
        rmst_base=censored.rmst(base, tau) if base.n else math.nan,
        rmst_other=censored.rmst(other, tau) if other.n else math.nan,
        rmst_ratio=rmst_ratio, rmst_ratio90=rmst90, aft_ratio=aft, sigma=sigma,
        logrank_p=censored.logrank_p(base, other), censored_share=_pooled(base, other), n=other.n,
    )  # fmt: skip


def _pooled(base: Times, other: Times) -> float:
    runs = base.n + other.n
    return float((runs - base.events.sum() - other.events.sum()) / runs) if runs else math.nan


def cells_of(t: TaskTable, precision: str) -> list[str]:
    return [lab for lab in t.labels() if split_label(lab)[0] == precision]


def best_against_best(t: TaskTable, precision: str) -> Comparison | None:
    """``precision``'s best cell against fp32's best, unpaired, the best cells chosen inside the bootstrap; None
    without two cells or without a cell of either precision with a median."""
    mine, base_cells = cells_of(t, precision), cells_of(t, "fp32")
    if len({split_label(lab)[1] for lab in t.runs}) < 2 or not mine or not base_cells:
        return None
    chosen, base_label = t.best_cell(precision), t.best_cell("fp32")
    if chosen is None or base_label is None:
        return None
    groups = {lab: t.runs[lab] for lab in [*base_cells, *mine]}
    tau = _horizon(*groups.values())
    base_t, mine_t = [times_of(groups[c]) for c in base_cells], [times_of(groups[c]) for c in mine]
    ratio, stable = bootstrap.selected_speedup_ci(
        [([m.t_reach for m in groups[c]], [m.t_censored for m in groups[c]]) for c in base_cells],
        [([m.t_reach for m in groups[c]], [m.t_censored for m in groups[c]]) for c in mine],
    )
    rmst_ratio, rmst90 = censored.selected_rmst_ratio_ci(base_t, mine_t, tau)
    base, other = times_of(t.runs[base_label]), times_of(t.runs[chosen])
    aft, sigma = censored.aft_ratio(base, other)
    return Comparison(
        kind="best against best", base=base_label, label=chosen, paired=False,
        pairing="unpaired: each precision's best cell chosen again in every resample, cells resampled apart",
        tau=tau, km_base=t.time_ci(base_label), km_other=t.time_ci(chosen), median_ratio=ratio,
        rmst_base=min(censored.rmst(c, tau) for c in base_t), rmst_other=min(censored.rmst(c, tau) for c in mine_t),
        rmst_ratio=rmst_ratio, rmst_ratio90=rmst90, aft_ratio=aft, sigma=sigma,
        logrank_p=censored.logrank_p(base, other), censored_share=_pooled(base, other), n=other.n,
        chosen_share=stable,
    )  # fmt: skip


def comparisons(t: TaskTable) -> list[Comparison]:
    """Every same-setting comparison (each non-fp32 label with fp32 in its cell), then best against best."""
    out = [
        same_setting(t, lab)
        for lab in t.labels()
        if split_label(lab)[0] != "fp32" and t.runs.get(t.base_of(lab))
    ]
    for precision in PRECISIONS:
        best = best_against_best(t, precision)
        if best is not None:
            out.append(best)
    return out
