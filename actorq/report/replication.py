"""``actorq report RECORDS --preregistered GRID_FILE``: the section that judges a preregistered claim by the criterion
frozen in its grid file (:mod:`actorq.report.preregistration`), whichever way it falls.

Only runs whose record names the file's sha256 count; others are listed as left out. The outcome is one of:
**replicated** (every planned run counted, one machine, and the frozen statistic's interval meets the criterion),
**not replicated** (every planned run counted, one machine, and it does not), or **no outcome yet** (runs missing, or
runs from more than one machine: the design says one CPU kind), with the reason.
"""

from __future__ import annotations

import math
from pathlib import Path

from actorq.hardware import cpu_summary, machine_groups
from actorq.report import censored
from actorq.report.analysis import build_tables
from actorq.report.bootstrap import Interval
from actorq.report.comparisons import Comparison, same_setting
from actorq.report.preregistration import Preregistration, load
from actorq.report.runs import RunData, split_label


def statistic_of(c: Comparison, name: str) -> Interval:
    """The comparison's interval of the frozen statistic."""
    return {"rmst_ratio": c.rmst_ratio, "median_ratio": c.median_ratio, "aft_ratio": c.aft_ratio}[name]


def meets(block: Preregistration, interval: Interval) -> bool:
    """The frozen criterion (``lower_bound_above_1``): the interval's lower end above 1."""
    return interval.low is not None and interval.low > 1.0


def outcome(block: Preregistration, runs: list[RunData]) -> tuple[str, str, Comparison | None]:
    """(``replicated`` / ``not replicated`` / ``no outcome yet``, why, the comparison) of the counted runs."""
    planned = 2 * block.seeds
    if len(runs) < planned:
        return "no outcome yet", f"{len(runs)} of the {planned} planned runs counted", None
    machines = machine_groups([r.summary.get("hardware") or {} for r in runs])
    if len(machines) > 1:
        return (
            "no outcome yet",
            f"the runs come from {len(machines)} machines; the design says one CPU kind",
            None,
        )
    tables = build_tables(runs)
    if len(tables) != 1:
        return "no outcome yet", f"the runs are of {len(tables)} tasks, the design has one", None
    (t,) = tables
    others = [lab for lab in t.labels() if split_label(lab)[0] == block.other]
    if len(others) != 1:
        return "no outcome yet", f"{len(others)} cells of {block.other}, the design has one", None
    c = same_setting(t, others[0])
    if c.tau != block.budget_minutes * 60:
        return (
            "no outcome yet",
            f"the runs' budget is {c.tau:g} s, the design's {block.budget_minutes * 60:g} s",
            c,
        )
    found = statistic_of(c, block.statistic)
    if found.low is None:
        return "not replicated", f"the {block.statistic} has no interval", c
    verdict = "replicated" if meets(block, found) else "not replicated"
    return verdict, f"{block.statistic} {found.fmt(2, 'x', inf='inf')}, criterion {block.criterion}", c


def section(path: str | Path, runs: list[RunData]) -> list[str]:
    """The report's lines for the preregistered grid file ``path`` over the loaded ``runs``."""
    block, digest = load(path)
    counted = [r for r in runs if (r.experiment or {}).get("grid_sha256") == digest]
    left = [r.name for r in runs if r not in counted]
    commits = sorted({str((r.experiment or {}).get("grid_commit")) for r in counted})
    verdict, why, c = outcome(block, counted)
    s = [f"## Preregistered replication: {block.claim}\n"]
    s.append(
        f"Frozen in `{path}` (sha256 `{digest[:16]}`; the runs name its commit {', '.join(f'`{x}`' for x in commits) or '-'}): "
        f"threshold {block.threshold:g}; evaluator rule {block.evaluator}; stopping rule: {block.stopping_rule}; "
        f"budget {block.budget_minutes:g} min; seeds 0-{block.seeds - 1}; run order within a seed from order seed "
        f"{block.order_seed}; statistic {block.statistic} ({block.base} / {block.other}) at {block.level:.0%}; "
        f"criterion {block.criterion}; machine: {block.machine}.\n"
    )
    s.append(
        f"Counted: {len(counted)} runs made from this file"
        + (f"; left out (not made from it): {', '.join(left)}" if left else "")
        + ".\n"
    )
    if counted:
        (hw, _), *more = machine_groups([r.summary.get("hardware") or {} for r in counted])
        s.append(f"Machine: {cpu_summary(hw) if hw else 'not recorded'}{' (and others)' if more else ''}.\n")
    s.append(f"**Outcome: {verdict}** ({why}).\n")
    if c is not None:
        s.append(
            f"Beside it (not judged): Kaplan-Meier medians {_s(c.km_base)} s ({block.base}) and {_s(c.km_other)} s "
            f"({block.other}); ratio of medians {c.median_ratio.fmt(2, 'x', inf='inf')}; RMST ratio "
            f"{c.rmst_ratio.fmt(2, 'x')}; log-normal AFT ratio {c.aft_ratio.fmt(2, 'x', inf='inf')}; log-rank p "
            f"{'-' if c.logrank_p is None else f'{c.logrank_p:.3g}'}; {c.pairing}; {c.reading}.\n"
        )
        unbounded = censored.unbounded(c.median_ratio)
        s.append(f"The ratio of medians' interval is {'unbounded' if unbounded else 'bounded'}.\n")
    return s


def _s(interval: Interval) -> str:
    if interval.value is None:
        return "-"
    return "not reached" if math.isinf(interval.value) else f"{interval.value:,.0f}"
