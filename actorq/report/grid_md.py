"""The paper-style Table 2 with confidence intervals, best-against-best, throughput and the measured regime."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from actorq.report import bootstrap, coverage, intervals, paper, regime, stats
from actorq.report.analysis import RunMetrics, TaskTable
from actorq.report.comparisons import best_against_best
from actorq.report.disturbance import share_cell
from actorq.report.markdown import fmt, table
from actorq.report.paired import AXES
from actorq.report.runs import split_label
from actorq.status import ROLE_NAMES

ROLES = tuple("actors" if role == "actor" else role for role in ROLE_NAMES)
"""The CPU table's columns: each role, the actors summed over their processes."""


def _pct(share: float | None) -> str:
    return fmt(None if share is None else share * 100, 0, "%")


def _spread(summary: stats.SeedSummary, digits: int) -> str:
    """``"4.80 [4.10-5.20] (5/5)"``: median [min-max] (runs with the figure/runs); "-" without any."""
    if summary.median is None:
        return "-"
    return f"{summary.median:,.{digits}f} [{summary.low:,.{digits}f}-{summary.high:,.{digits}f}] ({summary.n_reached}/{summary.n})"


def _blocked(share: float | None, seconds: float | None) -> str:
    if share is None:
        return "-"
    return f"{_pct(share)}, {fmt(None if seconds is None else share * seconds, 0)}"


def ci_table(t: TaskTable) -> str:
    """Per label (precision, sweep cell): time to threshold, speed-up, final and best reward and the probability
    of improving on fp32, with 95% CIs (their methods: :func:`ci_note`)."""
    header = [
        "precision",
        "runs",
        "time to threshold (s), Kaplan-Meier median [95% CI]",
        "speed-up vs fp32 [95% CI]",
        "predicted speed-up (model)",
        "learner steps to threshold (median)",
        "final reward, IQM [95% CI]",
        "best reward, IQM [95% CI]",
        "P(final reward > fp32's) [95% CI]",
    ]
    if t.plans:
        header.insert(header.index("predicted speed-up (model)") + 1, "C from (model)")
    row = paper.TABLE2.get(t.task)
    if row:
        header += ["paper time (s)", "paper speed-up"]
    rows = []
    for label in t.labels():
        runs = t.runs[label]
        base = split_label(label)[0] == "fp32"
        head = split_label(label)[0].split("/")[0]
        cells = [
            label,
            str(len(runs)),
            km_cell(t.time_ci(label))
            if t.threshold is not None
            else "no threshold (no fp32 run has k evaluations)",
            _speed_cell(t, None if base else t.speedup_ci(label)),
            fmt(t.predicted_speedup(label), 2, "x") if not base else "-",
            t.summary(label, "learner_steps_reach", censored=True).fmt(0),
            intervals.iqm_ci([m.final_return for m in runs]).fmt(1),
            intervals.iqm_ci([m.best_smoothed for m in runs]).fmt(1),
            "-" if base else t.improvement_ci(label).fmt(2),
        ]
        if t.plans:
            cells.insert(5, t.capacity_from(label))
        if row:
            cells += [fmt(row.time_s(head), 0), fmt(row.speedup(head), 2, "x")]
        rows.append(cells)
    return table(header, rows)


def km_cell(interval: bootstrap.Interval) -> str:
    """``"412 [380, 460] (5/5 reached)"``; a median Kaplan-Meier cannot give (fewer than half reached the
    threshold) reads ``"not reached (2/5 reached) [637, not reached]"``, never a number."""
    if interval.value is None:
        return "-"

    def one(x: float | None) -> str:
        return "not reached" if x is None or math.isinf(x) else f"{x:,.0f}"

    ci = f"[{one(interval.low)}, {one(interval.high)}]" if interval.low is not None else "[CI undefined]"
    reached = f"({interval.n_reached}/{interval.n} reached)"
    if math.isinf(interval.value):
        return f"not reached {reached} {ci}"
    return f"{interval.value:,.0f} {ci} {reached}"


