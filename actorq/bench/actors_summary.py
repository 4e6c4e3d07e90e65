"""Summaries of ``actorq bench actors`` records: per variant medians, ratios (to fp32 at the same number of
environments, to one environment), the per-step breakdown, Amdahl notes and the text table."""

from __future__ import annotations

from typing import Any

import numpy as np

from actorq.measure.common import repeat_rates, set_speedup
from actorq.timers import BREAKDOWN_COMPONENTS


def summarize(records: list[dict[str, Any]], learner_rate: float | None = None) -> list[dict[str, Any]]:
    """Per (variant, update period): median over repeats of the per-actor steps/s, ratios, breakdown."""
    keys = list(dict.fromkeys((r["variant"], r["update_period"]) for r in records))
    per_block: dict[tuple[str, int], dict[int, dict[str, Any]]] = {}
    for r in records:
        per_block.setdefault((r["variant"], r["update_period"]), {}).setdefault(r["repeat"], []).append(r)
    rows = []
    for key in keys:
        blocks = per_block[key]
        rates = repeat_rates(
            {rep: float(np.mean([a["steps_per_s"] for a in acts])) for rep, acts in blocks.items()}
        )
        all_actors = [a for acts in blocks.values() for a in acts]
        steps = sum(a["steps"] for a in all_actors)
        comps = {c: sum(a["components"].get(c, 0.0) for a in all_actors) for c in BREAKDOWN_COMPONENTS}
        wall = sum(a["seconds"] for a in all_actors)
        cpu = sum(a.get("cpu_s", 0.0) for a in all_actors)
        applied = sum(a["applied"] for a in all_actors)
        ms = {c: 1e3 * comps[c] / max(steps, 1) for c in BREAKDOWN_COMPONENTS}
        ms["other"] = 1e3 * max(0.0, wall - sum(comps.values())) / max(steps, 1)
        median = rates["steps_per_s"]
        first = all_actors[0]
        row = {
            "variant": key[0],
            "precision": first["precision"],
            "kernel": first.get("kernel"),
            "kernel_us": first.get("kernel_us"),
            "comm_bits": first["comm_bits"],
            "update_period": key[1],
            "envs": int(first.get("envs", 1)),
            "actors": len(blocks[next(iter(blocks))]),
            **rates,
            "steps_per_cpu_s": steps / cpu if cpu > 0 else None,
            "ms_per_step": ms,
            "message_bytes": first["message_bytes"],
            "pulls_per_s": sum(a["pulls"] for a in all_actors) / max(wall, 1e-9),
            "broadcasts_applied": applied,
            "ms_per_broadcast": (
                1e3 * (comps["pull"] + comps["decode"] + comps["apply"]) / applied if applied else None
            ),
            "weight_age_s": key[1] / (2.0 * median) if median > 0 else None,
            "load_avg": float(np.mean([a["load_before"] for a in all_actors])),
        }
        if learner_rate and row["weight_age_s"] is not None:
            row["weight_age_learner_steps"] = row["weight_age_s"] * learner_rate
        rows.append(row)
    for row in rows:  # ratios to fp32/32-bit at the same period and envs (else the first such variant listed)
        same = [r for r in rows if (r["update_period"], r["envs"]) == (row["update_period"], row["envs"])]
        set_speedup(
            row, next((r for r in same if r["precision"] == "fp32" and r["comm_bits"] == 32), same[0])
        )
        one = next(
            (
                r
                for r in rows
                if r["envs"] == 1
                and (r["precision"], r["comm_bits"], r["update_period"])
                == (row["precision"], row["comm_bits"], row["update_period"])
            ),
            None,
        )
        row["vs_one_env"] = (
            row["steps_per_s"] / one["steps_per_s"] if one and one["steps_per_s"] > 0 else None
        )
        row["inference_vs_one_env"] = (
            row["ms_per_step"]["inference"] / one["ms_per_step"]["inference"]
            if one and one["ms_per_step"]["inference"] > 0
            else None
        )
    return rows


def amdahl_notes(rows: list[dict[str, Any]]) -> list[str]:
    """Where the time goes: inference speed-up vs env-steps/s speed-up, and the bound the other parts impose."""
    notes = []
    for row in rows:
        base = next(
            (
                r
                for r in rows
                if r["variant"] == row["baseline"] and r["update_period"] == row["update_period"]
            ),
            None,
        )
        if base is None or row is base or not row["ms_per_step"]["inference"] or row["speedup"] is None:
            continue
        total = sum(base["ms_per_step"].values())
        fwd = base["ms_per_step"]["inference"] / row["ms_per_step"]["inference"]
        bound = total / max(total - base["ms_per_step"]["inference"], 1e-9)
        notes.append(
            f"{row['variant']} K={row['update_period']}: inference runs at {fwd:.2f}x the speed of "
            f"{row['baseline']}'s ({row['ms_per_step']['inference']:.3f} vs {base['ms_per_step']['inference']:.3f} "
            f"ms/step); env steps/s {row['speedup']:.2f}x. Inference is {base['ms_per_step']['inference'] / total:.0%} "
            f"of {row['baseline']}'s step, so even free inference would give at most {bound:.2f}x (Amdahl)."
        )
    return notes


def format_table(rows: list[dict[str, Any]]) -> str:
    """Aligned text table of :func:`summarize` rows."""
    comps = (*BREAKDOWN_COMPONENTS, "other")
    head = (
        f"{'variant':<13} {'kernel':<12} {'K':>5} {'n':>2} {'N':>2} {'steps/s':>8} {'/cpu-s':>7} {'min-max':>13} "
        f"{'x base':>6} {'paired':>11} {'x n1':>5} "
        + " ".join(f"{c[:6]:>7}" for c in comps)
        + f" {'ms/step':>8} {'MB/msg':>7} {'ms/bcast':>8} {'load':>5}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        ms = r["ms_per_step"]
        paired = f"{r['speedup_min']:.2f}-{r['speedup_max']:.2f}" if r["speedup_min"] is not None else "-"
        bcast = f"{r['ms_per_broadcast']:.1f}" if r["ms_per_broadcast"] is not None else "-"
        speed = f"{r['speedup']:.2f}" if r["speedup"] is not None else "-"
        per_cpu = f"{r['steps_per_cpu_s']:.1f}" if r.get("steps_per_cpu_s") else "-"
        vs_one = f"{r['vs_one_env']:.2f}" if r.get("vs_one_env") else "-"
        lines.append(
            f"{r['variant']:<13} {str(r.get('kernel') or '-'):<12} {r['update_period']:>5} {r['actors']:>2} "
            f"{r.get('envs', 1):>2} {r['steps_per_s']:>8.1f} {per_cpu:>7} "
            f"{r['steps_per_s_min']:>6.1f}-{r['steps_per_s_max']:<6.1f} {speed:>6} {paired:>11} {vs_one:>5} "
            + " ".join(f"{ms[c]:>7.3f}" for c in comps)
            + f" {sum(ms.values()):>8.3f} {r['message_bytes'] / 1e6:>7.2f} {bcast:>8} {r['load_avg']:>5.1f}"
        )
    lines.append(
        "(steps/s and /cpu-s: env steps over all N envs of one actor process; x base: vs fp32 at the same N; "
        "x n1: vs the same precision at N=1; ms columns: per env step; 'other' = loop time outside the timed "
        "components)"
    )
    return "\n".join(lines)
