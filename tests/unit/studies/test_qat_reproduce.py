"""``make reproduce-qat``: its commands resume (finished cells skipped, each record written when its cell ends),
its subset fits 90 minutes by the committed records' durations, and ``actorq qat-report`` renders what it wrote.

The Makefile is read, never run (its venv rule rebuilds the environment): the workers' flags are taken from its
``QAT_*`` variables and fed to the same ``actorq`` entry point. The cells are fakes (no training): what is tested is
the runner's bookkeeping, not the learning.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from actorq import cli
from actorq.report import qat_stats
from actorq.studies import qat_study

ROOT = Path(__file__).resolve().parents[3]
COMMITTED = ROOT / "reports" / "studies" / "qat_convergence"
BUDGET_S = 90 * 60
REPORT_S = 6 * 60  # rendering: ~70 CPU-s for the 63-cell study, 5 min wall on a loaded 2-core machine


def _make_var(name: str) -> list[str]:
    m = re.search(rf"^{name} :?= (.*)$", (ROOT / "Makefile").read_text(), re.M)
    assert m, f"Makefile has no {name}"
    return m.group(1).split()


def _flags(argv: list[str]) -> tuple[list[str], list[int], int]:
    args = cli.build_parser().parse_args(["qat-study", "--out", "x", *argv])
    return args.pairs.split(","), [int(b) for b in args.bits.split(",")], args.seeds


def test_reproduce_qat_target_calls_the_package_cli() -> None:
    text = (ROOT / "Makefile").read_text()
    recipe = text[text.index("reproduce-qat: ") :].split("\n\n")[0]
    assert recipe.count("$(VENV)/bin/actorq qat-study --out $(QAT_OUT)") == 4
    assert "$(VENV)/bin/actorq qat-report $(QAT_OUT)" in recipe
    assert "reports/" not in recipe.split("\n", 1)[1]  # nothing under reports/ is run


def _mean_seconds() -> dict[tuple[str, str], float]:
    """Mean ``cell_seconds`` of the committed records per (pair, "fp32" | "qat<bits>")."""
    recs = qat_stats.load(COMMITTED)
    return {
        (pair, name): float(np.mean([r["cell_seconds"] for r in by_seed.values()]))
        for pair, by_name in recs.items()
        for name, by_seed in by_name.items()
    }


def _cell_seconds(means: dict[tuple[str, str], float], pair: str, bits: int | str | None) -> float:
    """The committed mean of a cell's pair and kind. The committed records have no fine-tune control yet: a
    control cell counts at the pair's 8-bit QAT mean (the QAT cell its seed's control accompanies in the subset;
    the control runs the same fine-tune without the fake-quant forwards, the deployment and its second
    evaluation)."""
    if bits == qat_study.CONTROL:
        return means.get((pair, qat_study.CONTROL), means[(pair, "qat8")])
    return means[(pair, "fp32" if bits is None else f"qat{bits}")]


def estimate_seconds(argv: list[str], means: dict[tuple[str, str], float]) -> float:
    """One worker's wall time: its cells (the subset runs the ``finetune`` schedule, so with its controls), each
    at the committed mean for its pair and kind."""
    pairs, bits, seeds = _flags(argv)
    cells = qat_study.cells([qat_study.PAIRS[p] for p in pairs], bits, seeds, control=True)
    return sum(_cell_seconds(means, p.key, b) for p, b, _ in cells)


def test_subset_fits_90_minutes_by_the_committed_durations() -> None:
    means = _mean_seconds()
    a, b = (estimate_seconds(_make_var(f"QAT_SUBSET_{w}"), means) for w in "AB")
    assert max(a, b) + REPORT_S <= BUDGET_S, f"subset workers {a / 60:.0f} and {b / 60:.0f} min"
    # A 10 x 332 s fp32 + 10 x 60 s control + 10 x 60 s QAT-8 = 75 min, B 10 x (239 + 101 + 101) s = 73 min (the
    # Makefile comment's 65 and 57 min predate the fine-tune control cells)
    assert 70 * 60 < a < 80 * 60 and 68 * 60 < b < 78 * 60
    _, _, seeds = _flags(_make_var("QAT_SUBSET_A"))
    assert seeds >= qat_stats.MIN_CLAIM_SEEDS  # the subset's 8-bit cells can carry a claim


def _fake_fp32(pair: qat_study.Pair, seed: int, bits: list[int], episodes: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    ret = lambda mu: list(np.round(rng.normal(mu, 5.0, episodes), 2))  # noqa: E731
    return {
        "kind": "fp32", "pair": pair.key, "seed": seed, "steps": pair.steps, "curve": [[10, 1.0], [20, 2.0]],
        "fp32": ret(500.0), "ptq_w": {str(b): ret(500.0 - 10 * (8 - b)) for b in bits},
        "ptq_wa": {str(b): ret(500.0 - 40 * (8 - b)) for b in bits},
    }  # fmt: skip


def _fake_control(pair: qat_study.Pair, seed: int, episodes: int) -> dict[str, Any]:
    rng = np.random.default_rng(200 + seed)
    ret = list(np.round(rng.normal(500.0, 5.0, episodes), 2))
    return {
        "kind": qat_study.CONTROL_KIND, "pair": pair.key, "seed": seed, "steps": pair.steps,
        "curve": [[10, 1.0], [20, 2.0]], qat_study.CONTROL_KIND: ret,
    }  # fmt: skip


def _fake_qat(pair: qat_study.Pair, bits: int, seed: int, episodes: int) -> dict[str, Any]:
    rng = np.random.default_rng(100 + seed)
    ret = list(np.round(rng.normal(500.0 - 5 * (8 - bits), 5.0, episodes), 2))
    check = {"layers": {"l0": {"max_diff_over_bound": 0.1}}, "action_agreement": 1.0}
    return {
        "kind": "qat", "pair": pair.key, "seed": seed, "bits": bits, "steps": pair.steps, "quant_delay": 5,
        "curve": [[10, 1.0], [20, 2.0]], "qat_deployed": ret, "qat_fake_quant": ret, "deploy_check": check,
    }  # fmt: skip


def test_workers_resume_and_the_report_renders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[tuple[str, int | None, int]] = []
    crash_at = {"n": 3}

    def fp32(pair: qat_study.Pair, seed: int, bits: list[int], episodes: int, out: Path) -> dict[str, Any]:
        if len(ran) == crash_at["n"]:
            raise KeyboardInterrupt  # the worker killed mid-grid
        ran.append((pair.key, None, seed))
        return _fake_fp32(pair, seed, bits, episodes)

    def qat(
        pair: qat_study.Pair, bits: int, seed: int, episodes: int, schedule: str, out: Path
    ) -> dict[str, Any]:
        ran.append((pair.key, bits, seed))
        return _fake_qat(pair, bits, seed, episodes)

    def control(pair: qat_study.Pair, seed: int, episodes: int, out: Path) -> dict[str, Any]:
        ran.append((pair.key, qat_study.CONTROL, seed))
        return _fake_control(pair, seed, episodes)

    monkeypatch.setattr(qat_study, "run_fp32_cell", fp32)
    monkeypatch.setattr(qat_study, "run_qat_cell", qat)
    monkeypatch.setattr(qat_study, "run_control_cell", control)
    # the subset's worker A, at bits 8,4 and 10 seeds: 10 fp32 + 10 fine-tune controls + 20 QAT cells
    argv = [
        "qat-study",
        "--out",
        str(tmp_path),
        *_make_var("QAT_SUBSET_A"),
        "--bits",
        "8,4",
        "--episodes",
        "4",
    ]
    with pytest.raises(KeyboardInterrupt):
        cli.main(argv)
    records = sorted((tmp_path / "records").rglob("*.json"))
    assert len(records) == 3 == len(ran)  # every finished cell wrote its record before the next started
    crash_at["n"] = -1
    assert cli.main(argv) == 0
    assert len(ran) == 40 and len(set(ran)) == 40  # the rerun ran only the 37 missing cells
    assert [b for _, b, _ in ran[10:20]] == [
        qat_study.CONTROL
    ] * 10  # the controls right after the fp32 cells
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "records").rglob("*.json")}
    assert cli.main(argv) == 0
    assert len(ran) == 40  # a finished grid reruns nothing
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "records").rglob("*.json")} == before

    (tmp_path / "README.md").write_text(
        "x\n<!-- qat-report:status -->\nstale 21\n<!-- /qat-report:status -->\ny\n"
    )
    assert cli.main(["qat-report", str(tmp_path)]) == 0
    report = (tmp_path / "report.md").read_text()
    assert "| ppo_CartPole-v1 | 10/10 | 10/10 | 10/10 | 10/10 |" in report  # fp32, ft32, qat8, qat4
    summary = json.loads((tmp_path / "summary.json").read_text())
    rows = {r["bits"]: r for r in summary["pairs"]["ppo_CartPole-v1"]["rows"]}
    # fake QAT at 4 bits loses 20, PTQ W+A 160: ten seeds each, fully separated, a claim survives Holm (m = 4)
    assert rows[4]["qat_vs_ptq_wa"]["verdict"] == "QAT better" and summary["family"] == 4
    assert rows[8]["qat_vs_ptq_wa"]["verdict"] == qat_stats.NO_DIFFERENCE
    readme = (tmp_path / "README.md").read_text()
    assert "stale 21" not in readme and "40 cells in 1 pair " in readme and readme.endswith("y\n")
