"""Matplotlib figures of the studies (Agg backend: no display needed)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def sweet_spot(result: dict[str, Any], path: Path) -> None:
    """Reward vs precision (fp32, fp16, 8..2 bits): mean +/- std over evaluation seeds (QuaRL Fig. 7)."""
    rows = result["rows"]
    labels = [r["precision"] for r in rows]
    means = np.array([np.mean(r["seed_means"]) for r in rows])
    stds = np.array([np.std(r["seed_means"]) for r in rows])
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    x = np.arange(len(rows))
    ax.errorbar(x, means, yerr=stds, marker="o", capsize=4, lw=1.5)
    ax.fill_between(x, means - stds, means + stds, alpha=0.15)
    ax.axhline(means[0], color="gray", ls="--", lw=1, label="fp32")
    ax.set_xticks(x, labels)
    ax.set_xlabel("precision (weights)")
    ax.set_ylabel("episode reward")
    n = result["config"]["seeds"]
    ax.set_title(f"PTQ sweet spot: {result['title']} (mean +/- std over {n} seeds)", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _hist(ax: Any, w: np.ndarray, grid: np.ndarray | None, title: str, grid_label: str) -> None:
    lim = float(np.max(np.abs(w))) if w.size else 1.0
    ax.hist(w, bins=120, range=(-lim * 1.05, lim * 1.05), color="tab:blue", alpha=0.8, log=True)
    if grid is not None and grid.size:
        tr = ax.get_xaxis_transform()  # x in data, y in axes fraction
        if grid.size <= 32:
            ax.vlines(
                grid, 0, 1, transform=tr, colors="orange", lw=0.8, alpha=0.8, label=grid_label, zorder=0
            )
        else:
            # Dense grids (8 bits = 255 levels) as a comb along the top edge, so the histogram stays readable.
            ax.vlines(grid, 0.9, 1, transform=tr, colors="orange", lw=0.5, label=grid_label, zorder=3)
        ax.vlines([grid.min(), grid.max()], 0, 1, transform=tr, colors="red", lw=0.8, ls="--", zorder=3)
    ax.set_title(title, fontsize=7)
    ax.tick_params(labelsize=6)


def weight_histograms(
    layers: Sequence[dict[str, Any]],
    whole: dict[str, Any],
    path: Path,
    scheme_label: str,
) -> None:
    """Per-layer and whole-model weight histograms (log count) with the quantization grid overlaid.

    Args:
        layers: Dicts with ``name``, ``values`` (flat weights), ``grid`` (representable values of the layer's
            coarsest channel, or None), ``mse``.
        whole: Same for the whole model (``grid`` is the coarsest layer's grid).
        path: PNG path.
        scheme_label: Shown in the title.
    """
    n = len(layers) + 1
    cols = min(4, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.4 * rows), squeeze=False)
    flat = axes.ravel()
    _hist(
        flat[0], whole["values"], whole.get("grid"),
        f"whole model ({whole['values'].size} weights) MSE={whole['mse']:.2e}", "coarsest layer grid",
    )  # fmt: skip
    for ax, layer in zip(flat[1:], layers, strict=False):
        _hist(ax, layer["values"], layer.get("grid"), f"{layer['name']} MSE={layer['mse']:.2e}", "grid")
    for ax in flat[n:]:
        ax.axis("off")
    flat[0].legend(fontsize=6, loc="upper right")
    fig.suptitle(
        f"weight distributions (log count) and {scheme_label} quantization grid (orange; red = clipping range)",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def reward_curves(curves: dict[str, tuple[Sequence[float], Sequence[float]]], path: Path, title: str) -> None:
    """Reward vs environment steps, one line per run label."""
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for label, (x, y) in curves.items():
        ax.plot(x, y, marker=".", label=label)
    ax.set_xlabel("environment steps")
    ax.set_ylabel("eval reward")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def grouped_bars(
    groups: Sequence[str],
    series: dict[str, tuple[Sequence[float], Sequence[float]]],
    path: Path,
    title: str,
    ylabel: str = "reward",
) -> None:
    """Bars per group (e.g. bit width) and series (fp32 / PTQ / QAT) with error bars (QuaRL Fig. 1)."""
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    width = 0.8 / max(1, len(series))
    x = np.arange(len(groups))
    for i, (label, (m, s)) in enumerate(series.items()):
        ax.bar(x + i * width - 0.4 + width / 2, m, width, yerr=s, capsize=3, label=label)
    ax.set_xticks(x, groups)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
