"""Summaries of ``actorq bench replay`` records: per kind of block medians, the server's CPU per inserted and per
sampled item, what one server core takes at those costs (and how many actors that is), notes and the text table."""

from __future__ import annotations

from typing import Any

import numpy as np


def summarize(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per kind of block (K writers, sampler on/off): medians over repeats, min-max of the insert rate."""
    kinds = list(dict.fromkeys((r["writers"], r["sampler"]) for r in records))
    rows = []
    for k, s in kinds:
        rs = [r for r in records if (r["writers"], r["sampler"]) == (k, s)]

        def med(key: str, rs=rs) -> float | None:
            vals = [r[key] for r in rs if r[key] is not None]
            return float(np.median(vals)) if vals else None

        rows.append(
            {
                "writers": k,
                "sampler": s,
                "repeats": len(rs),
                "inserts_per_s": med("inserts_per_s"),
                "inserts_per_s_min": min(r["inserts_per_s"] for r in rs),
                "inserts_per_s_max": max(r["inserts_per_s"] for r in rs),
                "samples_per_s": med("samples_per_s"),
                "server_cores": med("server_cores"),
                "server_cpu_s_per_1000_inserts": med("server_cpu_s_per_1000_inserts"),
                "server_cpu_s_per_1000_samples": med("server_cpu_s_per_1000_samples"),
                "writer_cpu_s_per_1000_inserts": med("writer_cpu_s_per_1000_inserts"),
                "items_per_env_step": (
                    sum(r["inserts_server"] for r in rs) / max(1, sum(r["env_steps"] for r in rs))
                    if k
                    else None
                ),
                "machine_busy": med("machine_busy"),
                "load_avg": float(np.mean([r["load_before"] for r in rs])),
            }
        )
    return rows


def projection(
    records: list[dict[str, Any]], table: dict[str, Any], actor_rate: float | None
) -> dict[str, Any]:
    """Server CPU per item (medians over blocks) and what one server core would take at that cost.

    ``insert_cost``: server CPU seconds per 1000 inserts from the blocks without the sampler; ``sample_cost``: per
    1000 sampled items from the sampler-alone blocks. A core of a server host whose clients run elsewhere spends
    ``insert_cost + spi * sample_cost`` per 1000 inserts when the learner samples ``spi`` items per insert.
    """
    ins = [r["server_cpu_s_per_1000_inserts"] for r in records if r["server_cpu_s_per_1000_inserts"]]
    smp = [r["server_cpu_s_per_1000_samples"] for r in records if r["server_cpu_s_per_1000_samples"]]
    out: dict[str, Any] = {
        "insert_cost": float(np.median(ins)) if ins else None,
        "insert_cost_range": [min(ins), max(ins)] if ins else None,
        "sample_cost": float(np.median(smp)) if smp else None,
        "samples_per_insert": table["config_samples_per_insert"],
    }
    if out["insert_cost"]:
        out["core_inserts_per_s"] = 1e3 / out["insert_cost"]
        if out["sample_cost"] is not None:
            spi = table["config_samples_per_insert"]
            out["core_inserts_per_s_at_spi"] = 1e3 / (out["insert_cost"] + spi * out["sample_cost"])
    mixed = [r for r in records if r["writers"] and r["sampler"]]
    if mixed and out["insert_cost"] and out["sample_cost"] is not None:
        # Check of the per-item costs: do they add up to what the server spent with both sides at work?
        predicted = [
            (r["inserts_server"] * out["insert_cost"] + r["samples_server"] * out["sample_cost"]) / 1e3
            for r in mixed
        ]
        out["mixed_measured_over_predicted"] = float(
            np.median([r["server_cpu_s"] / p for r, p in zip(mixed, predicted, strict=True) if p > 0])
        )
    steps = sum(r["env_steps"] for r in records)
    out["items_per_env_step"] = (
        sum(r["inserts_server"] for r in records if r["writers"]) / steps if steps else None
    )
    if actor_rate and out.get("core_inserts_per_s") and out["items_per_env_step"]:
        per_actor = actor_rate * out["items_per_env_step"]
        out["actor_rate"] = actor_rate
        out["actors_per_core"] = out["core_inserts_per_s"] / per_actor
        if "core_inserts_per_s_at_spi" in out:
            out["actors_per_core_at_spi"] = out["core_inserts_per_s_at_spi"] / per_actor
    return out


def notes(rows: list[dict[str, Any]], proj: dict[str, Any], cores: int) -> list[str]:
    """What the table says: the ceiling measured here, who was the limit, and the projection per server core."""
    out = []
    plain = [r for r in rows if r["writers"] and not r["sampler"]]
    if plain:
        best = max(plain, key=lambda r: r["inserts_per_s"])
        busy = f"{best['machine_busy']:.0%}" if best["machine_busy"] is not None else "?"
        out.append(
            f"Measured ceiling here: {best['inserts_per_s']:.0f} inserts/s with K={best['writers']} writers "
            f"(server {best['server_cores']:.2f} cores, writers {best['writer_cpu_s_per_1000_inserts']:.3f} CPU s "
            f"per 1000 inserts; all {cores} cores {busy} busy). Where the cores are all busy the machine, not "
            "the server, is the limit: writers and server share it."
        )
    if proj.get("insert_cost"):
        lo, hi = proj["insert_cost_range"]
        out.append(
            f"Server CPU: {proj['insert_cost']:.4f} s per 1000 inserts (blocks {lo:.4f}-{hi:.4f}) -> one server "
            f"core takes {proj['core_inserts_per_s']:.0f} inserts/s with no sampling."
        )
    if proj.get("sample_cost") is not None and "core_inserts_per_s_at_spi" in proj:
        out.append(
            f"Sampling (learner's dataset alone): {proj['sample_cost']:.4f} s per 1000 sampled items -> at the "
            f"config's samples_per_insert {proj['samples_per_insert']:g}, one core takes "
            f"{proj['core_inserts_per_s_at_spi']:.0f} inserts/s."
        )
    if "mixed_measured_over_predicted" in proj:
        out.append(
            f"With writers and sampler together the server spent {proj['mixed_measured_over_predicted']:.2f}x "
            "what the per-item costs predict (1.00: the costs add up)."
        )
    if "actors_per_core" in proj:
        out.append(
            f"Actors at {proj['actor_rate']:g} env steps/s ({proj['items_per_env_step']:.3f} items per env step): "
            f"{proj['actors_per_core']:.1f} per server core with no sampling"
            + (
                f", {proj['actors_per_core_at_spi']:.1f} at samples_per_insert {proj['samples_per_insert']:g}."
                if "actors_per_core_at_spi" in proj
                else "."
            )
        )
    return out


def format_table(rows: list[dict[str, Any]]) -> str:
    """Aligned text table of :func:`summarize` rows."""

    def f(v: float | None, spec: str) -> str:
        return format(v, spec) if v is not None else "-"

    head = (
        f"{'K':>2} {'sampler':>7} {'inserts/s':>9} {'min-max':>13} {'samples/s':>9} {'srv cores':>9} "
        f"{'srv s/1k ins':>12} {'srv s/1k smp':>12} {'wr s/1k ins':>11} {'busy':>5} {'load':>5}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['writers']:>2} {'yes' if r['sampler'] else 'no':>7} {r['inserts_per_s']:>9.0f} "
            f"{r['inserts_per_s_min']:>6.0f}-{r['inserts_per_s_max']:<6.0f} {r['samples_per_s']:>9.0f} "
            f"{f(r['server_cores'], '.2f'):>9} {f(r['server_cpu_s_per_1000_inserts'], '.4f'):>12} "
            f"{f(r['server_cpu_s_per_1000_samples'], '.4f'):>12} {f(r['writer_cpu_s_per_1000_inserts'], '.4f'):>11} "
            f"{f(r['machine_busy'], '.0%'):>5} {r['load_avg']:>5.1f}"
        )
    lines.append(
        "(K: writer processes; inserts/s: items the server inserted per second of the writers' window; samples/s: "
        "items of the learner's batches taken; srv cores: server process CPU s per wall s; s/1k: CPU seconds per "
        "1000 items, server (srv) or all writers (wr); busy: all cores of the machine)"
    )
    return "\n".join(lines)