def _speed_cell(t: TaskTable, speed: bootstrap.Interval | None) -> str:
    if speed is None:
        return "-"
    if t.degenerate:
        return "not used: threshold at or below an untrained score"
    return speed.fmt(2, "x", inf="inf") + (" **faster**" if is_faster(speed) else "")


def ci_note(t: TaskTable) -> str:
    """What each interval of :func:`ci_table` is, and its real coverage at the table's number of seeds."""
    n = max((len(runs) for runs in t.runs.values()), default=0)
    methods = [
        ("time to threshold", "km"),
        ("speed-up", "speedup"),
        ("final and best reward", "iqm"),
        ("P(final reward > fp32's)", "improvement"),
        ("paired reward differences (below)", "mean"),
    ]
    lines = "\n".join(f"- {what}: {coverage.note(method, n)}." for what, method in methods)
    plan = f"\n\n{PLAN_NOTE}" if t.plans else ""
    return f"{CI_NOTE}{plan}\n\nThe intervals, their methods and their real coverage at {n} seeds:\n\n{lines}"


PLAN_NOTE = (
    "C from (model): where the learner's capacity C behind the cell's predicted speed-up (its runs' and its fp32 "
    "cell's) was measured: `plan FILE, MACHINE` (`actorq report --plan`: `actorq plan` timed the learner, never "
    "starved, beside actors of the run's precision and envs per actor on the run's cores, and those actors' S_p, "
    "on this machine), or the never-starved runs it is the median of. A run whose cores the plan did not time "
    "keeps C from the runs."
)


CI_NOTE = (
    "Time to threshold: the Kaplan-Meier median over seeds (lifelines; the first time the estimated share of runs "
    "still short of the threshold is at or below one half) with lifelines' 95% interval (where the survival "
    "function's pointwise 95% band crosses one half). A run that never reached the threshold is censored at the "
    "time it was last seen short of it, not dropped; where fewer than half the runs reached it the median is "
    "'not reached' (with how many did) and an interval's upper end 'not reached' means the band never fell to one "
    "half; runs censored early (stopped by a step budget, or cut off part-way by a session's end and counted, before "
    "the others reached it) count only while they ran, so a Kaplan-Meier median can exist with fewer than half the "
    "runs reaching the threshold. Speed-up = median fp32 time / median time of the precision in the same sweep "
    "cell (censored medians: an "
    "unreached run counts as slower than every run that did, and the median is the ceil(n/2)-th fastest run, the "
    "time column's Kaplan-Meier median where no run was censored before it), with a hand-written percentile "
    "bootstrap interval "
    f"({bootstrap.RESAMPLES:,} resamples; no package gives one for a ratio of censored medians), resampled by seed "
    "when both ran the same seeds in one cell (a seed's runs there ran back to back on one machine) and run by run "
    "otherwise; it is unbounded (an end at 0x or inf) whenever censoring leaves a resample's median unreached, and "
    "the finite ratios below (RMST, log-normal AFT) are read instead. An unreached run "
    "bounds a speed-up by the time it was last seen short of the threshold: '>= 1.09x' means fp32's median run had "
    "not reached it by 1.09 times the precision's median time, and the interval's upper end is then unbounded. A "
    "speed-up is claimed (**faster**) only where the interval's lower bound is above 1, and never from a threshold at "
    "or below some run's untrained score. Predicted speed-up: the regime model's ratio of median delivered env "
    "steps/s, min(S_p, C / spi) (see the regime table below); it assumes reward per env step does not depend on "
    "precision. Final reward: mean of the last k evaluations of each run; best reward: each run's best mean of k "
    "consecutive evaluations (a run cut off part-way by a session's end has neither: it stopped mid-learning, at "
    "neither its threshold nor its budget's end; '(9/10)' after an interval counts the runs it covers, and since a "
    "cut hits long runs more often, the runs left lean towards the fast ones); over seeds, their interquartile mean "
    "(IQM: the mean of the middle half, rliable's "
    "25% trimmed mean; of 5 seeds, the middle 3) with rliable's stratified bootstrap interval "
    f"({intervals.REPS:,} resamples; one task per table, so the score matrix is seeds x 1 and the stratified "
    "bootstrap resamples seeds). P(final reward > fp32's): rliable's probability of improvement, the chance that a "
    "run of the precision ends with more reward than a run of fp32 in the same cell (ties count half; 0.5: no "
    "difference), with rliable's interval (each group resampled)."
)


