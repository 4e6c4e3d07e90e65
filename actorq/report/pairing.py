"""When two labels' runs pair seed by seed: only inside one cell.

A seed's runs are pairs when they are of one seed, one sweep cell and one experiment, made back to back on one
machine: the grid runs a cell's precisions for a seed one after another (:func:`actorq.experiments.orchestration.
plan_runs`), so a slow machine state slows both, and resampling seeds as pairs removes that shared noise from the
ratio. Runs of two cells share only their seed number: a grid runs its cells days apart, perhaps on another instance
of the machine, so pairing them would count unrelated noise as shared (and narrow or shift the interval for no
reason). Records name their experiment (``record["experiment"]``, written by ``actorq experiment`` since issue 91);
for older records the cell and the machine decide.
"""

from __future__ import annotations

from typing import Any

from actorq.hardware import machine_differences
from actorq.report.measure import RunMetrics
from actorq.report.runs import split_label

PAIRED = "paired by seed (one cell: a seed's runs ran back to back on one machine)"


def experiment_of(m: RunMetrics) -> str | None:
    """The experiment a run's record names (None for records made before records named it)."""
    exp: Any = m.run.experiment
    return str(exp.get("name")) if isinstance(exp, dict) and exp.get("name") else None


def pairing(base_label: str, base: list[RunMetrics], label: str, runs: list[RunMetrics]) -> tuple[bool, str]:
    """Whether ``runs`` (of ``label``) pair with ``base`` (of ``base_label``) seed by seed, and why (not)."""
    if split_label(base_label)[1] != split_label(label)[1]:
        return False, "unpaired: different cells (their runs share only their seed numbers)"
    seeds, base_seeds = [m.seed for m in runs], [m.seed for m in base]
    if not runs or len(set(seeds)) != len(seeds) or sorted(seeds) != sorted(base_seeds):
        return False, "unpaired: the two labels did not run the same seeds once each"
    by_seed = {m.seed: m for m in base}
    for m in runs:
        other = by_seed[m.seed]
        if experiment_of(m) != experiment_of(other):
            return False, f"unpaired: seed {m.seed}'s runs come from different experiments"
        if machine_differences(m.run.summary.get("hardware") or {}, other.run.summary.get("hardware") or {}):
            return False, f"unpaired: seed {m.seed}'s runs ran on different machines"
    return True, PAIRED
