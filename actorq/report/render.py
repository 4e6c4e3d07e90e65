"""The report's figures (matplotlib, Agg backend: no display needed); each function writes one PNG.

Figures follow the paper: convergence vs actor steps (Fig. 2) and vs wall time (Fig. 1), the actor runtime
breakdown (Fig. 4c/4d), broadcast size and cost, energy; and for bench results the communication-vs-computation
ablation (Fig. 4a/4b) and the pull-period sweep (Fig. 3's staleness vs speed trade-off).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from actorq.report import stats
from actorq.report.analysis import TaskTable
from actorq.timers import BREAKDOWN_COMPONENTS

log = logging.getLogger(__name__)

COLORS = {"fp32": "#1f77b4", "fp16": "#2ca02c", "int8": "#d62728", "acme-fp32": "#7f7f7f"}
COMPONENT_COLORS = dict(
    zip(BREAKDOWN_COMPONENTS, ("#4c72b0", "#55a868", "#c44e52", "#8172b2", "#ccb974", "#64b5cd"), strict=True)
)


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt, fig, path: Path) -> Path:
    """Lay out, write (110 dpi) and close a figure; return its path."""
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _color(label: str, i: int) -> str:
    return COLORS.get(label, f"C{(i + 4) % 10}")


def slug(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text).strip("_")


def convergence(table: TaskTable, out: Path, x: str = "steps") -> Path:
    """Evaluation return vs total actor steps (``x="steps"``), learner steps (``"learner_steps"``) or wall minutes
    (``"time"``): mean and min-max over seeds."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for i, label in enumerate(table.labels()):
        curves = []
        for m in table.runs[label]:
            xs = {"steps": m.run.eval_steps, "learner_steps": m.run.eval_learner_steps}.get(
                x, m.run.eval_t / 60.0
            )
            curves.append((xs, m.run.eval_return))
        xmax = max((np.nanmax(c[0]) for c in curves if np.isfinite(c[0]).any()), default=0.0)
        if xmax <= 0:
            continue
        grid = np.linspace(0.0, xmax, 200)
        mean, low, high, count = stats.band(curves, grid)
        color = _color(label, i)
        ax.plot(grid, mean, color=color, label=f"{label} (n={len(curves)})")
        ax.fill_between(grid, low, high, color=color, alpha=0.18, linewidth=0)
    if table.threshold is not None:
        ax.axhline(
            table.threshold,
            color="k",
            linestyle="--",
            linewidth=0.8,
            label=f"threshold {table.threshold:.1f}",
        )
    ax.set_xlabel({"steps": "total actor steps", "learner_steps": "learner steps"}.get(x, "wall time (min)"))
    ax.set_ylabel("evaluation return (fp32 learner policy)")
    ax.set_title(f"{table.task}: mean and min-max over seeds")
    if ax.get_legend_handles_labels()[0]:  # none when no run got past x = 0 (e.g. no learner step yet)
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _save(plt, fig, out / f"convergence_{x}_{slug(table.task)}.png")


def breakdown(table: TaskTable, out: Path) -> Path | None:
    """Stacked ms per env step per component and label (median over seeds), like the paper's Fig. 4c/4d."""
    labels = [lab for lab in table.labels() if any(m.breakdown for m in table.runs[lab])]
    if not labels:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    bottom = np.zeros(len(labels))
    for comp in BREAKDOWN_COMPONENTS:
        values = np.array(
            [
                np.median([m.breakdown.get(comp, 0.0) for m in table.runs[lab] if m.breakdown]) * 1e3
                for lab in labels
            ]
        )
        ax.bar(labels, values, bottom=bottom, color=COMPONENT_COLORS[comp], label=comp)
        bottom += values
    ax.set_ylabel("ms per env step (per actor)")
    ax.set_title(f"{table.task}: actor runtime breakdown (adder includes rate-limiter waits)")
    ax.legend(fontsize=8)
    return _save(plt, fig, out / f"breakdown_{slug(table.task)}.png")


