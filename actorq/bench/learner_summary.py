"""Summaries of ``actorq bench learner`` records: per variant medians, ratios to the baseline variant, the step's
breakdown and the text table."""

from __future__ import annotations

from typing import Any

import numpy as np

from actorq.measure.common import repeat_rates, set_speedup


def summarize(records: list[dict[str, Any]], baseline: str) -> list[dict[str, Any]]:
    """Per variant: median steps/s over repeats, min-max, ratio to ``baseline`` (and paired per repeat), breakdown."""
    names = list(dict.fromkeys(r["variant"] for r in records))
    rows = []
    for name in names:
        mine = [r for r in records if r["variant"] == name]
        rates = repeat_rates({r["repeat"]: r["steps_per_s"] for r in mine})
        parts = {k: float(np.median([r["breakdown_ms"][k] for r in mine])) for k in mine[0]["breakdown_ms"]}
        rows.append(
            {
                "variant": name,
                "settings": mine[0]["settings"],
                **rates,
                "samples_per_s": rates["steps_per_s"] * mine[0]["batch_size"],
                "breakdown_ms": parts,
                "load_avg": float(np.mean([r["load_before"] for r in mine])),
                "actors": mine[0].get("actors", 0),
                "actor_steps_per_s": (
                    float(np.median([r["actor_steps_per_s"] for r in mine]))
                    if "actor_steps_per_s" in mine[0]
                    else None
                ),
            }
        )
    base = next((r for r in rows if r["variant"] == baseline), rows[0])
    for row in rows:
        set_speedup(row, base)
    return rows


BREAKDOWN_COLUMNS = (
    ("dataset_ms", "dataset"),
    ("update_ms", "update"),
    ("target_copy_ms", "tgt copy"),
    ("target_per_step_ms", "tgt/step"),
    ("publish_ms", "publish"),
    ("publish_per_step_ms", "pub/step"),
)


def format_table(rows: list[dict[str, Any]]) -> str:
    """Aligned text table of :func:`summarize` rows (breakdown columns in ms)."""
    width = max(10, *(len(r["variant"]) for r in rows))
    head = (
        f"{'variant':<{width}} {'n':>2} {'steps/s':>8} {'min-max':>13} {'samples/s':>9} {'x base':>6} "
        f"{'paired':>11} " + " ".join(f"{label:>8}" for _, label in BREAKDOWN_COLUMNS) + f" {'load':>5}"
    )
    with_actors = any(r.get("actor_steps_per_s") is not None for r in rows)
    if with_actors:
        head += f" {'actor st/s':>10}"
    lines = [head, "-" * len(head)]
    for r in rows:
        paired = f"{r['speedup_min']:.2f}-{r['speedup_max']:.2f}" if r["speedup_min"] is not None else "-"
        speed = f"{r['speedup']:.2f}" if r["speedup"] is not None else "-"
        lines.append(
            f"{r['variant']:<{width}} {r['repeats']:>2} {r['steps_per_s']:>8.2f} "
            f"{r['steps_per_s_min']:>6.2f}-{r['steps_per_s_max']:<6.2f} {r['samples_per_s']:>9.0f} {speed:>6} "
            f"{paired:>11} "
            + " ".join(f"{r['breakdown_ms'][key]:>8.1f}" for key, _ in BREAKDOWN_COLUMNS)
            + f" {r['load_avg']:>5.1f}"
            + (f" {r['actor_steps_per_s']:>10.1f}" if with_actors else "")
        )
    lines.append(
        "(steps/s: LearnerRole.step() incl. sampling and publishing; breakdown in ms, each measured alone: dataset ="
        " one batch from the learner's iterator, update = losses+gradients+optimizer on a fixed batch, tgt copy ="
        " online->target copy (tgt/step over target_update_period), publish = variables+fp32 encode on the"
        " publisher thread (pub/step over publish_period))"
    )
    return "\n".join(lines)
