"""The report's text: markdown tables and sentences from :mod:`actorq.report.analysis` results."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np

from actorq.report import paper, stats
from actorq.report.analysis import (
    DEFAULT_CARBON_INTENSITY,
    WATTS_PER_CORE,
    RunMetrics,
    TaskTable,
)
from actorq.report.bootstrap import Interval
from actorq.report.runs import split_label
from actorq.timers import BREAKDOWN_COMPONENTS


def fmt(value: float | None, digits: int = 1, unit: str = "") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:,.{digits}f}{unit}"


def bounded(interval: Interval, digits: int = 2, unit: str = "x") -> str:
    """An estimate with its censoring bound and no interval: ``">= 1.18x"``, ``"1.50x"``, ``"-"`` (undefined)."""
    if interval.value is None:
        return "-"
    if math.isinf(interval.value):
        return "inf"
    return f"{interval.bound} {interval.value:,.{digits}f}{unit}".strip()


def _range(values: list[float]) -> str:
    if not values:
        return "-"
    lo, hi = min(values), max(values)
    return f"{lo:.2f}x" if lo == hi else f"{lo:.2f}-{hi:.2f}x"


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def definitions(k: int, fraction: float, statistic: str) -> str:
    return (
        f"- **Reward achieved** (the paper's Table 2 criterion): {fraction:.0%} of the best fp32 return, where "
        f"the best fp32 return is the highest {statistic} of {k} consecutive evaluations reached by any fp32 seed "
        f"(for negative returns: {1 - fraction:.0%} worse than the best). The best single evaluation is shown "
        "beside it; it is inflated by evaluation noise, so the threshold does not use it.\n"
        f"- **Time to reward**: seconds from the launcher's start (before the first role starts, so start-up "
        f"counts) to the first evaluation at which the {statistic} of the last {k} evaluations is at or above "
        "the threshold. Runs that never get there are censored: they count as slower than every run that did, "
        "and their median (the ceil(n/2)-th fastest seed) exists only when at least half the seeds reached the "
        "reward. Spreads are min-max over the seeds that reached it; (r/n) counts them.\n"
        "- **Speedup**: median fp32 time / median time of the precision. Where a median seed never reached the "
        "reward, its last evaluation time bounds its time, so the speedup is a bound (>= when fp32 never got "
        "there, <= when the precision did not). The per-seed range pairs runs of the same seed (same "
        "environment seeds, run back to back) where both reached the reward.\n"
        "- Evaluation returns are those of the learner's fp32 policy (greedy), as in the paper."
    )


def time_table(t: TaskTable) -> str:
    row = paper.TABLE2.get(t.task)
    header = [
        "precision",
        "runs",
        "time to reward (s)",
        "actor steps to reward",
        "speedup vs fp32",
        "per-seed speedups (both reached)",
        "final return",
        "best eval",
    ]
    if row:
        header += ["paper time (s)", "paper speedup"]
    rows = []
    for label in t.labels():
        runs = t.runs[label]
        _, paired = t.speedup(label)
        cells = [
            label,
            str(len(runs)),
            t.summary(label, "t_reach", censored=True).fmt(0),
            t.summary(label, "steps_reach", censored=True).fmt(0),
            bounded(t.speedup_ci(label)),
            _range(paired) if label != "fp32" else "-",
            t.summary(label, "final_return").fmt(1),
            fmt(max((m.best_raw for m in runs if m.best_raw is not None), default=None)),
        ]
        if row:
            cells += [fmt(row.time_s(label), 0), fmt(row.speedup(label), 2, "x")]
        rows.append(cells)
    return table(header, rows)


def untrained_note(t: TaskTable) -> str:
    """Where the untrained policy stands against the threshold; a warning when it already reaches it."""
    untrained = t.untrained()
    if untrained is None or t.threshold is None:
        return ""
    if not t.degenerate:
        return (
            f"The untrained policy (evaluations before the learner's first update, smoothed as the threshold is) "
            f"scores up to {fmt(untrained)}, below the threshold: reaching it takes learning."
        )
    above = t.starting_above()
    total = sum(len(ms) for ms in t.runs.values())
    named = ", ".join(f"{label} seed {seed} ({fmt(score)})" for label, seed, score in above[:5])
    more = f" and {len(above) - 5} more" if len(above) > 5 else ""
    # Whether most runs start above it (fp32's best is barely past an untrained policy) or a few lucky initial
    # networks do (the other runs' times still measure learning) calls for different remedies.
    if 2 * len(above) > total:
        why = (
            "Most runs start there: fp32's best is barely past what an untrained policy scores; run longer "
            "(`--max-minutes`) so fp32 learns past it."
        )
    else:
        why = (
            "A few initial networks were lucky; use seeded initial networks (the same one for every precision of a "
            "seed) or a budget long enough that fp32 learns well past them."
        )
    return (
        f"**Degenerate threshold: the untrained policy already scores {fmt(untrained)} >= {fmt(t.threshold)}** "
        "(evaluations before the learner's first update, smoothed as the threshold is). "
        f"{len(above)} of {total} runs start at or above it: {named}{more}. A time to this threshold does not "
        f"measure learning, so no speed-up is taken from it (evaluations before the first update never count as "
        f"reaching it, but a trained policy may still score what an untrained one did). {why}"
    )


def _regimes(t: TaskTable, label: str) -> tuple[str, str]:
    """The regimes of ``label``'s runs and of the fp32 runs it is compared with, each with its count, and the regime
    of more than half of ``label``'s runs ("mixed" when none is): a faster precision can move a cell from actor-bound
    to learner-bound, so one regime counted over every run of the task misdescribes both sides."""
    parts = []
    for lab in (t.base_of(label), label):
        counts = Counter(m.regime.label for m in t.runs.get(lab, []) if m.regime).most_common()
        # Every regime with its count: a cell split 5/5 is not "actor-bound in 5 of 10 runs" alone.
        each = ", ".join(f"{regime} in {n}" for regime, n in counts)
        parts.append(
            f"{lab} {each} of {sum(n for _, n in counts)} runs" if counts else f"{lab} of unknown regime"
        )
    # ``counts`` are ``label``'s (the loop ends on it). A tie names no regime: run order must not pick the reading.
    total = sum(n for _, n in counts)
    return " and ".join(parts), counts[0][0] if counts and 2 * counts[0][1] > total else "mixed"


def paper_comparison(t: TaskTable) -> str:
    """Sentences comparing our speedups with the paper's, naming the likely reason where they differ."""
    row = paper.TABLE2.get(t.task)
    if row is None:
        return "The paper's Table 2 has no row for this task."
    out = [
        f"Paper ({row.task}): reward {row.reward:g}, fp32 {row.fp32_s:g} s, int8 {row.int8_s:g} s "
        f"({row.int8_speedup:g}x), fp16 {row.fp16_s:g} s ({row.fp16_speedup:g}x); setup: {paper.PAPER_SETUP}."
    ]
    if row.note:
        out.append(f"Note: {row.note}.")
    if t.threshold is not None:
        out.append(f"Our reward threshold is {t.threshold:.1f} (paper: {row.reward:g}).")
    for precision in ("fp16", "int8"):
        # In a sweep, the precision's best cell (compared with fp32 of the same cell).
        label = precision if precision in t.runs else t.best_cell(precision)
        theirs = row.speedup(precision)
        if label is None or theirs is None:
            continue
        interval = t.speedup_ci(label)
        regimes, mostly = _regimes(t, label)
        ours = interval.value
        if t.degenerate:
            out.append(
                f"{label}: no speed-up here ({theirs:g}x in the paper): our threshold is at or below an untrained "
                "policy's score (see above), so reaching it does not measure learning; the budget projection below "
                "compares them without a threshold."
            )
        elif ours is None or math.isinf(ours):
            out.append(
                f"{label}: no speedup measurable here (the median seed of fp32 or {label} did not reach the "
                f"reward); the paper reports {theirs:g}x."
            )
        elif interval.bound:
            out.append(
                f"{label}: {bounded(interval)} here vs {theirs:g}x in the paper: only a bound, because the median "
                f"seed of {'fp32' if interval.bound == '>=' else label} never reached the reward (its runs' last "
                "evaluations bound the time it would have taken)."
            )
        elif abs(ours - theirs) / theirs <= 0.25:
            out.append(f"{label}: {ours:.2f}x here vs {theirs:g}x in the paper: consistent.")
        elif ours < theirs and mostly == "learner-bound":
            out.append(
                f"{label}: {ours:.2f}x here vs {theirs:g}x in the paper. Why they differ: here {regimes} "
                "(see the regime diagnosis): the CPU learner, not the actors, sets the pace, so "
                "faster actors mostly wait on the samples-per-insert rate limiter, whereas the paper's V100 "
                "learner outpaced its 4 actors. The projection below estimates what a faster learner would expose."
            )
        else:
            out.append(
                f"{label}: {ours:.2f}x here vs {theirs:g}x in the paper ({'less' if ours < theirs else 'more'} "
                f"speedup). Here {regimes}, on different hardware (no GPU, shared CPU cores; "
                f"see the regime diagnosis and breakdown), and the speed-up's 95% interval over "
                f"{interval.n} runs ({interval.fmt(2, 'x', inf='inf')}) shows how much of the gap is noise."
            )
    return " ".join(out)