def broadcasts(table: TaskTable, out: Path) -> Path | None:
    """Bytes per broadcast (with its bit width) and the actor's cost per received broadcast, per label."""
    labels = [lab for lab in table.labels() if any(m.message_bytes for m in table.runs[lab])]
    if not labels:
        return None
    plt = _plt()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    sizes = [np.median([m.message_bytes for m in table.runs[lab] if m.message_bytes]) / 1e6 for lab in labels]
    bars = ax1.bar(labels, sizes, color=[_color(lab, i) for i, lab in enumerate(labels)])
    for bar, lab in zip(bars, labels, strict=True):
        bits = {m.comm_bits for m in table.runs[lab] if m.comm_bits}
        ax1.annotate(
            f"{'/'.join(str(b) for b in sorted(bits))} bit",
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax1.set_ylabel("MB per broadcast")
    ax1.set_title("weight message size")
    bottom = np.zeros(len(labels))
    for comp in ("pull", "decode", "apply"):
        values = np.array(
            [
                np.median([m.broadcast_cost.get(comp, 0.0) for m in table.runs[lab]] or [0.0]) * 1e3
                for lab in labels
            ]
        )
        ax2.bar(labels, values, bottom=bottom, color=COMPONENT_COLORS[comp], label=comp)
        bottom += values
    ax2.set_ylabel("ms per received broadcast")
    ax2.set_title("actor cost per broadcast")
    ax2.legend(fontsize=8)
    return _save(plt, fig, out / f"broadcast_{slug(table.task)}.png")


def energy(table: TaskTable, out: Path) -> Path | None:
    """Estimated energy per run and to the threshold, per label (bars: median; dots: seeds)."""
    labels = [lab for lab in table.labels() if any(m.cpu_seconds for m in table.runs[lab])]
    if not labels:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    width = 0.38
    xs = np.arange(len(labels))
    for offset, to_reach, name in ((-width / 2, False, "whole run"), (width / 2, True, "to threshold")):
        per = [[m.energy_kwh(to_reach) for m in table.runs[lab]] for lab in labels]
        med = [
            np.median([v for v in p if v is not None]) * 1e3 if any(v is not None for v in p) else 0
            for p in per
        ]
        ax.bar(xs + offset, med, width, label=name, alpha=0.8)
        for x, p in zip(xs, per, strict=True):
            pts = [v * 1e3 for v in p if v is not None]
            ax.scatter([x + offset] * len(pts), pts, color="k", s=10, zorder=3)
    ax.set_xticks(xs, labels)
    ax.set_ylabel("Wh (estimate: CPU s x W/core)")
    ax.set_title(f"{table.task}: energy (estimate)")
    ax.legend(fontsize=8)
    return _save(plt, fig, out / f"energy_{slug(table.task)}.png")


def bench_speed(rows: list[dict[str, Any]], out: Path, name: str, title: str) -> Path | None:
    """Env steps/s per actor per bench variant (bars: median over repeats; whiskers: min-max), grouped by period."""
    if not rows:
        return None
    plt = _plt()
    periods = sorted({r["update_period"] for r in rows})
    fig, axes = plt.subplots(1, len(periods), figsize=(4.2 * len(periods), 3.8), squeeze=False)
    for ax, period in zip(axes[0], periods, strict=True):
        sel = [r for r in rows if r["update_period"] == period]
        names = [r["variant"] for r in sel]
        med = np.array([r["steps_per_s"] for r in sel])
        err = np.array(
            [[r["steps_per_s"] - r["steps_per_s_min"], r["steps_per_s_max"] - r["steps_per_s"]] for r in sel]
        ).T
        ax.bar(
            names, med, yerr=err, color=[_color(n.split("/")[0], i) for i, n in enumerate(names)], capsize=3
        )
        for x, r in enumerate(sel):
            if r.get("speedup") is not None:
                ax.annotate(
                    f"{r['speedup']:.2f}x", (x, r["steps_per_s"]), ha="center", va="bottom", fontsize=8
                )
        ax.set_title(f"update period {period}")
        ax.set_ylabel("env steps/s per actor")
        ax.tick_params(axis="x", labelrotation=20, labelsize=8)
    fig.suptitle(title)
    return _save(plt, fig, out / f"{name}.png")


def bench_breakdown(rows: list[dict[str, Any]], out: Path, name: str) -> Path | None:
    """Stacked ms per env step per component for each bench variant (Fig. 4c/4d from the bench)."""
    if not rows:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(rows)), 4))
    names = [f"{r['variant']}\nK={r['update_period']}" for r in rows]
    bottom = np.zeros(len(rows))
    for comp in (*BREAKDOWN_COMPONENTS, "other"):
        values = np.array([r["ms_per_step"].get(comp, 0.0) for r in rows])
        ax.bar(names, values, bottom=bottom, color=COMPONENT_COLORS.get(comp, "#bbbbbb"), label=comp)
        bottom += values
    ax.set_ylabel("ms per env step")
    ax.tick_params(axis="x", labelsize=7)
    ax.legend(fontsize=7, ncol=2)
    ax.set_title("actor runtime breakdown (bench, no learner)")
    return _save(plt, fig, out / f"{name}.png")


def bench_sweep(rows: list[dict[str, Any]], out: Path, name: str) -> Path | None:
    """Pull-period sweep: env steps/s and mean weight age vs update period, per variant."""
    if not rows:
        return None
    plt = _plt()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    for i, variant in enumerate(sorted({r["variant"] for r in rows})):
        sel = sorted((r for r in rows if r["variant"] == variant), key=lambda r: r["update_period"])
        ks = [r["update_period"] for r in sel]
        color = _color(variant.split("/")[0], i)
        ax1.plot(ks, [r["steps_per_s"] for r in sel], "o-", color=color, label=variant)
        ax2.plot(ks, [r["weight_age_s"] for r in sel], "o-", color=color, label=variant)
    for ax in (ax1, ax2):
        ax.set_xscale("log")
        ax.set_xlabel("update period K (env steps between pulls)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    ax1.set_ylabel("env steps/s per actor")
    ax2.set_ylabel("mean weight age (s) = K / (2 x steps/s)")
    ax2.set_yscale("log")
    fig.suptitle("pull frequency: speed vs staleness")
    return _save(plt, fig, out / f"{name}.png")
