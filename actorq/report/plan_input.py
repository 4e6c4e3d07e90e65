"""``actorq report --plan PLAN.json``: the regime model's C (and S_p) from ``actorq plan``, on the runs' machine.

A run's learner capacity C is otherwise taken from a run whose learner was never starved
(:mod:`actorq.report.regime`); in an actor-bound grid no run has one, so no speed-up can be predicted. ``actorq
plan`` measures C with a pre-filled replay (never starved) beside the actors, on the cores each gets, for each split
of the machine's cores, actor precision and ``envs_per_actor``, and the actors' supply S_p beside that learner. For
each run this module finds the plan's measurement of the run's setting:

* **the split**: the plan's learner cores and actor cores equal the run's ``affinity.learner`` and
  ``affinity.actor`` (an unpinned role: every core of the plan's machine) and its actor count ``actor.num_actors``;
* **C**: measured beside actors of the run's precision and ``envs_per_actor`` (the plan's own predictions pair each
  precision with the C measured beside it), else the median over the split's measurements of the run's precision
  at other ``envs_per_actor``, else over all the split's measurements, said so;
* **S_p**: only from the measurement of the run's precision and ``envs_per_actor``; without it the run's own.

A run whose split the plan did not time keeps C from the runs. A plan of another config (algorithm, network
sizes, batch) or machine (:func:`actorq.hardware.machine_differences`) than its task's runs is refused, as is a plan
whose task no run has and two plans of one task: figures measured for something else would be printed as a
prediction for these runs.

The plan is read as JSON (``actorq plan --json``); nothing here imports the bench that wrote it.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from actorq.errors import UsageError
from actorq.hardware import machine_differences
from actorq.plan.model import network_sizes
from actorq.report.regime import Estimate, Given
from actorq.report.runs import RunData

PLAN_KIND = "plan"
"""``kind`` of an ``actorq plan --json`` document."""
MAX_NAMED = 3
"""Runs named in a refusal (then how many more)."""
MEMORY_TOLERANCE = 1.25
"""DRAM read bandwidths further apart than this ratio (either way), a plan's and a run's, or two runs' when the plan
recorded none, draw the report's memory caveat: the day's bandwidth sets fp32's speed where its weights exceed
the L3 (a Zen 3 VM read 8-13 GB/s on the day its plans were made and 17.6 GB/s the next)."""


class PlanError(UsageError):
    """A plan that cannot be read, or does not describe the runs' config or machine."""


@dataclass(frozen=True)
class PlanCell:
    """One of the plan's measurements: a split of the cores, an actor precision and ``envs_per_actor``."""

    split: str
    """The plan's name for the split, e.g. ``learner [0] + actors [1]``."""
    learner_cpus: tuple[int, ...]
    """The learner's (and replay's, quantizer's, evaluator's) cores."""
    actor_cpus: tuple[int, ...]
    """The actors' cores."""
    actors: int
    """Actor processes."""
    learner_elsewhere: bool
    """The learner's rate was given (``--learner-steps-per-s``), not timed here: no run's split is this one."""
    precision: str
    envs_per_actor: int
    supply: float
    """S_p: env steps/s of all the split's actors together."""
    capacity: float
    """C: learner samples/s beside those actors (and, in plans that timed them, beside the evaluator's and the
    quantizer's work on the learner's cores)."""
    inference_ms: float | None = None
    """Of the actors' time per env step, the policy forwards' (None in plans that did not record it)."""
    step_ms: float | None = None
    """The actors' whole time per env step (1000 / S_p per actor)."""


@dataclass(frozen=True)
class Plan:
    """What the report needs of an ``actorq plan --json`` document."""

    path: str
    """The file as the user named it."""
    task: str
    """``suite:task``, as runs' summaries name it."""
    algorithm: str
    batch_size: int
    layers: dict[str, list[int]]
    """The config's network sizes (:func:`network_sizes`; plans written before they were recorded: the policy's)."""
    cores: tuple[int, ...]
    """The cores the plan split (an unpinned role of a run may use all of them)."""
    machine: dict[str, Any]
    """The plan's :func:`actorq.hardware.cpu_info` record."""
    cells: tuple[PlanCell, ...]

    @property
    def name(self) -> str:
        """``plan FILE, MODEL (N cores; flags)``: where a figure came from, as the report prints it."""
        m = self.machine
        flags = " ".join(f for f, on in (m.get("flags") or {}).items() if on) or "no listed flags"
        return f"plan {self.path}, {m.get('model', '?')} ({m.get('cores', '?')} cores; {flags})"