def best_vs_best(t: TaskTable) -> str:
    """Each precision at its own best sweep cell (lowest median time to threshold), compared with fp32's best."""
    cells = {p: t.best_cell(p) for p in ("fp32", "fp16", "int8")}
    if len({split_label(lab)[1] for lab in t.runs}) < 2:
        return ""
    lines = [
        "Each precision at its own best setting (the sweep cell with its lowest median time to threshold):"
    ]
    base = cells.get("fp32")
    for precision, cell in cells.items():
        if cell is None:
            lines.append(
                f"- {precision}: no sweep cell has a median time to threshold (most seeds never reached it)"
            )
            continue
        text = f"- {precision}: `{cell}`, {km_cell(t.time_ci(cell))} s"
        if precision != "fp32" and base is not None and (c := best_against_best(t, precision)) is not None:
            text += f"; speed-up vs fp32's best (`{base}`): {c.median_ratio.fmt(2, 'x', inf='inf')}"
        lines.append(text)
    lines.append(
        "Picking each precision's best cell from the same runs favours every precision alike (the minimum of noisy "
        "medians is biased low), so the interval chooses each precision's best cell again inside every resample, "
        "with the cells resampled apart (unpaired: two cells share only their seed numbers); read the per-cell rows "
        "above for the unselected comparison."
    )
    if t.cell_differences:
        diffs = "; ".join(f"`{k}`: {', '.join(v)}" for k, v in t.cell_differences.items())
        lines.append(
            f"**Caveat: the cells differ in more than their sweep** ({diffs}; one value per cell, so the per-cell "
            "rows are not affected): a speed-up between two cells includes it, e.g. a shorter budget censors more "
            "runs and can leave a cell without a median."
        )
    return "\n".join(lines)


def throughput_table(t: TaskTable) -> str:
    """Learner steps/s, env steps/s and CPU seconds per role: median [min-max] over seeds."""
    header = [
        "precision",
        "learner steps/s",
        "env steps/s",
        *(f"CPU s {r}" for r in ROLES),
        "CPU s all processes",
    ]
    rows = []
    for label in t.labels():
        runs = t.runs[label]
        rows.append(
            [
                label,
                _spread(stats.plain_median([m.learner_steps_per_s for m in runs]), 2),
                _spread(stats.plain_median([m.actor_rate for m in runs]), 1),
                *(_spread(stats.plain_median([m.role_cpu_seconds.get(r) for m in runs]), 0) for r in ROLES),
                _spread(stats.plain_median([m.cpu_seconds for m in runs]), 0),
            ]
        )
    return table(header, rows)


THROUGHPUT_NOTE = (
    "Rates over the acting time (first experience insert to the run's end); median [min-max] (runs with the "
    "figure/runs). CPU seconds per role from each role's last status record (all actors together; '-' where roles "
    "shared a process, as with the in-process launcher)."
)


def blocked_table(runs: list[RunMetrics]) -> str:
    """Per run: the shares of acting time the rate limiter blocked the learner and the actors, and the regime."""
    header = [
        "run",
        "label",
        "seed",
        "acting s",
        "learner blocked (share, s)",
        "actors blocked (share, s)",
        "regime",
        "time to threshold (s)",
        "others' CPU (share of machine)",
    ]
    rows = [
        [
            m.run.name,
            m.label,
            str(m.seed),
            fmt(m.acting_seconds, 0),
            _blocked(m.learner_blocked_share, m.acting_seconds),
            _blocked(m.actor_blocked_share, m.acting_seconds),
            m.regime.label if m.regime else "-",
            "not reached" if m.t_reach is None else fmt(m.t_reach, 0),
            share_cell(m.outside_share, m.outside_source),
        ]
        for m in runs
    ]
    return table(header, rows)


