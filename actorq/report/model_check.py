"""The regime model checked run by run: each run's env steps/s as the plan predicts them, as planned and at the
run's own memory bandwidth, against what the run delivered.

A plan times the actors on one day; a cloud VM's memory bandwidth changes between days (the Zen 3's DRAM probe read
12-21 GB/s over its Acrobot runs), and a policy whose weights exceed the L3 (fp32 3x2048: 32.1 MiB) reads them from
memory on every batch-1 forward, so its forwards follow the bandwidth (fp32's forward time against the run's DRAM
bandwidth, Zen 3 1-env runs: r = -0.82). At the run's bandwidth the plan's actor step is its measured step with the
part of the forwards that reads the weights from memory (weights / envs per actor / the plan's bandwidth) scaled by
``plan bandwidth / run bandwidth`` where the precision's weights exceed the L3 (:func:`supply_at`), and the prediction is ``min(S_p, C / spi)`` as the regime model's. The ratio delivered /
predicted per run, its median and range per cell, is how far the model is off, not whether a wide speed-up interval
happens to hold the prediction.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from actorq.report.analysis import TaskTable
from actorq.report.markdown import fmt, table
from actorq.report.measure import RunMetrics
from actorq.report.plan_input import Plan, PlanCell, split_matches

BITS = {"fp32": 32, "fp16": 16, "bf16": 16, "int8": 8}


@dataclass(frozen=True)
class Check:
    """One run: delivered env steps/s and the plan's prediction, as planned and at the run's bandwidth."""

    label: str
    seed: int
    delivered: float
    planned: float
    at_bandwidth: float | None
    run_gbs: float | None
    predicted_regime: str
    observed_regime: str


def streamed_bytes(m: RunMetrics) -> float | None:
    """The bytes each forward of the run's actor reads from memory: its weights where they exceed its L3 (each
    forward then streams them), else None."""
    h = m.run.summary.get("hardware") or {}
    fp32_bytes, l3 = h.get("weights_read_bytes"), h.get("l3_bytes")
    bits = BITS.get(m.run.precision)
    if not (fp32_bytes and l3 and bits):
        return None
    size = fp32_bytes * bits / 32
    return size if size > l3 else None


def supply_at(
    cell: PlanCell, plan_gbs: float | None, run_gbs: float | None, weight_bytes: float | None
) -> float | None:
    """The cell's S_p at ``run_gbs``: of its forwards' time per env step, the part that reads the weights from memory
    (``weight_bytes`` per forward over ``envs_per_actor`` env steps at ``plan_gbs``, at most the forwards' time) is
    scaled by ``plan_gbs / run_gbs``; the plan's S_p where nothing is streamed (``weight_bytes`` None: the weights fit
    in the L3); None without the figures to scale."""
    if weight_bytes is None:
        return cell.supply
    if not (plan_gbs and run_gbs and cell.inference_ms and cell.step_ms):
        return None
    memory_ms = min(cell.inference_ms, weight_bytes / cell.envs_per_actor / (plan_gbs * 1e9) * 1e3)
    step = cell.step_ms + memory_ms * (plan_gbs / run_gbs - 1)
    return cell.supply * cell.step_ms / step


def checks(t: TaskTable, plan: Plan) -> list[Check]:
    """Every run of ``t`` whose setting the plan timed."""
    out = []
    for label in t.labels():
        for m in t.runs[label]:
            envs = int(m.run.cfg("actor", "envs_per_actor", 1))
            cells = [
                c for c in plan.cells
                if split_matches(c, plan, m.run) and c.precision == m.run.precision and c.envs_per_actor == envs
            ]  # fmt: skip
            spi = float(m.run.cfg("replay", "samples_per_insert", 0) or 0)
            if not cells or m.actor_rate is None or spi <= 0:
                continue
            cell = cells[0]
            run_gbs = (m.run.summary.get("hardware") or {}).get("dram_read_gbs")
            scaled = supply_at(cell, plan.machine.get("dram_read_gbs"), run_gbs, streamed_bytes(m))
            limit = statistics.median(c.capacity for c in cells) / spi
            out.append(Check(
                label, m.seed, float(m.actor_rate), min(cell.supply, limit),
                None if scaled is None else min(scaled, limit), run_gbs,
                "actor-bound" if (scaled or cell.supply) < limit else "learner-bound",
                m.regime.label if m.regime else "-",
            ))  # fmt: skip
    return out


def _ratios(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.2f} [{min(values):.2f}-{max(values):.2f}]"


def section(t: TaskTable, plans: tuple[Plan, ...]) -> list[str]:
    """The report's lines: per cell, delivered / predicted over its runs, as planned and at their bandwidth."""
    plan = next((p for p in plans if p.task == t.task), None)
    found = checks(t, plan) if plan is not None else []
    if not found:
        return []
    rows = []
    for label in t.labels():
        mine = [c for c in found if c.label == label]
        if not mine:
            continue
        scaled = [c.delivered / c.at_bandwidth for c in mine if c.at_bandwidth]
        agree = sum(c.predicted_regime == c.observed_regime for c in mine)
        rows.append([
            label, str(len(mine)), fmt(statistics.median(c.delivered for c in mine), 0),
            fmt(statistics.median(c.planned for c in mine), 0), _ratios([c.delivered / c.planned for c in mine]),
            _ratios(scaled) if scaled else "no bandwidth to scale by", f"{agree} of {len(mine)}",
        ])  # fmt: skip
    gbs = plan.machine.get("dram_read_gbs")
    note = (
        f"Delivered: each run's env steps/s over its acting time; predicted: `min(S_p, C / spi)` from {plan.path} "
        f"(its DRAM read bandwidth {fmt(gbs, 1) + ' GB/s' if gbs else 'not recorded'}), as planned and with S_p at "
        "each run's own bandwidth (the part of the forwards' time that reads the weights from memory, weights / envs per "
        "actor / the plan's bandwidth, scaled by plan / run bandwidth where the precision's weights exceed the L3: "
        "`actorq.report.model_check`). Ratio: delivered / predicted, median "
        "[range] over runs; 1 is the model exact. Regime: the predicted label (actor-bound where S_p < C / spi) "
        "against the one measured from the rate limiter, in how many runs they agree."
    )
    header = [
        "label", "runs", "delivered env steps/s (median)", "predicted as planned (median)",
        "delivered / predicted, as planned", "delivered / predicted, at the run's bandwidth", "regime as predicted",
    ]  # fmt: skip
    return ["### The model checked run by run: predicted against delivered env steps/s\n", table(header, rows), "",
            note, ""]  # fmt: skip
