"""The report's regime table and its projections to a k-times faster learner, as markdown."""

from __future__ import annotations

import math

from actorq.plan.regime import MARGIN
from actorq.report import regime, stats
from actorq.report.analysis import PROJECTION_K, TaskTable
from actorq.report.markdown import fmt, table
from actorq.report.regime import Estimate


def _estimate(e: Estimate | None, digits: int) -> str:
    return "-" if e is None else f"{fmt(e.value, digits)} ({e.source})"


def _pct(share: float | None) -> str:
    return fmt(None if share is None else share * 100, 0, "%")


def regime_table(t: TaskTable) -> str:
    """Per run: its label, the blocked shares it is read from, the measured rates and the model's parameters."""
    header = [
        "run",
        "regime",
        "learner / actors blocked",
        "env steps/s (measured)",
        "learner samples/s (measured)",
        "S_p env steps/s (from)",
        "C samples/s (from)",
        "spi",
        "model: min(S_p, C/spi)",
        "model's regime",
    ]
    rows = []
    for label in t.labels():
        for m in t.runs[label]:
            r = m.regime
            if r is None:
                continue
            agree = {True: "", False: " (**differs**)", None: ""}[r.agrees]
            rows.append(
                [
                    m.run.name,
                    r.label + (" (model)" if r.label_source == "model" else ""),
                    f"{_pct(m.learner_blocked_share)} / {_pct(m.actor_blocked_share)}",
                    fmt(r.rates.env_steps_per_s, 1),
                    fmt(r.rates.learner_samples_per_s, 0),
                    _estimate(r.supply, 0),
                    _estimate(r.capacity, 0),
                    fmt(r.rates.samples_per_insert, 2),
                    fmt(r.delivered, 0),
                    r.predicted + agree,
                ]
            )
    return table(header, rows)


REGIME_MODEL = (
    "One model (`actorq/report/regime.py`): the learner consumes at most C samples/s, the actors of precision p "
    "produce at most S_p env steps/s, and the samples-per-insert limiter lets through min(S_p, C / spi) env "
    "steps/s; the predicted time-to-threshold speed-up of p over fp32 is the ratio of those rates, assuming reward "
    "per env step does not depend on precision (tested below: reward at equal env steps). **regime** says which "
    "term was the smaller one in the run itself, read from which side the limiter held back (see the blocked "
    "table); '(model)' where the run has no limiter snapshots. S_p: the actors' env steps per second of their own "
    "busy time, limiter waits taken out. C: learner samples/s (steps/s x batch) of a run whose learner was never "
    f"starved (held back < {regime.STARVED_SHARE:.0%} of the acting time): the run itself, else the median of "
    "such runs of the task on the same machine (a starved learner's own rate is what the actors allowed, not its "
    f"capacity). The model's regime: learner-bound when S_p exceeds C/spi by {MARGIN}x, actor-bound when "
    "C/spi exceeds S_p by that, balanced between; **differs** marks runs where it is not what the run did. On a "
    "machine where learner and actors share cores they take CPU from each other, so C and S_p measured apart "
    "overstate what each gets together, and the model's delivered rate overstates the measured one."
)


PROJECTION_MODEL = (
    "Model: `T(k) = T_start + N / min(A, k * L)`. N = actor steps at which the run reached the reward (measured); "
    "A = the actors' unthrottled throughput, all actors together: each actor's env steps per CPU second of its "
    "process (rate-limiter waits take no CPU; each actor on a core of its own, as in the paper) where the actors "
    "recorded CPU time, else their per-step wall time with rate-limiter waits taken out (wait = adder time beyond "
    "the adder's cheapest measured interval: a lower bound on A when the limiter engaged in every interval, as it "
    "does in learner-bound runs); L = the inserts/s the "
    "measured learner allows (learner steps/s x batch / samples-per-insert); T_start = time to the first "
    "experience insert (measured). Assumptions: the same N (sample efficiency unchanged by a faster learner "
    "at the same samples-per-insert); A as measured on this machine; evaluation, publishing and "
    "quantization costs unchanged. k = inf is the actors' own limit. `T(1)` beside the measured time shows how "
    "well the model fits."
)


def projection_table(t: TaskTable, budget: bool = False) -> str:
    """Projected times per precision; ``budget``: to the runs' actor-step budget instead of to the reward."""
    header = [
        "precision",
        "measured (s)",
        *(f"k={'inf' if math.isinf(k) else int(k)} (s)" for k in PROJECTION_K),
        *(f"speedup vs fp32 @k={'inf' if math.isinf(k) else int(k)}" for k in PROJECTION_K[1:]),
    ]
    proj = {
        lab: [
            stats.censored_median([m.projected(k, budget) for m in t.runs[lab]]).median for k in PROJECTION_K
        ]
        for lab in t.labels()
    }
    measured = "t_budget" if budget else "t_reach"
    rows = []
    for label in t.labels():
        # fp32 of the label's own sweep cell: a sweep's labels carry the cell ("fp32 [spi=8]"), never plain "fp32".
        base = proj.get(t.base_of(label))
        speed = [stats.ratio(base[i], proj[label][i]) if base else None for i in range(1, len(PROJECTION_K))]
        rows.append(
            [
                label,
                fmt(t.summary(label, measured, censored=True).median, 0),
                *(fmt(v, 0) for v in proj[label]),
                *(fmt(s, 2, "x") for s in speed),
            ]
        )
    return table(header, rows)


def budget_steps(t: TaskTable) -> float | None:
    """The actor-step budget shared by every run of the task (None when they differ or have none)."""
    budgets = {m.budget_steps for ms in t.runs.values() for m in ms}
    return budgets.pop() if len(budgets) == 1 else None


BUDGET_PROJECTION = (
    "Same model with N = the runs' actor-step budget (`max_actor_steps`; our configs set it to the paper's "
    "steps trained) instead of the steps to reward: how long training that many steps takes. It does not depend "
    "on the reward threshold, so it stays meaningful when the threshold is degenerate. Measured: the wall time "
    "of runs that ended on that budget (`-` when they ran out of minutes first)."
)
