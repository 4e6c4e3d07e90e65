"""The statistics of the QAT-vs-PTQ study (``actorq qat-study`` records): per cell, per width, per comparison.

The unit is the training seed: a seed's score is the mean return of its evaluation episodes (the episodes share
the seed's policy, so they are not independent draws of it). Per pair, width and method (fp32, PTQ W, PTQ W+A, QAT):

* the **mean** over seeds with rliable's stratified bootstrap 95% interval (:func:`actorq.report.intervals.mean_ci`;
  one task, so the plain bootstrap over seeds) and the **IQM** (rliable's 25% trimmed mean, same interval), each with
  the real coverage simulated at the cell's n (:mod:`actorq.report.coverage`);
* **E%** = 100 (R_fp32 - R) / |R_fp32| on the means (QuaRL's definition), over the seeds both have, with a paired
  percentile bootstrap (:func:`actorq.report.bootstrap.relative_loss_ci`; seeds resampled as pairs). PTQ of seed s
  quantizes fp32 policy s, and QAT of seed s starts from seed s too, so pairing keeps fp32's seed-to-seed spread
  (an A2C seed that converged to 152) out of the loss;
* **QAT vs PTQ** (W and W+A) per width: the probability of improvement P(a QAT seed beats a PTQ seed; ties half)
  with rliable's interval, and the two-sided Mann-Whitney U test of P = 1/2 (scipy; the U statistic is that
  probability times n_QAT n_PTQ, so the test and the effect size are one quantity). Every comparison the table makes
  is one family: Holm's correction (:func:`actorq.report.multitest.holm`) over all of them. A claim ("QAT better",
  "PTQ better") is made only where the Holm-adjusted p is at most :data:`ALPHA` and both cells have at least
  :data:`MIN_CLAIM_SEEDS` seeds; below that the cell says "too few seeds for a claim" whatever its p.

QAT fine-tunes the fp32 policy for the recipe's extra steps, so its E% against fp32 mixes the quantization with that
training. Where the study has the **fine-tune control** (:data:`CONTROL`: the same fine-tune, seed and steps
without quantization), the pair gets the control's cell (E% against fp32: what the extra training alone does) and
every width QAT's E% against the control, paired by seed the same way: that comparison isolates the quantization.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from actorq.report import bootstrap, coverage, intervals
from actorq.report.multitest import holm

log = logging.getLogger(__name__)

ALPHA = 0.05
"""Family-wise error rate of the QAT-vs-PTQ table (Holm)."""
MIN_CLAIM_SEEDS = 10
"""Fewest training seeds in each of the two cells of a comparison that makes a claim (issue 37)."""
WITHIN = 5.0
"""E% at or below which a width counts as "within 5% of fp32" (QuaRL's sweet-spot criterion)."""
METHODS = {"ptq_w": "PTQ W", "ptq_wa": "PTQ W+A", "qat": "QAT W+A (deployed int)"}
"""The quantized methods of a width, in table order."""
BASELINES = ("ptq_w", "ptq_wa")
"""What QAT is compared with at each width."""
CONTROL = "ft32"
"""The fine-tune control's record name (``ft32_s<seed>.json``) and key in :data:`Records`; the record format
``actorq.studies.qat_study.CONTROL`` writes (the report does not import the studies)."""
CONTROL_KIND = "fp32_finetune"
"""A control record's ``kind`` and the field holding its per-episode returns (``qat_study.CONTROL_KIND``)."""
CONTROL_LABEL = "fp32 fine-tuned (control)"
TOO_FEW = "too few seeds for a claim"
NO_DIFFERENCE = "no difference shown"

Records = dict[str, dict[str, dict[int, dict[str, Any]]]]
"""``{pair: {"fp32" | "ft32" | "qat<bits>": {seed: record}}}``."""


def load(out: str | Path) -> Records:
    """Every record under ``out/records/<pair>/*.json`` (the layout :mod:`actorq.studies.qat_study` writes).

    Raises:
        ValueError: a record without the fields the report reads, naming the file.
    """
    recs: Records = {}
    for path in sorted(Path(out, "records").glob("*/*.json")):
        rec = json.loads(path.read_text())
        try:
            kind = rec["kind"]
            name = "fp32" if kind == "fp32" else CONTROL if kind == CONTROL_KIND else f"qat{int(rec['bits'])}"
            recs.setdefault(rec["pair"], {}).setdefault(name, {})[int(rec["seed"])] = rec
        except KeyError as e:
            raise ValueError(
                f"{path}: a study record needs 'kind', 'pair', 'seed' (and 'bits' for QAT): {e}"
            ) from e
    return recs


def widths(recs: Records) -> list[int]:
    """Every bit width with a PTQ or QAT result, widest first."""
    found = set()
    for by_name in recs.values():
        for name, by_seed in by_name.items():
            if name.startswith("qat"):
                found.add(int(name[3:]))
            for r in by_seed.values():
                found.update(int(b) for b in r.get("ptq_w", {}))
    return sorted(found, reverse=True)


def seed_scores(
    pair: dict[str, dict[int, dict[str, Any]]], bits: int | None, method: str
) -> dict[int, float]:
    """``{seed: mean evaluation return}`` of ``method`` ("fp32", :data:`CONTROL`, "ptq_w", "ptq_wa", "qat") at
    ``bits``; seeds without that result are left out."""
    if method == CONTROL:
        return {s: float(np.mean(r[CONTROL_KIND])) for s, r in sorted(pair.get(CONTROL, {}).items())}
    if method == "qat":
        return {s: float(np.mean(r["qat_deployed"])) for s, r in sorted(pair.get(f"qat{bits}", {}).items())}
    fp = sorted(pair.get("fp32", {}).items())
    if method == "fp32":
        return {s: float(np.mean(r["fp32"])) for s, r in fp}
    return {s: float(np.mean(r[method][str(bits)])) for s, r in fp if str(bits) in r.get(method, {})}


def relative_loss(scores: dict[int, float], base: dict[int, float]) -> dict[str, Any]:
    """E% of ``scores`` against ``base`` over their common seeds, paired (module docstring), as an interval dict
    with its coverage at that n (``n``: the common seeds)."""
    seeds = sorted(set(scores) & set(base))
    e = bootstrap.relative_loss_ci([base[s] for s in seeds], [scores[s] for s in seeds]).as_dict()
    return {**e, "coverage": coverage.note("relative", len(seeds))}


def cell(scores: dict[int, float], base: dict[int, float] | None = None) -> dict[str, Any] | None:
    """Mean and IQM over seeds with intervals and their coverage, and E% against ``base`` (None: no seed)."""
    if not scores:
        return None
    values = list(scores.values())
    n = len(values)
    out = {
        "n": n,
        "seeds": sorted(scores),
        "mean": intervals.mean_ci(values).as_dict(),
        "iqm": intervals.iqm_ci(values).as_dict(),
        "coverage_mean": coverage.note("mean", n),
        "coverage_iqm": coverage.note("iqm", n),
    }
    if base:
        out["E%"] = relative_loss(scores, base)
    return out


def mann_whitney_p(x: list[float], y: list[float]) -> float | None:
    """Two-sided Mann-Whitney U p-value of P(X > Y) = 1/2 (exact without ties at small n, else the normal
    approximation, scipy's ``method="auto"``); 1 when every value is the same; None when a group is empty."""
    if not x or not y:
        return None
    if len(set(x) | set(y)) == 1:
        return 1.0  # no ordering at all: nothing against P = 1/2
    return float(stats.mannwhitneyu(x, y, alternative="two-sided", method="auto").pvalue)


def compare(qat_scores: dict[int, float], ptq_scores: dict[int, float]) -> dict[str, Any] | None:
    """P(QAT > PTQ) with its interval and the test's raw p (the Holm p and verdict come from :func:`decide`);
    unpaired (the probability of improvement compares every QAT seed with every PTQ seed)."""
    qat, ptq = list(qat_scores.values()), list(ptq_scores.values())
    if not qat or not ptq:
        return None
    return {
        "p_improvement": intervals.improvement_ci(qat, ptq).as_dict(),
        "coverage": coverage.note("improvement", min(len(qat), len(ptq))),
        "n_qat": len(qat),
        "n_ptq": len(ptq),
        "p": mann_whitney_p(qat, ptq),
    }


def decide(comparisons: list[dict[str, Any]]) -> None:
    """Holm-adjust the family's p-values in place and give each comparison its verdict."""
    adjusted = holm([c["p"] for c in comparisons])
    for c, p_holm in zip(comparisons, adjusted, strict=True):
        c["p_holm"] = p_holm
        c["family"] = len(comparisons)
        if min(c["n_qat"], c["n_ptq"]) < MIN_CLAIM_SEEDS:
            c["verdict"] = TOO_FEW
        elif p_holm <= ALPHA:
            c["verdict"] = "QAT better" if c["p_improvement"]["value"] > 0.5 else "PTQ better"
        else:
            c["verdict"] = NO_DIFFERENCE


def lowest_within(rows: list[dict[str, Any]], key: str) -> int | None:
    """Lowest measured width whose E% (point estimate), and every wider measured width's, is <= :data:`WITHIN`.

    None when the widest measured width already fails, or nothing is measured.
    """
    best = None
    for row in sorted(rows, key=lambda r: -r["bits"]):
        c = row.get(key)
        if c is None:
            continue
        e = c["E%"]["value"]
        if e is None or not math.isfinite(e) or e > WITHIN:
            break
        best = row["bits"]
    return best


def summarize(recs: Records, pairs: list[str] | None = None) -> dict[str, Any]:
    """The whole study: ``{"pairs": {pair: {"fp32": cell, "rows": [...], "lowest_within": ...}}, "family": m}``.

    A pair with control records also gets ``"control"`` (its cell, E% against fp32) and each row with QAT
    ``"qat_vs_control"`` (QAT's E% against the control); pairs without have neither key.
    """
    bits = widths(recs)
    out: dict[str, Any] = {"pairs": {}, "widths": bits}
    family: list[dict[str, Any]] = []
    for name in pairs or sorted(recs):
        pair = recs.get(name, {})
        fp = seed_scores(pair, None, "fp32")
        res: dict[str, Any] = {"fp32": cell(fp), "rows": []}
        ft = seed_scores(pair, None, CONTROL)
        if ft:
            res["control"] = cell(ft, fp)
        for b in bits:
            scores = {m: seed_scores(pair, b, m) for m in METHODS}
            row: dict[str, Any] = {"bits": b, **{m: cell(s, fp) for m, s in scores.items()}}
            if set(ft) & set(scores["qat"]):  # paired: only the seeds both have
                row["qat_vs_control"] = relative_loss(scores["qat"], ft)
            for base in BASELINES:
                c = compare(scores["qat"], scores[base])
                row[f"qat_vs_{base}"] = c
                if c is not None and c["p"] is not None:
                    family.append(c)
            res["rows"].append(row)
        res["lowest_within"] = {m: lowest_within(res["rows"], m) for m in METHODS}
        out["pairs"][name] = res
    decide(family)
    out["family"] = len(family)
    log.info("QAT study: %d pairs, %d comparisons in the Holm family", len(out["pairs"]), len(family))
    return out