def breakdown_table(t: TaskTable) -> str:
    header = ["precision", *(f"{c} ms" for c in BREAKDOWN_COMPONENTS), "total ms/step", "rate-limiter wait"]
    rows = []
    for label in t.labels():
        runs = [m for m in t.runs[label] if m.breakdown]
        if not runs:
            continue
        med = {c: float(np.median([m.breakdown[c] for m in runs])) * 1e3 for c in BREAKDOWN_COMPONENTS}
        wait = stats.plain_median([m.wait_share for m in runs]).median
        rows.append(
            [
                label,
                *(fmt(med[c], 3) for c in BREAKDOWN_COMPONENTS),
                fmt(sum(med.values()), 3),
                fmt(None if wait is None else wait * 100, 0, "%"),
            ]
        )
    return table(header, rows) if rows else "_No actor metrics._"


def broadcast_table(t: TaskTable) -> str:
    header = [
        "precision",
        "comm bits",
        "bytes/broadcast",
        "vs fp32",
        "broadcasts received (min actor)",
        "pull ms",
        "decode ms",
        "apply ms",
        "staleness (learner steps, median)",
    ]
    rows = []
    for label in t.labels():
        runs = t.runs[label]
        base = stats.plain_median([m.message_bytes for m in t.runs.get(t.base_of(label), [])]).median
        size = stats.plain_median([m.message_bytes for m in runs]).median
        bits = sorted({m.comm_bits for m in runs if m.comm_bits})
        cost = {
            c: stats.plain_median([m.broadcast_cost.get(c) for m in runs]).median
            for c in ("pull", "decode", "apply")
        }
        rows.append(
            [
                label,
                "/".join(map(str, bits)) or "-",
                fmt(size, 0),
                fmt(stats.ratio(size, base), 2, "x"),
                fmt(stats.plain_median([m.broadcasts for m in runs]).median, 0),
                *(fmt(None if cost[c] is None else cost[c] * 1e3, 1) for c in ("pull", "decode", "apply")),
                fmt(stats.plain_median([m.staleness for m in runs]).median, 0),
            ]
        )
    return table(header, rows)


