"""A preregistered grid's frozen design: the ``preregistration`` block of a grid file (the claim, threshold, evaluator
rule, stopping rule, budget, seeds, run order seed, statistic and criterion), read by the runner that holds runs to it
(:mod:`actorq.experiments.prereg`) and by the report that judges the claim by it (:mod:`actorq.report.replication`).
A run belongs to the frozen file when its record names the file's sha256 (:func:`made_from`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from actorq.config import ConfigError

STATISTICS = ("rmst_ratio", "median_ratio", "aft_ratio")
"""What a preregistration may name as its statistic (:mod:`actorq.report.comparisons`' ratios, base / other)."""
CRITERIA = ("lower_bound_above_1",)
"""Criteria: the statistic's interval at ``level`` excludes 1 from below (the other precision is faster)."""
FIELDS = {
    "claim": "the claim being replicated, in words",
    "base": "the reference precision (fp32)",
    "other": "the precision claimed faster",
    "threshold": "the target return every run stops at (must equal the experiment's target_return override)",
    "evaluator": "the evaluator rule (must match the experiment's evaluator overrides)",
    "stopping_rule": "when a run stops, in words",
    "budget_minutes": "each run's wall-clock budget (must equal the experiment's max_minutes)",
    "seeds": "seeds 0..N-1 (must equal the grid's seeds)",
    "order_seed": "the seed of the run order within each seed (numpy's default_rng([order_seed, seed]))",
    "statistic": f"one of {', '.join(STATISTICS)}",
    "level": "the interval's coverage (0.95)",
    "criterion": f"one of {', '.join(CRITERIA)}",
    "machine": "where the runs must run, in words (all on one CPU kind, alone)",
}
"""The block's fields, all required."""
EVALUATOR_RULES = {"each_version_once": ("evaluator.each_version_once=true", "evaluator.period_s=1")}
"""The evaluator rules a preregistration may name, and the overrides each one is."""


@dataclass(frozen=True)
class Preregistration:
    """A grid file's ``preregistration`` block (see :data:`FIELDS`)."""

    claim: str
    base: str
    other: str
    threshold: float
    evaluator: str
    stopping_rule: str
    budget_minutes: float
    seeds: int
    order_seed: int
    statistic: str
    level: float
    criterion: str
    machine: str


def parse(data: Any, where: str) -> Preregistration:
    """The block, its fields checked (each required, of its type, statistic and criterion known).

    Raises:
        ConfigError: A missing, unknown or malformed field.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: preregistration must be a mapping of {', '.join(FIELDS)}")
    missing, unknown = set(FIELDS) - set(data), set(data) - set(FIELDS)
    if missing or unknown:
        raise ConfigError(
            f"{where}: preregistration: {'missing ' + ', '.join(sorted(missing)) if missing else ''}"
            f"{'; ' if missing and unknown else ''}{'unknown ' + ', '.join(sorted(unknown)) if unknown else ''}"
        )
    try:
        block = Preregistration(
            claim=str(data["claim"]), base=str(data["base"]), other=str(data["other"]),
            threshold=float(data["threshold"]), evaluator=str(data["evaluator"]),
            stopping_rule=str(data["stopping_rule"]), budget_minutes=float(data["budget_minutes"]),
            seeds=int(data["seeds"]), order_seed=int(data["order_seed"]), statistic=str(data["statistic"]),
            level=float(data["level"]), criterion=str(data["criterion"]), machine=str(data["machine"]),
        )  # fmt: skip
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: preregistration: {exc}") from None
    if block.statistic not in STATISTICS or block.criterion not in CRITERIA:
        raise ConfigError(
            f"{where}: preregistration: statistic {block.statistic!r} / criterion {block.criterion!r}: choose "
            f"from {', '.join(STATISTICS)} / {', '.join(CRITERIA)}"
        )
    if block.evaluator not in EVALUATOR_RULES or not 0 < block.level < 1:
        raise ConfigError(
            f"{where}: preregistration: evaluator must be one of {', '.join(EVALUATOR_RULES)} and level in (0, 1)"
        )
    return block


def sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def made_from(record: dict[str, Any], digest: str) -> bool:
    """Whether a run record names the frozen file of sha256 ``digest``."""
    exp = record.get("experiment")
    return isinstance(exp, dict) and exp.get("grid_sha256") == digest


def load(path: str | Path) -> tuple[Preregistration, str]:
    """The ``preregistration`` block of a grid file and the file's sha256.

    Raises:
        ConfigError: The file cannot be read, or it has no (valid) block.
    """
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    if not isinstance(data, dict) or "preregistration" not in data:
        raise ConfigError(f"{path}: not a preregistered grid file (no preregistration block)")
    return parse(data["preregistration"], str(path)), sha256(path)
