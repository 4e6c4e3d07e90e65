"""From runs to the report's numbers: per task and label (precision and sweep cell) over seeds.

Per-run measurements are :mod:`actorq.report.measure`'s; this module groups them into tables, finds the threshold
and compares labels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from actorq.config import ConfigError, ExperimentConfig, flat_keys, schema_defaults
from actorq.errors import UsageError
from actorq.plan.regime import predicted_speedup
from actorq.report import bootstrap, intervals, stats
from actorq.report.measure import (
    DEFAULT_CARBON_INTENSITY,
    PROJECTION_K,
    WATTS_PER_CORE,
    RunMetrics,
    measure_run,
    rates,
)
from actorq.report.paired import PairedReward, paired_reward
from actorq.report.pairing import pairing
from actorq.report.plan_input import Plan, given_for, memory_note
from actorq.report.regime import assess
from actorq.report.runs import RunData, split_label

__all__ = [
    "DEFAULT_CARBON_INTENSITY",
    "PROJECTION_K",
    "WATTS_PER_CORE",
    "RunMetrics",
    "TaskTable",
    "build_tables",
    "config_differences",
    "measure_run",
]


@dataclass
class TaskTable:
    """One task: its threshold and the per-label (precision) runs and summaries."""

    task: str
    best: float | None
    best_raw: float | None
    threshold: float | None
    threshold_source: str
    runs: dict[str, list[RunMetrics]]
    config_differences: dict[str, list[str]] = field(default_factory=dict)
    """Config keys (other than precision, wire bits, seed and the swept keys) whose values differ between the runs
    of one sweep cell: a caveat for every comparison in that cell."""
    cell_differences: dict[str, list[str]] = field(default_factory=dict)
    """Config keys (other than the swept ones) with one value in each sweep cell but not the same in all (e.g. each
    experiment's own budget): a caveat for comparisons across cells (best against best) only."""
    window: int = stats.DEFAULT_WINDOW
    """k, the evaluations the threshold smooths over (and the final reward averages)."""
    plans: tuple[str, ...] = ()
    """The plans (``actorq report --plan``) of this task, by name: the tables then say per cell where C came from."""
    plan_notes: tuple[str, ...] = ()
    """Caveats about this task's plans (:func:`actorq.report.plan_input.memory_note`), printed under the machine."""
    fixed_threshold: bool = False
    """Whether the threshold is the runs' ``target_return`` (fixed before they ran), not derived from their returns."""

    def labels(self) -> list[str]:
        """Sweep cell by sweep cell, fp32, fp16, int8 and then other labels within each."""
        order = {"fp32": 0, "fp16": 1, "int8": 2}

        def key(label: str) -> tuple[str, int, str]:
            head, cell = split_label(label)
            return cell, order.get(head.split("/")[0], 3), head

        return sorted(self.runs, key=key)

    def base_of(self, label: str, base: str = "fp32") -> str:
        """The label ``label`` is compared with: ``base`` in the same sweep cell."""
        return base + split_label(label)[1]

    def times(self, label: str) -> list[float | None]:
        """Each run's time to threshold (None: not reached, censored)."""
        return [m.t_reach for m in self.runs.get(label, [])]

    def time_ci(self, label: str) -> bootstrap.Interval:
        """Kaplan-Meier median time to threshold with its 95% CI (lifelines), unreached runs censored at the time
        they were last seen short of it (:func:`actorq.report.intervals.km_median`)."""
        runs = self.runs.get(label, [])
        return intervals.km_median([m.t_reach for m in runs], [m.t_censored for m in runs])

    def improvement_ci(self, label: str, key: str = "final_return", base: str = "fp32") -> bootstrap.Interval:
        """P(a run of ``label`` scores more ``key`` than a run of ``base`` in its sweep cell) with rliable's 95%
        CI (:func:`actorq.report.intervals.improvement_ci`)."""
        return intervals.improvement_ci(
            [getattr(m, key) for m in self.runs.get(label, [])],
            [getattr(m, key) for m in self.runs.get(self.base_of(label, base), [])],
        )

    def speedup_ci(self, label: str, base: str = "fp32") -> bootstrap.Interval:
        """Median time of ``base`` (same sweep cell) / median time of ``label``, with its bootstrap 95% CI."""
        return self.ratio_ci(self.base_of(label, base), label)

    def ratio_ci(self, base_label: str, label: str) -> bootstrap.Interval:
        """Median time of ``base_label`` / median time of ``label`` with its bootstrap 95% CI, resampled by seed
        only when the runs pair (one cell, one experiment, one machine: :func:`actorq.report.pairing.pairing`), else
        run by run.

        Undefined (None parts) when the threshold is degenerate: times to a score the untrained policy already
        makes do not measure learning."""
        base_runs, runs = self.runs.get(base_label, []), self.runs.get(label, [])
        if self.degenerate:
            return bootstrap.Interval(None, None, None, len(runs), sum(m.t_reach is not None for m in runs))
        paired = pairing(base_label, base_runs, label, runs)[0]
        if paired:
            by_seed = {m.seed: m for m in base_runs}
            base_runs = [by_seed[m.seed] for m in runs]
        return bootstrap.speedup_ci(
            [m.t_reach for m in base_runs],
            [m.t_reach for m in runs],
            paired=paired,
            base_censored_at=[m.t_censored for m in base_runs],
            other_censored_at=[m.t_censored for m in runs],
        )

    def predicted_speedup(self, label: str, base: str = "fp32") -> float | None:
        """The regime model's speed-up of ``label`` over ``base`` in its sweep cell: the ratio of the median
        delivered env steps/s (:func:`actorq.plan.regime.predicted_speedup`)."""

        def delivered(lab: str) -> list[float | None]:
            return [m.regime.delivered if m.regime else None for m in self.runs.get(lab, [])]

        return predicted_speedup(delivered(label), delivered(self.base_of(label, base)))

    def capacity_from(self, label: str, base: str = "fp32") -> str:
        """Where C behind ``label``'s predicted speed-up came from (its runs' and its ``base`` cell's):
        ``plan FILE, MACHINE``, ``run NAME`` / ``runs A, B`` (never-starved runs), or none."""
        labels = dict.fromkeys([label, self.base_of(label, base)])
        estimates = [
            m.regime.capacity if m.regime else None for lab in labels for m in self.runs.get(lab, [])
        ]
        plans = [e.plan for e in estimates if e is not None and e.plan]
        names = [n for e in estimates if e is not None and not e.plan for n in e.runs]
        parts = list(dict.fromkeys(plans))
        names = list(dict.fromkeys(names))
        if names:
            shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            parts.append(("run " if len(names) == 1 else "runs ") + shown)
        missing = sum(e is None for e in estimates)
        if missing:
            parts.append(
                f"none for {missing} of {len(estimates)} runs (no never-starved run, not timed by a plan)"
            )
        return "; ".join(parts) or "-"

    def paired_reward(self, label: str, axis: str = "actor_steps", base: str = "fp32") -> PairedReward | None:
        """``label``'s reward against ``base`` of its sweep cell, seed by seed, over the same steps of ``axis``
        (:mod:`actorq.report.paired`)."""
        return paired_reward(
            self.runs.get(self.base_of(label, base), []), self.runs.get(label, []), axis, self.window
        )

    def best_cell(self, precision: str) -> str | None:
        """The label (sweep cell) of ``precision`` with the lowest median time to threshold (None if none has a
        finite median): "each precision at its own best setting"."""
        cells = [lab for lab in self.runs if split_label(lab)[0] == precision]
        timed = [(self.time_ci(lab).value, lab) for lab in cells]
        timed = [(t, lab) for t, lab in timed if t is not None and math.isfinite(t)]
        return min(timed)[1] if timed else None

    def summary(self, label: str, key: str, censored: bool = False) -> stats.SeedSummary:
        values = [getattr(m, key) for m in self.runs.get(label, [])]
        return stats.censored_median(values) if censored else stats.plain_median(values)

    def untrained(self) -> float | None:
        """The highest untrained return of any run (None when no run evaluated its initial policy)."""
        values = [
            m.untrained_return for ms in self.runs.values() for m in ms if m.untrained_return is not None
        ]
        return max(values) if values else None

    def starting_above(self) -> list[tuple[str, int, float]]:
        """``(label, seed, untrained return)`` of each run whose untrained policy already reaches the threshold,
        highest first."""
        if self.threshold is None:
            return []
        found = [
            (label, m.seed, m.untrained_return)
            for label, ms in self.runs.items()
            for m in ms
            if m.untrained_return is not None and m.untrained_return >= self.threshold
        ]
        return sorted(found, key=lambda f: -f[2])

    @property
    def degenerate(self) -> bool:
        """Whether any run's untrained policy already scores at or above the threshold (smoothed as the threshold
        is): then time to reward measures start-up, not learning, and no speed-up is taken from it."""
        untrained = self.untrained()
        return untrained is not None and self.threshold is not None and untrained >= self.threshold

    def speedup(self, label: str, base: str = "fp32") -> tuple[float | None, list[float]]:
        """(ratio of median times base/label, per-seed paired ratios); ``base`` within the label's sweep cell.
        ``(None, [])`` when the threshold is degenerate (see :meth:`ratio_ci`)."""
        if self.degenerate:
            return None, []
        base = self.base_of(label, base)
        t_base = self.summary(base, "t_reach", censored=True).median
        t = self.summary(label, "t_reach", censored=True).median
        paired = stats.paired_ratios(
            {m.seed: m.t_reach for m in self.runs.get(base, [])},
            {m.seed: m.t_reach for m in self.runs.get(label, [])},
        )
        return stats.ratio(t_base, t), paired


def build_tables(
    runs: list[RunData],
    k: int = stats.DEFAULT_WINDOW,
    fraction: float = stats.DEFAULT_FRACTION,
    statistic: str = "mean",
    base: str = "fp32",
    plans: tuple[Plan, ...] = (),
) -> list[TaskTable]:
    """Group runs by task and label; the threshold is the runs' ``target_return`` when they were given one
    (:func:`fixed_target`), else it comes from the ``base`` label's runs (all runs if none).

    ``plans``: C and S_p of the runs whose setting a plan of their task timed (checked against the runs first:
    :func:`actorq.report.plan_input.check_plans`)."""
    tables = []
    for task in sorted({r.task for r in runs}):
        group = [r for r in runs if r.task == task]
        source = [r for r in group if split_label(r.label)[0] == base]
        threshold_source = f"best {base} run"
        if not source:
            source, threshold_source = group, f"best run of any label (no {base} runs)"
        best = stats.best_smoothed([r.eval_return for r in source], k, statistic)
        raw = [float(np.nanmax(r.eval_return)) for r in source if r.eval_return.size]
        if (target := fixed_target(task, group)) is not None:
            # A run stopped at its target has nothing to say about returns above it, and the best fp32 run of
            # such runs is the target's neighbourhood: the target itself is the threshold.
            threshold, threshold_source = target, FIXED_SOURCE
        else:
            threshold = None if best is None else stats.reward_threshold(best, fraction)
        by_label: dict[str, list[RunMetrics]] = {}
        for run in sorted(group, key=lambda r: (r.label, r.seed)):
            by_label.setdefault(run.label, []).append(measure_run(run, threshold, k, statistic))
        everyone = [m for ms in by_label.values() for m in ms]
        _same_actor_rate_source(everyone)
        given = [given_for(plans, m.run) for m in everyone] if plans else None
        for m, regime in zip(everyone, assess([rates(m) for m in everyone], given), strict=True):
            m.regime = regime
        table = TaskTable(
            task, best, max(raw) if raw else None, threshold, threshold_source, by_label, window=k,
            plans=tuple(p.name for p in plans if p.task == task), fixed_threshold=target is not None,
            plan_notes=tuple(note for p in plans if p.task == task if (note := memory_note(p, group))),
        )  # fmt: skip
        table.config_differences, table.cell_differences = _differences(group)
        tables.append(table)
    return tables


FIXED_SOURCE = (
    "fixed before the runs (their `target_return`; each run stopped on reaching it by the threshold rule)"
)
"""Where a task's threshold came from when its runs were given a target."""


class TargetMismatchError(UsageError):
    """The runs of one task were stopped at different ``target_return`` values."""


def fixed_target(task: str, runs: list[RunData]) -> float | None:
    """The ``target_return`` the runs of ``task`` were configured with (None when none has one).

    Raises:
        TargetMismatchError: two runs have different targets (a time to threshold needs one threshold).
    """
    targets = {float(t) for r in runs if (t := (r.config or {}).get("target_return")) is not None}
    if len(targets) > 1:
        raise TargetMismatchError(
            f"the runs of {task} stopped at different target_return values {sorted(targets)}: a time to threshold "
            "needs one threshold; report each target's runs separately (one records directory each) or rerun them "
            "with one target"
        )
    return targets.pop() if targets else None


def _same_actor_rate_source(runs: list[RunMetrics]) -> None:
    """Compare like with like: unless every run recorded actor CPU time, all use the wall-time estimate."""
    if all(m.actor_free_source == "cpu" for m in runs):
        return
    for m in runs:
        if m.actor_free_source == "cpu":
            m.actor_free_rate, m.actor_free_source = m.actor_wall_rate, "wall"


COMPARED_AWAY = ("actor.precision", "quantizer.comm_bits", "seed", "paper")
"""Config keys that are supposed to differ between the runs of one comparison."""


def _flatten(data: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in flat_keys(data).items()}


def _defaults(algorithm: Any) -> dict[str, str]:
    """The flattened schema defaults of ``algorithm`` ({} for one no longer registered: nothing to fill with)."""
    try:
        return _flatten(schema_defaults(str(algorithm)))
    except ConfigError:
        return {}


def _differences(group: list[RunData]) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """A task's config differences (:func:`config_differences`, the swept keys left out) inside its sweep cells,
    and those only between them.

    A key that takes one value per cell (a grid whose experiments give each cell its own budget) does not touch the
    comparison inside a cell, which is what the per-cell rows are; it does touch a comparison across cells (best
    against best), which says so.
    """
    swept = {key for r in group for key in r.sweep}
    cells: dict[tuple[tuple[str, str], ...], list[RunData]] = {}
    for run in group:
        cells.setdefault(tuple(sorted(run.sweep.items())), []).append(run)
    inside: dict[str, list[str]] = {}
    for runs in cells.values():
        for key, values in config_differences([r.config for r in runs]).items():
            if key not in swept:
                inside[key] = sorted({*inside.get(key, ()), *values})
    between = {
        key: values
        for key, values in config_differences([r.config for r in group]).items()
        if key not in swept and key not in inside
    }
    return inside, between


def config_differences(configs: list[dict[str, Any]]) -> dict[str, list[str]]:
    """``{key: sorted distinct values}`` for config keys that differ between runs (a comparison caveat).

    A key a run's config lacks (a record made before the field existed) counts as the field's default, so runs made
    before and after an option was added, with it at its default, are not flagged; a key the schema no longer has
    either reads ``(unset)``.
    """
    configs = [c for c in configs if c]
    flat = [_flatten(c) for c in configs]
    algos = [c.get("algorithm", ExperimentConfig.algorithm) for c in configs]
    defaults = {a: _defaults(a) for a in set(algos)}
    filled = [{**defaults[a], **f} for a, f in zip(algos, flat, strict=True)]
    keys = sorted({k for f in flat for k in f} - set(COMPARED_AWAY))
    diffs = {}
    for key in keys:
        values = sorted({f.get(key, "(unset)") for f in filled})
        if len(values) > 1:
            diffs[key] = values
    return diffs