def load_plan(path: str | Path) -> Plan:
    """Read an ``actorq plan --json`` document.

    Raises:
        PlanError: the file is unreadable, not a plan, or lacks a field the report needs.
    """
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise PlanError(f"--plan {path}: cannot read it as JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("kind") != PLAN_KIND:
        raise PlanError(
            f"--plan {path}: not an `actorq plan --json` file (kind {data.get('kind') if isinstance(data, dict) else None!r}); "
            "write one with `actorq plan CONFIG [overrides] --json PLAN.json` on the runs' machine"
        )
    meta = data.get("meta") or {}
    try:
        cells = tuple(_cell(m) for m in meta["measurements"])
        return Plan(
            path=str(path),
            task=str(meta["task"]),
            algorithm=str(meta["algorithm"]),
            batch_size=int(meta["batch_size"]),
            layers=dict(meta.get("layers") or {"policy_layers": [int(n) for n in meta["policy_layers"]]}),
            cores=tuple(int(c) for c in meta["cores"]),
            machine=dict(meta["machine"]),
            cells=cells,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise PlanError(
            f"--plan {path}: missing or malformed field {exc} in its meta; rerun `actorq plan ... --json` "
            "with this version"
        ) from None


def _cell(m: dict[str, Any]) -> PlanCell:
    split = m["split"]
    return PlanCell(
        split=str(split["name"]),
        learner_cpus=tuple(int(c) for c in split["learner_cpus"]),
        actor_cpus=tuple(int(c) for c in split["actor_cpus"]),
        actors=int(split["actors"]),
        learner_elsewhere=bool(split.get("learner_elsewhere", False)),
        precision=str(m["precision"]),
        envs_per_actor=int(m["envs_per_actor"]),
        supply=float(m["supply"]),
        capacity=float(m["capacity"]),
        inference_ms=float(m["inference_ms"]) if m.get("inference_ms") is not None else None,
        step_ms=float(m["step_ms"]) if m.get("step_ms") is not None else None,
    )


def _config_differences(plan: Plan, run: RunData) -> list[str]:
    """``what: plan's vs run's`` for each config field C depends on."""
    out = []
    algorithm = str(run.config.get("algorithm") or run.summary.get("algorithm"))
    if algorithm != plan.algorithm:
        out.append(f"algorithm: {plan.algorithm} vs {algorithm}")
    layers = network_sizes(run.config)
    for key in sorted(set(plan.layers) & set(layers)):
        if list(plan.layers[key]) != layers[key]:
            out.append(f"{key}: {list(plan.layers[key])} vs {layers[key]}")
    if "policy_layers" not in layers:
        out.append("policy_layers: the run recorded none")
    batch = int(run.cfg("learner", "batch_size", 0))
    if batch != plan.batch_size:
        out.append(f"learner.batch_size: {plan.batch_size} vs {batch}")
    return out


def _named(runs: Sequence[str]) -> str:
    more = f" and {len(runs) - MAX_NAMED} more" if len(runs) > MAX_NAMED else ""
    return ", ".join(runs[:MAX_NAMED]) + more


def check_plans(plans: Sequence[Plan], runs: Sequence[RunData]) -> None:
    """Refuse plans that do not describe the runs they would be used for.

    Raises:
        PlanError: two plans of one task; a plan whose task no run has; a plan whose config (algorithm, network,
            batch) or machine differs from a run of its task. Each message says what differs and how to fix it.
    """
    tasks = sorted({r.task for r in runs})
    seen: dict[str, str] = {}
    for plan in plans:
        if plan.task in seen:
            raise PlanError(
                f"--plan {seen[plan.task]} and --plan {plan.path} are both plans of {plan.task}: give one plan "
                "per task (the one timed with the runs' config on the runs' machine)"
            )
        seen[plan.task] = plan.path
        mine = [r for r in runs if r.task == plan.task]
        if not mine:
            raise PlanError(
                f"--plan {plan.path} is a plan of {plan.task}, but no run is of that task (runs: "
                f"{', '.join(tasks) or 'none'}): give the plan of these runs' config, or leave --plan out"
            )
        for kind, differences in (("config", _config_differences), ("machine", _machine_differences)):
            found: dict[str, list[str]] = {}
            for run in mine:
                for d in differences(plan, run):
                    found.setdefault(d, []).append(run.name)
            if found:
                what = "; ".join(f"{d} ({_named(names)})" for d, names in found.items())
                fix = (
                    "run `actorq plan CONFIG [the runs' overrides] --json PLAN.json` with the runs' config"
                    if kind == "config"
                    else "run `actorq plan` on the machine the runs ran on (its figures do not transfer)"
                )
                raise PlanError(
                    f"--plan {plan.path}: its {kind} differs from the {plan.task} runs' (plan's vs run's: "
                    f"{what}); {fix}, or leave --plan out"
                )


def _machine_differences(plan: Plan, run: RunData) -> list[str]:
    hardware = run.summary.get("hardware")
    if not hardware:
        return ["the run recorded no CPU (summary.hardware)"]
    return machine_differences(plan.machine, hardware)


def split_matches(cell: PlanCell, plan: Plan, run: RunData) -> bool:
    affinity = run.config.get("affinity") or {}
    learner = tuple(affinity.get("learner") or ()) or plan.cores
    actor = tuple(affinity.get("actor") or ()) or plan.cores
    return (
        not cell.learner_elsewhere
        and cell.learner_cpus == learner
        and cell.actor_cpus == actor
        and cell.actors == int(run.cfg("actor", "num_actors", 0))
    )


def given_for(plans: Sequence[Plan], run: RunData) -> Given | None:
    """C and S_p of ``run`` from the plan of its task (None: no plan of its task, or it did not time its split)."""
    plan = next((p for p in plans if p.task == run.task), None)
    if plan is None:
        return None
    split = [c for c in plan.cells if split_matches(c, plan, run)]
    if not split:
        return None
    envs = int(run.cfg("actor", "envs_per_actor", 1))
    where = f"plan {plan.path}: {split[0].split}"  # the machine is named once, in ``Estimate.plan``
    same = [c for c in split if c.precision == run.precision and c.envs_per_actor == envs]
    if same:
        capacity = Estimate(
            statistics.median(c.capacity for c in same),
            f"{where}, beside {run.precision} actors, {envs} env(s)/actor",
            plan=plan.name,
        )
        supply = Estimate(
            statistics.median(c.supply for c in same),
            f"{where}, {run.precision}, {envs} env(s)/actor",
            plan=plan.name,
        )
        return Given(capacity, supply)
    precision = [c for c in split if c.precision == run.precision]
    chosen, beside = (
        (precision, f"beside {run.precision} actors") if precision else (split, "beside any actors")
    )
    capacity = Estimate(
        statistics.median(c.capacity for c in chosen),
        f"{where}, median of {len(chosen)} measurements {beside} (none of {run.precision} at {envs} env(s)/actor)",
        plan=plan.name,
    )
    return Given(capacity, None)


def memory_note(plan: Plan, runs: Sequence[RunData]) -> str:
    """A caveat when ``plan`` timed its actors at another memory bandwidth than its task's ``runs`` ran at (their
    actors' ``summary.hardware.dram_read_gbs``), or recorded none while the bandwidth matters to the runs (their
    fp32 weights exceed the L3, or their own bandwidths differ by more than :data:`MEMORY_TOLERANCE`); empty
    otherwise, or when no run recorded its bandwidth."""
    mine = [r for r in runs if r.task == plan.task]
    dram = sorted(
        float(h["dram_read_gbs"]) for r in mine if (h := r.summary.get("hardware") or {}).get("dram_read_gbs")
    )
    if not dram:
        return ""
    spread = f"{dram[0]:.1f}-{dram[-1]:.1f} GB/s, median {statistics.median(dram):.1f}, over {len(dram)} runs"
    own, streaming = plan.machine.get("dram_read_gbs"), _streaming(mine)
    if own:
        apart = [d for d in dram if max(d / own, own / d) > MEMORY_TOLERANCE]
        if not apart:
            return ""
        what = (
            f"{plan.path} timed its actors at a DRAM read bandwidth of {own:.1f} GB/s, and {len(apart)} of the "
            f"{len(dram)} runs measured more than {MEMORY_TOLERANCE:g}x away from it ({spread})"
        )
    elif streaming or dram[-1] / dram[0] > MEMORY_TOLERANCE:
        what = (
            f"{plan.path} recorded no memory bandwidth (plans measure it since 2026-11-29), so whether it timed its "
            f"actors at the runs' ({spread}) cannot be checked"
        )
    else:
        return ""
    return (
        f"**Caveat: memory bandwidth.** {what}. {streaming}The plan's predicted speed-ups are for the "
        "bandwidth it ran at; `actorq plan` at the runs' bandwidth gives theirs.\n"
    )


def _streaming(runs: Sequence[RunData]) -> str:
    """Where fp32 runs' weights exceed their L3: a sentence saying fp32's speed follows the memory's."""
    for run in runs:
        h = run.summary.get("hardware") or {}
        weights, l3 = h.get("weights_read_bytes"), h.get("l3_bytes")
        if run.precision == "fp32" and weights and l3 and weights > l3:
            return (
                f"fp32 actors' weights ({weights / 2**20:.2f} MiB) do not fit in the L3 ({l3 / 2**20:.2f} MiB), so "
                "each batch-1 forward reads them from memory, and fp32's env steps/s, and each speed-up over it, "
                "follow the bandwidth. "
            )
    return ""