def energy_table(t: TaskTable) -> tuple[str, str]:
    header = [
        "precision",
        "CPU s (run)",
        "est. Wh (run)",
        "est. Wh to reward",
        "est. g CO2 to reward",
        "codecarbon Wh (run, machine-wide)",
        "codecarbon g CO2 (run)",
        "hardware counters",
    ]
    rows, to_reach, run_total = [], {}, {}
    for label in t.labels():
        runs = t.runs[label]
        cc = [m.codecarbon for m in runs if m.codecarbon.get("status") == "ok"]
        hw = {
            bool((m.run.summary.get("energy") or {}).get("hardware_counters"))
            for m in runs
            if m.run.summary.get("energy")
        }
        to_reach[label] = stats.censored_median([m.energy_kwh(True) for m in runs]).median
        run_total[label] = stats.plain_median([m.energy_kwh() for m in runs]).median
        rows.append(
            [
                label,
                fmt(stats.plain_median([m.cpu_seconds for m in runs]).median, 0),
                fmt(_scaled(run_total[label], 1e3), 2),
                fmt(_scaled(to_reach[label], 1e3), 2),
                fmt(_scaled(stats.censored_median([m.co2_kg(True) for m in runs]).median, 1e3), 2),
                fmt(float(np.median([c["energy_kwh"] for c in cc])) * 1e3, 2) if cc else "unavailable",
                fmt(float(np.median([c["emissions_kg"] for c in cc])) * 1e3, 2) if cc else "unavailable",
                "/".join("yes" if h else "no (estimates)" for h in sorted(hw)) or "-",
            ]
        )
    lo, hi = paper.BLOG_CARBON_RATIO
    ratios = []
    for cell in sorted({split_label(label)[1] for label in t.labels()}):
        # Each sweep cell's int8 against its own fp32 (labels carry the cell: "int8 [spi=8]").
        int8 = "int8" + cell
        reach = stats.ratio(to_reach.get(t.base_of(int8)), to_reach.get(int8))
        run = stats.ratio(run_total.get(t.base_of(int8)), run_total.get(int8))
        ratios.append(
            f"{cell.strip() + ': ' if cell else ''}{fmt(reach, 2, 'x')} to the reward, {fmt(run, 2, 'x')} per run"
        )
    text = (
        f"fp32/int8 energy ratio (estimate, median runs): {'; '.join(ratios)} "
        "(runs with a fixed time budget use about the same energy per run, so "
        f"the ratio to the reward is the one comparable with the blog's fp32/int8 carbon ratio of {lo}-{hi}x). "
        f"Estimate = CPU seconds of all the run's processes x {WATTS_PER_CORE:.2f} W per busy core "
        "(Xeon Platinum 8580 TDP 350 W / 60 cores; idle and DRAM power excluded), CO2 at the run's codecarbon "
        f"carbon intensity (default {DEFAULT_CARBON_INTENSITY} kg/kWh, USA). codecarbon's own figures are "
        "machine-wide (other tenants' load included) and, without RAPL counters, are themselves TDP-based "
        "estimates."
    )
    return table(header, rows), text


