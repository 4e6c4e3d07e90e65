"""The plots of a QAT-vs-PTQ study report (:mod:`actorq.studies.qat_md`): per pair, reward per bit width and the
training curves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from actorq.studies import qat_stats as qs


def plots(
    pair: str, res: dict[str, Any], by_name: dict[str, dict[int, dict[str, Any]]], out: Path
) -> list[str]:
    """The pair's sweet-spot plot (reward per width, each method with its interval, fp32's band) and its
    training curves; returns the file names written under ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    if res["fp32"] is not None and res["rows"]:
        fig, ax = plt.subplots(figsize=(6.4, 3.8))
        f = res["fp32"]["mean"]
        if f["low"] is not None:
            ax.axhspan(f["low"], f["high"], color="gray", alpha=0.2)
        ax.axhline(f["value"], color="gray", ls="--", label="fp32 mean (95% CI band)")
        if res.get("control"):
            ax.axhline(res["control"]["mean"]["value"], color="black", ls=":", label=qs.CONTROL_LABEL)
        for m, label in qs.METHODS.items():
            pts = [(r["bits"], r[m]["mean"]) for r in res["rows"] if r[m] is not None]
            x = np.array([p[0] for p in pts])
            y = np.array([p[1]["value"] for p in pts])
            lo = np.array([p[1]["low"] if p[1]["low"] is not None else p[1]["value"] for p in pts])
            hi = np.array([p[1]["high"] if p[1]["high"] is not None else p[1]["value"] for p in pts])
            if pts:
                ax.errorbar(x, y, yerr=[y - lo, hi - y], marker="o", capsize=3, label=label)
        ax.invert_xaxis()
        ax.set_xlabel("bits (weights; W+A: activations too)")
        ax.set_ylabel("episode reward")
        ax.set_title(f"QAT vs PTQ: {pair} (mean over seeds, rliable 95% CI)", fontsize=9)
        files.append(_save(plt, fig, ax, out / f"sweet_spot_{pair}.png", dpi=110))
    qat = sorted((n for n in by_name if n.startswith("qat")), key=lambda n: -int(n[3:]))
    names = ["fp32", *([qs.CONTROL] if qs.CONTROL in by_name else []), *qat]
    curves = {}
    for name in names:
        runs = [r["curve"] for r in by_name.get(name, {}).values() if r.get("curve")]
        if runs:
            k = min(len(c) for c in runs)
            curves[name] = ([c[0] for c in runs[0][:k]], np.mean([[c[1] for c in r[:k]] for r in runs], 0))
    if curves:
        fig, ax = plt.subplots(figsize=(6.4, 3.8))
        for label, (x, y) in curves.items():
            ax.plot(x, y, marker=".", label=label)
        ax.set_xlabel("environment steps")
        ax.set_ylabel("training episode return (last 20)")
        ax.set_title(f"Training curves {pair} (mean over seeds)", fontsize=9)
        files.append(_save(plt, fig, ax, out / f"curves_{pair}.png", dpi=120))
    return files


def _save(plt: Any, fig: Any, ax: Any, path: Path, dpi: int) -> str:
    """Legend and grid on ``ax``, ``fig`` written to ``path`` and closed; returns the file name."""
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path.name
