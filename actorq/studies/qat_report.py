"""Render the QAT-vs-PTQ study records (:mod:`actorq.studies.qat_study`) into tables, plots and ``report.md``.

Every reward is a mean over training seeds x evaluation episodes with a two-level bootstrap 95% CI (resample
training seeds, then episodes inside each): the seed spread dominates at 3 seeds, and the CI says so. A QAT vs
PTQ difference is called only when the CI of the difference excludes 0. "Within 5% of fp32" uses QuaRL's
E% = 100 (R_fp32 - R_q) / |R_fp32| on the means; the lowest such width is the lowest bit width at which it and
every wider measured width hold.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from actorq.studies import plots, qat_study
from actorq.studies.ptq import relative_error

BOOT = 2000
CI = 95.0
WITHIN = 5.0
METHODS = {"ptq_w": "PTQ W", "ptq_wa": "PTQ W+A", "qat": "QAT W+A (deployed int)"}
# QuaRL Table 2 (PTQ fp32 / int8 rewards) where the pair is in the paper; Figure 1's bars are given only as an
# image (no numbers in the text), so the QAT column can carry only its claim.
PAPER = {
    "ppo_CartPole-v1": "Table 2: fp32 500, int8 PTQ 500",
    "a2c_CartPole-v1": "Table 2: fp32 500, int8 PTQ 500",
    "ddpg_Pendulum-v1": "not in the paper (DDPG: MountainCar fp32 92, int8 PTQ 92)",
}


def load(out: Path) -> dict[str, dict[str, dict[int, dict[str, Any]]]]:
    """``{pair: {"fp32" | "qat<b>": {seed: record}}}`` from ``out/records``."""
    recs: dict[str, dict[str, dict[int, dict[str, Any]]]] = {}
    for path in sorted((out / "records").glob("*/*.json")):
        rec = json.loads(path.read_text())
        name = "fp32" if rec["kind"] == "fp32" else f"qat{rec['bits']}"
        recs.setdefault(rec["pair"], {}).setdefault(name, {})[rec["seed"]] = rec
    return recs


def boot_means(groups: list[list[float]], rng: np.random.Generator, n: int = BOOT) -> np.ndarray:
    """Bootstrap distribution of the grand mean: resample groups (seeds), then items (episodes) within each."""
    arrs = [np.asarray(g, np.float64) for g in groups]
    out = np.empty(n)
    for i in range(n):
        picks = rng.integers(0, len(arrs), len(arrs))
        out[i] = np.mean([rng.choice(arrs[k], arrs[k].size).mean() for k in picks])
    return out


def _ci(dist: np.ndarray) -> tuple[float, float]:
    lo, hi = np.percentile(dist, [(100 - CI) / 2, 100 - (100 - CI) / 2])
    return float(lo), float(hi)


def summarize(recs: dict[str, dict[int, dict[str, Any]]], bits: list[int], seed: int = 0) -> dict[str, Any]:
    """Means, CIs, E% and QAT-PTQ differences of one pair (whatever cells exist)."""
    rng = np.random.default_rng(seed)
    fp = recs.get("fp32", {})
    res: dict[str, Any] = {"rows": [], "fp32": None}
    if not fp:
        return res
    fp_groups = [fp[s]["fp32"] for s in sorted(fp)]
    fp_dist = boot_means(fp_groups, rng)
    fp_mean = float(np.mean([np.mean(g) for g in fp_groups]))
    res["fp32"] = {"mean": fp_mean, "ci": _ci(fp_dist), "seeds": len(fp_groups)}
    for b in sorted(bits, reverse=True):
        row: dict[str, Any] = {"bits": b}
        dists = {}
        groups = {
            "ptq_w": [fp[s]["ptq_w"][str(b)] for s in sorted(fp) if str(b) in fp[s]["ptq_w"]],
            "ptq_wa": [fp[s]["ptq_wa"][str(b)] for s in sorted(fp) if str(b) in fp[s]["ptq_wa"]],
            "qat": [r["qat_deployed"] for _, r in sorted(recs.get(f"qat{b}", {}).items())],
        }
        for key, g in groups.items():
            if not g:
                row[key] = None
                continue
            d = boot_means(g, rng)
            mean = float(np.mean([np.mean(x) for x in g]))
            e_dist = 100 * (fp_dist - d) / np.abs(fp_dist)
            row[key] = {
                "mean": mean, "ci": _ci(d), "seeds": len(g), "E%": relative_error(fp_mean, mean),
                "E%_ci": _ci(e_dist),
            }  # fmt: skip
            dists[key] = d
        for ptq_key in ("ptq_w", "ptq_wa"):
            if "qat" in dists and ptq_key in dists:
                lo, hi = _ci(dists["qat"] - dists[ptq_key])
                verdict = "QAT better" if lo > 0 else "PTQ better" if hi < 0 else "overlap"
                row[f"qat_minus_{ptq_key}"] = {"ci": (lo, hi), "verdict": verdict}
        res["rows"].append(row)
    res["lowest_within"] = {k: lowest_within(res["rows"], k) for k in METHODS}
    return res


def lowest_within(rows: list[dict[str, Any]], key: str) -> int | None:
    """Lowest measured bit width whose E% (and every wider measured width's) is <= 5.

    Returns None when the widest measured width already fails, or when nothing is measured.
    """
    best = None
    for row in sorted(rows, key=lambda r: -r["bits"]):
        cell = row.get(key)
        if cell is None:
            continue
        if cell["E%"] > WITHIN:
            break
        best = row["bits"]
    return best


def _fmt(cell: dict[str, Any] | None) -> str:
    if cell is None:
        return "(missing)"
    lo, hi = cell["ci"]
    return f"{cell['mean']:.1f} [{lo:.1f}, {hi:.1f}] (n={cell['seeds']})"


def _low(bits: int | None, rows: list[dict[str, Any]], key: str) -> str:
    measured = [r["bits"] for r in rows if r.get(key) is not None]
    if not measured:
        return "not measured yet"
    if bits is None:
        return f"none ({max(measured)} bits already fails)"
    gaps = sorted(set(qat_study.BITS) - set(measured), reverse=True)
    return f"{bits} bits" + (f" (not measured: {', '.join(map(str, gaps))})" if gaps else "")


def table_markdown(pair: str, s: dict[str, Any], steps: int) -> str:
    """One pair's Figure 1 / Table 3 analogue."""
    if s["fp32"] is None:
        return f"### {pair}\n\n(no fp32 record yet)\n"
    f = s["fp32"]
    lines = [
        f"### {pair} ({steps} steps; QAT quant delay {steps // 2})",
        "",
        f"fp32: {f['mean']:.1f} [{f['ci'][0]:.1f}, {f['ci'][1]:.1f}] over {f['seeds']} seeds. "
        f"Paper: {PAPER.get(pair, 'n/a')}.",
        "",
        "| bits | PTQ W | E% | PTQ W+A | E% | QAT W+A, deployed int | E% [CI] | QAT - PTQ W | QAT - PTQ W+A |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in s["rows"]:
        cells = [str(r["bits"])]
        for key in METHODS:
            c = r[key]
            cells.append(_fmt(c))
            if c is None:
                cells.append("")
            elif key == "qat":
                cells.append(f"{c['E%']:.1f} [{c['E%_ci'][0]:.1f}, {c['E%_ci'][1]:.1f}]")
            else:
                cells.append(f"{c['E%']:.1f}")
        for k in ("qat_minus_ptq_w", "qat_minus_ptq_wa"):
            d = r.get(k)
            cells.append(f"{d['verdict']} [{d['ci'][0]:.1f}, {d['ci'][1]:.1f}]" if d else "")
        lines.append("| " + " | ".join(cells) + " |")
    low = s["lowest_within"]
    lines += [
        "",
        "Lowest measured bit width within 5% of fp32 (E% <= 5 there and at every wider measured width): "
        + ", ".join(f"{METHODS[k]} {_low(low[k], s['rows'], k)}" for k in METHODS),
    ]
    return "\n".join(lines) + "\n"


def coverage_markdown(out: Path, pairs: list[str], bits: list[int], seeds: int) -> str:
    """Which cells have a record: finished seeds out of ``seeds`` per pair and column."""
    cols = ["fp32", *(f"qat{b}" for b in sorted(bits, reverse=True))]
    lines = [
        "Cells finished (training seeds with a record / asked; fp32 includes PTQ at every width):",
        "",
        "| pair | " + " | ".join(cols) + " |",
        "|---" * (len(cols) + 1) + "|",
    ]
    for p in pairs:
        pair = qat_study.PAIRS[p]
        done = []
        for c in cols:
            b = None if c == "fp32" else int(c[3:])
            done.append(sum(qat_study.record_path(out, pair, b, s).exists() for s in range(seeds)))
        lines.append(f"| {p} | " + " | ".join(f"{d}/{seeds}" for d in done) + " |")
    return "\n".join(lines) + "\n"


def deploy_markdown(recs: dict[str, dict[str, dict[int, dict[str, Any]]]]) -> str:
    """The integer-deployment check over every QAT cell."""
    worst, agree, maxdiff, same, n, gap = 0.0, 1.0, 0.0, 0, 0, 0.0
    for by_name in recs.values():
        for name, by_seed in by_name.items():
            if not name.startswith("qat"):
                continue
            for r in by_seed.values():
                c = r["deploy_check"]
                n += 1
                worst = max(worst, max(v["max_diff_over_bound"] for v in c["layers"].values()))
                agree = min(agree, c.get("action_agreement", 1.0))
                maxdiff = max(maxdiff, c.get("max_action_diff", 0.0))
                same += int(r["qat_deployed"] == r["qat_fake_quant"])
                gap = max(gap, abs(float(np.mean(r["qat_deployed"]) - np.mean(r["qat_fake_quant"]))))
    return (
        f"Integer deployment check over {n} QAT policies (500 recorded observations each): largest per-layer "
        f"|int - fake-quant| / float32 dot-product bound = {worst:.3g} (<= 1 means within the bound); lowest "
        f"greedy-action agreement {agree:.4f}; largest continuous action difference {maxdiff:.3g}; "
        f"{same}/{n} policies got identical episode returns deployed and as the fake-quant graph; largest "
        f"difference of a policy's mean return between the two {gap:.3g} (closed-loop episodes amplify the "
        "last-bit differences in continuous control).\n"
    )


def _plot(pair: str, s: dict[str, Any], recs: dict[str, dict[int, dict[str, Any]]], out: Path) -> list[str]:
    import matplotlib.pyplot as plt

    files = []
    if s["fp32"] is not None and s["rows"]:
        fig, ax = plt.subplots(figsize=(6.4, 3.8))
        f = s["fp32"]
        ax.axhspan(*f["ci"], color="gray", alpha=0.2)
        ax.axhline(f["mean"], color="gray", ls="--", label="fp32 (95% CI band)")
        for k, label in METHODS.items():
            pts = [(r["bits"], r[k]) for r in s["rows"] if r[k] is not None]
            if pts:
                x = np.array([p[0] for p in pts])
                m = np.array([p[1]["mean"] for p in pts])
                err = np.array([[p[1]["mean"] - p[1]["ci"][0], p[1]["ci"][1] - p[1]["mean"]] for p in pts]).T
                ax.errorbar(x, m, yerr=err, marker="o", capsize=3, label=label)
        ax.invert_xaxis()
        ax.set_xlabel("bits (weights; W+A: activations too)")
        ax.set_ylabel("episode reward")
        ax.set_title(f"QAT vs PTQ sweet spot: {pair} (mean, 95% bootstrap CI)", fontsize=9)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(out / f"sweet_spot_{pair}.png", dpi=110)
        plt.close(fig)
        files.append(f"sweet_spot_{pair}.png")
    curves = {}
    for name in ["fp32", *sorted((n for n in recs if n != "fp32"), key=lambda n: -int(n[3:]))]:
        runs = [r["curve"] for r in recs.get(name, {}).values() if r["curve"]]
        if runs:
            k = min(len(c) for c in runs)
            curves[name] = (
                [c[0] for c in runs[0][:k]],
                list(np.mean([[c[1] for c in r[:k]] for r in runs], 0)),
            )
    if curves:
        plots.reward_curves(curves, out / f"curves_{pair}.png", f"Training curves {pair} (mean over seeds)")
        files.append(f"curves_{pair}.png")
    return files


def render(
    out: str | Path, pairs: list[str] | None = None, bits: list[int] | None = None, seeds: int = 3
) -> Path:
    """Write ``summary.json``, the plots and ``report.md`` under ``out``; returns the report's path."""
    out = Path(out)
    recs = load(out)
    bit_list = list(bits or qat_study.BITS)
    names = pairs or list(qat_study.PAIRS)
    summary = {p: summarize(recs.get(p, {}), bit_list) for p in names}
    parts = ["# QAT vs PTQ vs fp32 to convergence (QuaRL Figure 1 analogue), generated tables\n"]
    parts.append(coverage_markdown(out, names, bit_list, seeds))
    parts.append(deploy_markdown(recs))
    for p in names:
        parts.append(table_markdown(p, summary[p], qat_study.PAIRS[p].steps))
        for f in _plot(p, summary[p], recs.get(p, {}), out):
            parts.append(f"![{f}]({f})\n")
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    path = out / "report.md"
    path.write_text("\n".join(parts))
    return path