def bench_actors_table(rows: list[dict[str, Any]]) -> str:
    header = [
        "variant",
        "period K",
        "actors",
        "env steps/s per actor [min-max]",
        "x baseline",
        "ms/step",
        *(f"{c}" for c in (*BREAKDOWN_COMPONENTS, "other")),
        "MB/broadcast",
        "ms/broadcast",
    ]
    out = []
    for r in rows:
        ms = r["ms_per_step"]
        out.append(
            [
                r["variant"],
                str(r["update_period"]),
                str(r["actors"]),
                f"{r['steps_per_s']:.1f} [{r['steps_per_s_min']:.1f}-{r['steps_per_s_max']:.1f}]",
                fmt(r.get("speedup"), 2, "x"),
                fmt(sum(ms.values()), 3),
                *(fmt(ms.get(c, 0.0), 3) for c in (*BREAKDOWN_COMPONENTS, "other")),
                fmt(r["message_bytes"] / 1e6, 2),
                fmt(r.get("ms_per_broadcast"), 1),
            ]
        )
    return table(header, out)


def sweep_table(rows: list[dict[str, Any]]) -> str:
    header = [
        "variant",
        "period K",
        "env steps/s per actor",
        "pulls/s",
        "mean weight age (s)",
        "lag @ learner rate (learner steps)",
    ]
    out = [
        [
            r["variant"],
            str(r["update_period"]),
            fmt(r["steps_per_s"], 1),
            fmt(r["pulls_per_s"], 2),
            fmt(r["weight_age_s"], 2),
            fmt(r.get("weight_age_learner_steps"), 1),
        ]
        for r in rows
    ]
    return table(header, out)


def run_list(runs: list[RunMetrics]) -> str:
    header = ["run", "label", "seed", "exit", "wall (s)", "actor steps", "learner steps", "evaluations"]
    rows = [
        [
            m.run.name,
            m.label,
            str(m.seed),
            str(m.run.summary.get("exit")),
            fmt(m.wall, 0),
            fmt(m.actor_steps, 0),
            fmt(float(m.run.summary.get("learner_steps") or 0), 0),
            str(m.run.eval_return.size),
        ]
        for m in runs
    ]
    return table(header, rows)
