"""``report.md``, ``summary.json``, the plots and the README's generated blocks of a QAT-vs-PTQ study directory.

Everything is rendered from the per-run records (``<out>/records/<pair>/*.json``, written by ``actorq qat-study``)
with the statistics of :mod:`actorq.studies.qat_stats`, so the report regenerates from committed records alone
(``actorq qat-report <out>``). A README in ``<out>`` may hold blocks between ``<!-- qat-report:NAME -->`` and
``<!-- /qat-report:NAME -->``: each render rewrites them (the record counts and the claims), so the prose around
them cannot drift from the records; the tests check the committed README's blocks against its records.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import numpy as np

from actorq.report import coverage
from actorq.studies import qat_plots
from actorq.studies import qat_stats as qs

log = logging.getLogger(__name__)

PAPER = {
    "ppo_CartPole-v1": "Table 2: fp32 500, int8 PTQ 500",
    "a2c_CartPole-v1": "Table 2: fp32 500, int8 PTQ 500",
    "ddpg_Pendulum-v1": "not in the paper (DDPG: MountainCar fp32 92, int8 PTQ 92)",
    "zoo_ddpg_MountainCarContinuous-v0": "Table 2 (DDPG MountainCar): fp32 92, int8 PTQ 92",
}
"""QuaRL Table 2 (PTQ fp32 / int8) where the pair is in the paper; Figure 1's QAT bars are an image only."""
BLOCK = re.compile(r"(<!-- qat-report:(\w+) -->\n)(.*?)(<!-- /qat-report:\2 -->)", re.S)


