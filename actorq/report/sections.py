"""The report's markdown sections: one per task (tables, figures, checks, the runs) and one per benchmark file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from actorq.report import behaviour_md as bmd
from actorq.report import comparisons_md as cmd
from actorq.report import grid_md as gmd
from actorq.report import machines, model_check, paper, render
from actorq.report import markdown as md
from actorq.report import projection_md as pmd
from actorq.report import versions_md as vmd
from actorq.report.analysis import TaskTable
from actorq.report.disturbance import disturbed_note
from actorq.report.paired import AXES


def img(path: Path | None, out: Path, alt: str) -> str:
    return f"![{alt}]({path.relative_to(out)})\n" if path else ""


def task_section(t: TaskTable, out: Path, coverage_sims: int, plans: tuple = ()) -> list[str]:
    s = [f"## {t.task}\n"]
    if t.fixed_threshold:
        s.append(
            f"**Reward threshold {md.fmt(t.threshold)}**, {t.threshold_source}. "
            f"Best fp32 return: {md.fmt(t.best)} (best single evaluation {md.fmt(t.best_raw)}).\n"
        )
    else:
        s.append(
            f"Best fp32 return ({t.threshold_source}): {md.fmt(t.best)} (best single evaluation "
            f"{md.fmt(t.best_raw)}); **reward threshold {md.fmt(t.threshold)}**.\n"
        )
    if t.config_differences:
        diffs = "; ".join(f"`{k}`: {', '.join(v)}" for k, v in t.config_differences.items())
        s.append(f"**Caveat: these runs differ in more than precision and seed** ({diffs}).\n")
    s += machines.hardware_lines(t)
    s += list(t.plan_notes)
    mixed = machines.mixed_machines_note(t)
    s += [mixed] if mixed else []
    note = md.untrained_note(t)
    s += [note, ""] if note else []
    everyone = [m for lab in t.labels() for m in t.runs[lab]]
    note = disturbed_note(everyone)
    s += [note, ""] if note else []
    s += ["### Time to threshold with 95% confidence intervals (Table 2 analogue)\n", gmd.ci_table(t), ""]
    s += [gmd.ci_note(t), ""]
    caveat = vmd.versions_caveat(t)
    s += [caveat, ""] if caveat else []
    best = gmd.best_vs_best(t)
    s += [best, ""] if best else []
    finite, found = cmd.comparison_table(t, coverage_sims)
    if finite:
        s += ["### Speed-ups that stay finite, the log-rank test, and what may be said\n", finite, ""]
        s += [cmd.unbounded_line(found), "", cmd.NOTE, ""]
    s += [md.paper_comparison(t), ""]
    s += [
        "### Time to reward, median and min-max over seeds (with per-seed speed-ups)\n",
        md.time_table(t),
        "",
    ]
    s += ["### Throughput and CPU per role\n", gmd.throughput_table(t), "", gmd.THROUGHPUT_NOTE, ""]
    paired = {axis: gmd.paired_table(t, axis) for axis in AXES}
    for axis, text in paired.items():
        s += [f"### {gmd.paired_title(axis)}\n", text, ""] if text else []
    s += [gmd.PAIRED_NOTE, ""] if any(paired.values()) else []
    s += ["### Regime of each run (time blocked on the rate limiter)\n", gmd.regime_counts(t) + ".", ""]
    s += [gmd.blocked_table(everyone), "", gmd.BLOCKED_NOTE, ""]
    versions = vmd.versions_table(t)
    s += ["### Evaluations per weight version\n", versions, "", vmd.NOTE, ""] if versions else []
    s += ["### Convergence\n"]
    s.append(img(render.convergence(t, out, "learner_steps"), out, "return vs learner steps"))
    s.append(img(render.convergence(t, out, "steps"), out, "return vs actor steps"))
    s.append(img(render.convergence(t, out, "time"), out, "return vs wall time"))
    behaviour = bmd.behaviour_table(t)
    s += (
        [
            "### How the quantized actors act (`evaluator.evaluate_quantized` runs)\n",
            behaviour,
            "",
            bmd.NOTE,
            "",
        ]
        if behaviour
        else []
    )
    s += ["### Actor runtime breakdown (Fig. 4c/4d analogue)\n", md.breakdown_table(t), ""]
    s.append(img(render.breakdown(t, out), out, "runtime breakdown"))
    s.append(
        "The adder column includes time blocked on Reverb's samples-per-insert rate limiter; the wait column is "
        "the share of actor time beyond the adder's own cost.\n"
    )
    s += ["### Broadcasts\n", md.broadcast_table(t), ""]
    s.append(img(render.broadcasts(t, out), out, "broadcast size and cost"))
    s.append(
        "Pull time counts every pull (also those that found no newer version), divided by broadcasts received.\n"
    )
    s += [
        "### Regime of each run: the model and its numbers\n",
        pmd.regime_table(t),
        "",
        pmd.REGIME_MODEL,
        "",
    ]
    s += model_check.section(t, plans)
    s += ["### Projection: time to reward with a k-times faster learner (model, not measured)\n"]
    s += [pmd.projection_table(t), "", pmd.PROJECTION_MODEL, ""]
    budget = pmd.budget_steps(t)
    if budget:
        s += [
            f"### Projection: time to train {budget:,.0f} actor steps with a k-times faster learner (model)\n"
        ]
        s += [pmd.projection_table(t, budget=True), "", pmd.BUDGET_PROJECTION, ""]
    energy_tab, energy_text = md.energy_table(t)
    s += ["### Energy and CO2\n", energy_tab, "", energy_text, ""]
    s.append(img(render.energy(t, out), out, "energy"))
    s += ["### Runs\n", md.run_list([m for lab in t.labels() for m in t.runs[lab]]), ""]
    return s


def bench_section(path: Path, out: Path) -> list[str]:
    data = json.loads(path.read_text())
    kind = data.get("kind")
    meta = data.get("meta", {})
    name = render.slug(path.stem)
    s = [f"## Benchmark: {kind} ({path.name})\n"]
    s.append(
        "Actors alone (no learner), real ActorRole code path (policy, exploration, Acme adder into Reverb with no "
        f"rate limiter, pulls every K steps{'; every pull is a new broadcast' if meta.get('fresh') else ''}). "
        f"Config {meta.get('config')}, policy {meta.get('policy_layers')}, {meta.get('seconds')} s per block, "
        f"{meta.get('repeats')} interleaved repeats; machine: {machine_line(meta.get('machine') or {})}.\n"
    )
    rows = data.get("summary", [])
    if rows:
        s += [md.bench_actors_table(rows), ""]
        s.append(
            img(render.bench_speed(rows, out, f"{name}_speed", f"{kind}: env steps/s per actor"), out, kind)
        )
        s.append(img(render.bench_breakdown(rows, out, f"{name}_breakdown"), out, f"{kind} breakdown"))
    if kind == "ablation":
        s.append(f"Paper (Fig. 4a/4b): {paper.PAPER_COMM_ABLATION}.\n")
    sweep = data.get("sweep", [])
    if sweep:
        s += ["### Pull-period sweep: speed vs staleness\n", md.sweep_table(sweep), ""]
        s.append(
            "Mean weight age = K / (2 x steps/s): on average an actor acts with weights pulled half a period ago; "
            f"in learner steps at {meta.get('learner_rate')} learner steps/s. Smaller K means fresher weights "
            "(the paper's Fig. 3: staler policies slowed convergence on Humanoid) at the cost of more pulls.\n"
        )
        s.append(img(render.bench_sweep(sweep, out, f"{name}_sweep"), out, "pull sweep"))
    s += [f"- {note}" for note in data.get("notes", [])] + [""]
    return s


def machine_line(info: dict[str, Any]) -> str:
    """'Intel Xeon ..., 2 cores (avx512_vnni), torch 2.5.1, load 7.1' from bench metadata."""
    parts = [str(info.get("cpu") or "?"), f"{info.get('cpus', '?')} cores"]
    if info.get("isa"):
        parts[-1] += f" ({', '.join(info['isa'])})"
    if info.get("torch"):
        parts.append(f"torch {info['torch']}")
    if info.get("loadavg") is not None:
        parts.append(f"load average {info['loadavg']:.1f} at start")
    return ", ".join(parts)