BLOCKED_NOTE = (
    "Measured from the replay server's snapshots of its samples-per-insert rate limiter (every `log_period_s` "
    "after acting began): a snapshot within one learner batch plus one insert of the limiter's lower bound means the "
    "learner was blocked waiting for experience, near the upper bound the actors were blocked waiting for the "
    "learner; the share of snapshots estimates the share of time. The regime (one rule, "
    "`actorq/report/regime.py`): **learner-bound**: actors blocked at least "
    f"{regime.BLOCKED_SHARE:.0%} of the time (faster actors would only wait longer); **actor-bound**: the learner "
    "blocked at least that share (faster actors shorten the run); **balanced** otherwise. Others' CPU: the share "
    "of the machine's CPU that processes other than the run's used while it ran (measured by the launcher; "
    "'(codecarbon)': estimated from codecarbon's machine-wide load for runs made before that), bold above the "
    "limit where a run's speed no longer measures its settings."
)


def regime_counts(t: TaskTable) -> str:
    """``"fp32: 5 learner-bound; int8: 3 learner-bound, 2 balanced"``."""
    parts = []
    for label in t.labels():
        counts = Counter(m.regime.label if m.regime else "unknown" for m in t.runs[label])
        parts.append(f"{label}: " + ", ".join(f"{n} {r}" for r, n in counts.most_common()))
    return "; ".join(parts)


def is_faster(interval: bootstrap.Interval) -> bool:
    """The claim rule: a speed-up only where the CI's lower bound is above 1."""
    return interval.low is not None and interval.low > 1.0


def paired_title(axis: str) -> str:
    """The section heading of :func:`paired_table`."""
    what = f"at equal {AXES[axis]}" if axis != "run" else "over whole runs"
    return f"Reward {what}, paired by seed"


def paired_table(t: TaskTable, axis: str) -> str:
    """Per non-fp32 label: its reward against fp32's of the same cell and seed over the same steps of ``axis``;
    empty when no label pairs with fp32."""
    header = [
        "precision",
        "seeds",
        f"{AXES[axis]} compared (median)" if axis != "run" else "cut",
        "mean return over them: fp32 vs precision",
        "difference per seed, mean [95% CI] (seeds); seeds below fp32",
        f"final (last {t.window}) at them: difference [95% CI] (seeds); seeds below",
    ]
    rows = []
    for label in t.labels():
        if split_label(label)[0] == "fp32":
            continue
        p = t.paired_reward(label, axis)
        if p is None:
            continue
        n = len(p.seeds)
        rows.append(
            [
                label,
                str(n),
                fmt(stats.plain_median(p.upto).median, 0) if axis != "run" else "none",
                f"{fmt(float(np.mean(p.base_mean)), 1)} vs {fmt(float(np.mean(p.mean)), 1)}",
                f"{p.difference('mean').fmt(1)}; {p.below('mean')} of {n}",
                f"{p.difference('final').fmt(1)}; {p.below('final')} of {n}",
            ]
        )
    return table(header, rows) if rows else ""


PAIRED_NOTE = (
    "Each seed's run against fp32's run of the same seed and sweep cell, both cut at the smaller of their last "
    "evaluations' step counts (so neither is credited with steps the other did not make): the mean of the "
    "evaluations up to there and the mean of the last k of them ('whole runs': nothing cut, each run as its budget "
    "left it). The predicted speed-up assumes reward per env step "
    "does not depend on precision: an interval of the difference at equal env steps that holds 0 is consistent "
    "with it; one that excludes 0 says the prediction misses by that much. (Runs whose networks were not seeded "
    "start from different policies, which the per-seed difference then includes.)"
)
