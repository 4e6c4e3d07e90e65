"""The report's regime diagnosis and its projections to a k-times faster learner, as markdown."""

from __future__ import annotations

import math

from actorq.report import stats
from actorq.report.analysis import PROJECTION_K, TaskTable
from actorq.report.markdown import fmt, table


def regime_table(t: TaskTable) -> str:
    header = [
        "run",
        "regime",
        "learner steps/s",
        "learner allows (inserts/s)",
        "actors free (steps/s)",
        "actors measured (steps/s)",
        "capacity ratio",
        "wait share",
        "samples/insert (cfg)",
        "why",
    ]
    rows = []
    for label in t.labels():
        for m in t.runs[label]:
            r = m.regime
            rows.append(
                [
                    m.run.name,
                    r.label if r else "-",
                    fmt(m.learner_rate, 2),
                    fmt(m.learner_insert_rate, 1),
                    fmt(m.actor_free_rate, 1)
                    + (" (wall, lower bound)" if m.actor_free_source == "wall" else ""),
                    fmt(m.actor_rate, 1),
                    fmt(r.capacity_ratio if r else None, 2, "x"),
                    fmt(None if m.wait_share is None else m.wait_share * 100, 0, "%"),
                    f"{fmt(m.achieved_spi, 1)} ({fmt(float(m.run.cfg('replay', 'samples_per_insert', 0)), 0)})",
                    r.reason if r else "-",
                ]
            )
    return table(header, rows)


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
        base = proj.get("fp32")
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