def _num(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _ci(d: dict[str, Any], digits: int = 1) -> str:
    """``"462.7 [390.4, 500.0]"``; ``"[CI undefined]"`` below the bootstrap's minimum of runs."""
    if d["low"] is None:
        return f"{_num(d['value'], digits)} [CI undefined]"
    return f"{_num(d['value'], digits)} [{_num(d['low'], digits)}, {_num(d['high'], digits)}]"


def _cell(c: dict[str, Any] | None) -> list[str]:
    if c is None:
        return ["(missing)", ""]
    return [f"{_ci(c['mean'])} (n={c['n']})", _ci(c["E%"])]


def status_block(recs: qs.Records) -> str:
    """What the records hold: pairs, widths, seeds per cell, policies, the deployment's identical returns."""
    fp = sum(len(by.get("fp32", {})) for by in recs.values())
    qat = sum(len(s) for by in recs.values() for n, s in by.items() if n.startswith("qat"))
    per_cell = sorted({len(s) for by in recs.values() for s in by.values()})
    seeds = "-".join(str(n) for n in (per_cell[0], per_cell[-1]) if per_cell) if per_cell else "0"
    if len(per_cell) == 1:
        seeds = str(per_cell[0])
    same = sum(
        int(r["qat_deployed"] == r["qat_fake_quant"])
        for by in recs.values()
        for n, s in by.items()
        if n.startswith("qat")
        for r in s.values()
    )
    bits = "/".join(map(str, qs.widths(recs)))
    ctl = sum(len(by.get(qs.CONTROL, {})) for by in recs.values())
    controls = f"{ctl} fine-tune controls (the QAT fine-tune without quantization), " if ctl else ""
    return (
        f"Records: {fp + ctl + qat} cells in {len(recs)} pair{'s' if len(recs) != 1 else ''} ({', '.join(sorted(recs))}), widths {bits}, "
        f"{seeds} training seeds per cell: {fp} fp32 policies (each with PTQ W and PTQ W+A at every width) and "
        f"{controls}{qat} QAT policies; {same}/{qat} QAT policies got identical episode returns deployed as integers and as "
        "the fake-quant graph.\n"
    )


def _holds_zero(e: dict[str, Any] | None) -> bool:
    """Whether an E% interval exists and contains 0."""
    return e is not None and e["low"] is not None and e["low"] <= 0 <= e["high"]


def claims_block(summary: dict[str, Any]) -> str:
    """Every QAT-vs-PTQ verdict counted, the claims listed, and where QAT's E% interval holds 0."""
    verdicts: dict[str, list[str]] = {}
    for pair, res in summary["pairs"].items():
        for row in res["rows"]:
            for base in qs.BASELINES:
                c = row.get(f"qat_vs_{base}")
                if c is not None:
                    where = f"{pair} {row['bits']} bits vs {qs.METHODS[base]} (Holm p {c['p_holm']:.3g})"
                    verdicts.setdefault(c["verdict"], []).append(where)
    counts = ", ".join(f"{len(v)} {k}" for k, v in sorted(verdicts.items()))
    lines = [
        f"QAT vs PTQ, {summary['family']} comparisons, Holm-corrected as one family (family-wise "
        f"{qs.ALPHA:.0%}; a claim needs >= {qs.MIN_CLAIM_SEEDS} seeds in both cells): {counts or 'none'}."
    ]
    for k in ("QAT better", "PTQ better"):
        if verdicts.get(k):
            lines.append(f"{k}: " + "; ".join(verdicts[k]) + ".")
    ps = [
        (row[f"qat_vs_{b}"]["p"], f"{pair} {row['bits']} bits vs {qs.METHODS[b]}")
        for pair, res in summary["pairs"].items()
        for row in res["rows"]
        for b in qs.BASELINES
        if row.get(f"qat_vs_{b}")
    ]
    if ps:
        p, where = min(ps)
        lines.append(f"Smallest uncorrected Mann-Whitney p: {p:.3g} ({where}).")
    for pair, res in summary["pairs"].items():
        if not any(r["qat"] for r in res["rows"]):
            lines.append(f"{pair}: no QAT records yet (nothing to claim).")
            continue
        held = [
            str(r["bits"])
            for r in res["rows"]
            if r["qat"]
            and r["qat"]["E%"]["low"] is not None
            and r["qat"]["E%"]["low"] <= 0 <= r["qat"]["E%"]["high"]
        ]
        lines.append(f"{pair}: QAT's E% interval holds 0 (within fp32) at {', '.join(held) or 'no'} bits.")
        if res.get("control"):
            held = [str(r["bits"]) for r in res["rows"] if _holds_zero(r.get("qat_vs_control"))]
            lines.append(
                f"{pair}: QAT's E% against the {qs.CONTROL_LABEL} (the quantization alone) holds 0 at "
                f"{', '.join(held) or 'no'} bits."
            )
    return "\n".join(f"- {x}" for x in lines) + "\n"


def grid_markdown(recs: qs.Records, pairs: list[str], seeds: int) -> str:
    """Seeds with a record per pair and column, out of ``seeds`` asked."""
    control = [qs.CONTROL] if any(qs.CONTROL in by for by in recs.values()) else []
    cols = ["fp32", *control, *(f"qat{b}" for b in qs.widths(recs))]
    ft = f"; {qs.CONTROL}: the fine-tune control" if control else ""
    lines = [
        f"Cells finished (training seeds with a record / {seeds} asked; fp32 includes PTQ at every width{ft}):",
        "",
        "| pair | " + " | ".join(cols) + " |",
        "|---" * (len(cols) + 1) + "|",
    ]
    for p in pairs:
        lines.append(
            f"| {p} | " + " | ".join(f"{len(recs.get(p, {}).get(c, {}))}/{seeds}" for c in cols) + " |"
        )
    return "\n".join(lines) + "\n"


def deploy_markdown(recs: qs.Records) -> str:
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


def _budget(by_name: dict[str, dict[int, dict[str, Any]]]) -> str:
    steps = sorted({r["steps"] for s in by_name.values() for r in s.values()})
    qat = [r for n, s in by_name.items() if n.startswith("qat") for r in s.values()]
    # Records without a schedule are the from-scratch study's (written before the fine-tune recipe existed).
    delays = sorted({r["quant_delay"] for r in qat if r.get("schedule", "from_scratch") == "from_scratch"})
    tunes = sorted(
        {r["recipe"]["finetune_steps"] for r in qat if r.get("schedule") == "finetune" and "recipe" in r}
    )
    out = "/".join(map(str, steps)) + " steps"
    out += f"; QAT from scratch, quant delay {'/'.join(map(str, delays))}" if delays else ""
    return out + (f"; QAT fine-tuned from fp32 for {'/'.join(map(str, tunes))} steps" if tunes else "")


def zoo_agent(by_name: dict[str, dict[int, dict[str, Any]]]) -> str | None:
    """The agent path of a pretrained zoo agent's records (their fp32 seeds are evaluation replicates), else None."""
    for r in by_name.get("fp32", {}).values():
        if r.get("replicate") == "evaluation":
            return str(r.get("agent", "?"))
    return None


def pair_markdown(pair: str, res: dict[str, Any], by_name: dict[str, dict[int, dict[str, Any]]]) -> str:
    """One pair's returns table (QuaRL Figure 1 / Table 3 analogue) and its QAT-vs-PTQ comparisons."""
    if res["fp32"] is None:
        return f"### {pair}\n\n(no fp32 record yet)\n"
    f = res["fp32"]
    agent = zoo_agent(by_name)
    lines = [
        f"### {pair} ({_budget(by_name)})",
        "",
        f"fp32: mean {_ci(f['mean'])}, IQM {_ci(f['iqm'])} over {f['n']} "
        f"{'evaluation replicates' if agent else 'seeds'}. Paper: {PAPER.get(pair, 'n/a')}.",
        "",
    ]
    if agent:
        lines += [
            f'Pretrained zoo agent `{agent}`: **one policy**. Its fp32 and PTQ "seeds" are evaluation replicates '
            "(the same policy on evaluation seed r), so their intervals, E% and the QAT-vs-PTQ tests carry "
            "episode-to-episode variation only, no training spread; a QAT seed is the seed of one fine-tune of "
            "that policy, evaluated on replicate r's episodes. Claims hold for this agent, not for its algorithm.",
            "",
        ]
    ctl = res.get("control")
    lines += control_lines(ctl) if ctl else []
    lines += [
        "| bits | PTQ W | E% [CI] | PTQ W+A | E% [CI] | QAT W+A, deployed int | E% [CI] |"
        + (" QAT E% vs control [CI] |" if ctl else ""),
        "|---|---|---|---|---|---|---|" + ("---|" if ctl else ""),
    ]
    for r in res["rows"]:
        vs = [_ci(r["qat_vs_control"]) if r.get("qat_vs_control") else "-"] if ctl else []
        lines.append(
            "| " + " | ".join([str(r["bits"]), *(x for m in qs.METHODS for x in _cell(r[m])), *vs]) + " |"
        )
    lines += [
        "",
        "| bits | QAT vs | P(QAT > PTQ) [CI] | seeds QAT/PTQ | Mann-Whitney p | Holm p | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in res["rows"]:
        for base in qs.BASELINES:
            c = r.get(f"qat_vs_{base}")
            if c is not None:
                lines.append(
                    f"| {r['bits']} | {qs.METHODS[base]} | {_ci(c['p_improvement'], 2)} | {c['n_qat']}/{c['n_ptq']} "
                    f"| {c['p']:.3g} | {c['p_holm']:.3g} | {c['verdict']} |"
                )
    low = res["lowest_within"]
    measured = {m: [r["bits"] for r in res["rows"] if r.get(m)] for m in qs.METHODS}
    lines += [
        "",
        f"Lowest measured width within {qs.WITHIN:g}% of fp32 (E% <= {qs.WITHIN:g} there and at every "
        "wider measured width): "
        + ", ".join(
            f"{label} "
            + (
                "not measured"
                if not measured[m]
                else f"{low[m]} bits"
                if low[m]
                else f"none ({max(measured[m])} bits fails)"
            )
            for m, label in qs.METHODS.items()
        ),
    ]
    return "\n".join(lines) + "\n"


def control_lines(ctl: dict[str, Any]) -> list[str]:
    """The fine-tune control's row and what each E% of the pair's table compares."""
    return [
        "| control | mean [95% CI] | E% vs fp32 [CI] |",
        "|---|---|---|",
        f"| {qs.CONTROL_LABEL} | {_ci(ctl['mean'])} (n={ctl['n']}) | {_ci(ctl['E%'])} |",
        "",
        "The control is the QAT recipe's fine-tune of the same fp32 policy with the same seed and steps and no "
        "quantization. **QAT vs control** (the last column, paired by seed) isolates the quantization; **QAT vs "
        "fp32** (the E% next to QAT) includes the extra training, whose own effect is the control's E% vs fp32.",
        "",
    ]


CONTROL_NOTE = (
    f"\nFine-tune control ({qs.CONTROL_LABEL}, records `{qs.CONTROL}_s<seed>.json`): the QAT fine-tune without "
    "quantization. QAT vs control (E% against the control of the same seed, paired bootstrap) isolates the "
    "quantization; QAT vs fp32 includes the fine-tune's extra training.\n"
)


def method_markdown(summary: dict[str, Any]) -> str:
    """How every figure was computed, with the real coverage of the intervals at the n the tables have."""
    ns = sorted(
        {c["n"] for res in summary["pairs"].values() for r in res["rows"] for m in qs.METHODS if (c := r[m])}
    )
    notes = [summary_note for n in ns for summary_note in (coverage.note("mean", n), coverage.note("iqm", n))]
    notes += [coverage.note(m, n) for m in ("relative", "improvement") for n in ns]
    return (
        "Statistics (`actorq/studies/qat_stats.py`): a seed's score is the mean return of its evaluation episodes; "
        "cells give the mean over training seeds (rliable `aggregate_mean`) with rliable's stratified bootstrap "
        "95% interval, fp32 also the IQM (rliable `aggregate_iqm`, 25% trimmed mean; both in summary.json for "
        "every cell); E% = 100 (R_fp32 - R) / |R_fp32| on the means (QuaRL's definition) with a paired "
        "percentile bootstrap (seeds resampled as pairs: PTQ and QAT of seed s against fp32 policy s). QAT vs PTQ: probability of "
        "improvement P(QAT seed > PTQ seed, ties half) with rliable's interval, two-sided Mann-Whitney U p of "
        f"P = 1/2, Holm-adjusted over all {summary['family']} comparisons of the tables; a verdict needs Holm "
        f'p <= {qs.ALPHA} and >= {qs.MIN_CLAIM_SEEDS} seeds in both cells (else "{qs.TOO_FEW}"). Real coverage '
        "of the nominal 95% intervals at the seeds used (`actorq/report/coverage.py`):\n\n"
        + "".join(f"- {x}\n" for x in notes)
        + (CONTROL_NOTE if any(res.get("control") for res in summary["pairs"].values()) else "")
    )


def update_readme(path: Path, blocks: dict[str, str]) -> list[str]:
    """Rewrite the README's generated blocks that ``blocks`` names; returns the names rewritten."""
    if not path.exists():
        return []
    done: list[str] = []

    def sub(m: re.Match[str]) -> str:
        if m.group(2) not in blocks:
            return m.group(0)
        done.append(m.group(2))
        return m.group(1) + blocks[m.group(2)] + m.group(4)

    path.write_text(BLOCK.sub(sub, path.read_text()))
    return done


def readme_blocks(text: str) -> dict[str, str]:
    """``{name: content}`` of a README's generated blocks."""
    return {m.group(2): m.group(3) for m in BLOCK.finditer(text)}


def render(out: str | Path, pairs: list[str] | None = None, seeds: int | None = None) -> Path:
    """Write ``summary.json``, the plots and ``report.md`` under ``out`` and the README's generated blocks.

    Args:
        out: the study directory (``records/`` inside).
        pairs: the pairs to report, in this order (default: every pair with a record, sorted). A listed pair
            without records is left out with a log line, so one list serves a study and its subsets
            (``make reproduce-qat``'s ``QAT_PAIRS``).
        seeds: seeds asked per cell, for the grid table (default: the most any cell has).

    Raises:
        ValueError: no records under ``out``, or none of ``pairs`` has any.
    """
    out = Path(out)
    recs = qs.load(out)
    if not recs:
        raise ValueError(f"no records under {out / 'records'}: run `actorq qat-study --out {out}` first")
    names = [p for p in pairs or sorted(recs) if p in recs]
    for p in (p for p in pairs or [] if p not in recs):
        log.info("qat-report: no records of %s under %s: left out of the report", p, out / "records")
    if not names:
        raise ValueError(
            f"none of the pairs {pairs} has records under {out / 'records'}; those with: {sorted(recs)}"
        )
    summary = qs.summarize(recs, names)
    asked = seeds or max(len(s) for by in recs.values() for s in by.values())
    claims = claims_block(summary)
    parts = [
        "# QAT vs PTQ vs fp32 to convergence (QuaRL Figure 1 analogue), generated tables\n",
        f"Generated by `actorq qat-report {out.name}` from `records/`.\n",
        grid_markdown(recs, names, asked),
        status_block(recs),
        deploy_markdown(recs),
        method_markdown(summary),
        "## Claims\n\n" + claims,
    ]
    for p in names:
        parts.append(pair_markdown(p, summary["pairs"][p], recs.get(p, {})))
        parts += [f"![{f}]({f})\n" for f in qat_plots.plots(p, summary["pairs"][p], recs.get(p, {}), out)]
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    path = out / "report.md"
    path.write_text("\n".join(parts))
    update_readme(out / "README.md", {"status": status_block(recs), "claims": claims})
    return path
