"""Weight distributions and quantization error per layer (QuaRL Figs. 2 and 3).

Uses exactly the PTQ scheme (:class:`~actorq.studies.torch_fake_quant.QuantScheme`, same per-channel rules) on
the same deployed networks, so the grid drawn over each histogram is the grid PTQ rounds to.
"""

from __future__ import annotations

import csv
import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm

from actorq.quantize import affine
from actorq.studies import plots, zoo
from actorq.studies import torch_fake_quant as tq

logger = logging.getLogger(__name__)


def _grid(qp: affine.QParams, channel: int | None) -> np.ndarray:
    """Representable values of one channel (or of the tensor) under ``qp``."""
    codes = np.arange(qp.qmin, qp.qmax + 1)
    scale = float(qp.scale if channel is None else qp.scale[channel])
    zero = float(qp.zero_point if channel is None else qp.zero_point[channel])
    return ((codes - zero) * scale).astype(np.float32)


def layer_stats(model: BaseAlgorithm, scheme: tq.QuantScheme) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per-layer statistics and the whole-model summary for ``scheme``.

    Returns:
        ``(layers, whole)``; each layer dict has ``name, kind, shape, n, min, max, mean, std, range, mse,
        max_abs_err, scheme, n_scales`` plus ``values`` and ``grid`` arrays for plotting.
    """
    layers: list[dict[str, Any]] = []
    for mname, mod in zoo.deployed_modules(model).items():
        for name, sub in mod.named_modules():
            if not isinstance(sub, tq.QUANT_LAYER_TYPES):
                continue
            w = sub.weight.detach().cpu().float().numpy()
            axis = scheme.axis_for(sub)
            wq = tq.quantize_array(w, scheme, axis)
            err = (wq - w).astype(np.float64)
            grid = None
            n_scales = 0
            if scheme.precision == "int":
                qp = tq.weight_qparams(w, scheme, axis)
                n_scales = int(qp.scale.size)
                # Per-channel: draw the coarsest channel's grid (the worst case for this layer).
                grid = _grid(qp, None if axis is None else int(np.argmax(qp.scale)))
            layers.append(
                {
                    "name": f"{mname}.{name}",
                    "kind": type(sub).__name__,
                    "shape": list(w.shape),
                    "n": int(w.size),
                    "min": float(w.min()),
                    "max": float(w.max()),
                    "mean": float(w.mean()),
                    "std": float(w.std()),
                    "range": float(w.max() - w.min()),
                    "mse": float(np.mean(err**2)),
                    "max_abs_err": float(np.max(np.abs(err))),
                    "scheme": scheme.describe(sub),
                    "n_scales": n_scales,
                    "values": w.ravel(),
                    "grid": grid,
                }
            )
    if not layers:
        raise ValueError("the policy has no Linear/Conv layer")
    allw = np.concatenate([x["values"] for x in layers])
    sq = sum(x["mse"] * x["n"] for x in layers)
    coarsest = max(layers, key=lambda x: x["grid"].max() if x["grid"] is not None else 0.0)
    whole = {
        "name": "whole_model",
        "kind": "all",
        "shape": [int(allw.size)],
        "n": int(allw.size),
        "min": float(allw.min()),
        "max": float(allw.max()),
        "mean": float(allw.mean()),
        "std": float(allw.std()),
        "range": float(allw.max() - allw.min()),
        "mse": float(sq / allw.size),
        "max_abs_err": max(x["max_abs_err"] for x in layers),
        "scheme": scheme.label,
        "n_scales": sum(x["n_scales"] for x in layers),
        "values": allw,
        "grid": coarsest["grid"],
    }
    return layers, whole


STAT_KEYS = [
    "name",
    "kind",
    "shape",
    "n",
    "min",
    "max",
    "mean",
    "std",
    "range",
    "mse",
    "max_abs_err",
    "scheme",
]


def run_weights(
    model: BaseAlgorithm, scheme: tq.QuantScheme, out: str | Path, title: str = ""
) -> dict[str, Any]:
    """Write ``weights.png``, ``weight_stats.csv`` and ``weight_stats.json`` under ``out``.

    Returns:
        The stats (without the raw arrays).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    layers, whole = layer_stats(model, scheme)
    plots.weight_histograms(layers, whole, out / "weights.png", f"{title} {scheme.label}".strip())
    rows = [{k: x[k] for k in STAT_KEYS} for x in [*layers, whole]]
    with open(out / "weight_stats.csv", "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=STAT_KEYS)
        wr.writeheader()
        for r in rows:
            wr.writerow({**r, "shape": "x".join(map(str, r["shape"]))})
    result = {"title": title, "scheme": scheme.label, "layers": rows[:-1], "whole_model": rows[-1]}
    (out / "weight_stats.json").write_text(json.dumps(result, indent=2))
    logger.info("weight stats for %s at %s written to %s", title, scheme.label, out)
    return result


def table_markdown(result: dict[str, Any]) -> str:
    """Stats table: one line per layer plus the whole model."""
    lines = [
        f"Weights: {result['title']} at {result['scheme']}",
        "",
        "| layer | shape | min | max | std | range | quant MSE |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in [*result["layers"], result["whole_model"]]:
        lines.append(
            f"| {r['name']} | {'x'.join(map(str, r['shape']))} | {r['min']:.3f} | {r['max']:.3f} | {r['std']:.3f} | "
            f"{r['range']:.3f} | {r['mse']:.3g} |"
        )
    return "\n".join(lines) + "\n"
