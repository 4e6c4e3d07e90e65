"""The QAT study's statistics (actorq.studies.qat_stats) and the committed study's README against its records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from actorq.report import coverage
from actorq.studies import qat_md, qat_stats

ROOT = Path(__file__).resolve().parents[3]
COMMITTED = ROOT / "reports" / "studies" / "qat_convergence"


def _comparison(p: float, n: int, better: float = 0.9) -> dict:
    return {"p": p, "n_qat": n, "n_ptq": n, "p_improvement": {"value": better}}


def test_claims_need_ten_seeds_and_survive_holm() -> None:
    family = [
        _comparison(1e-4, 10),  # 4e-4 after Holm: a claim
        _comparison(1e-4, 10, better=0.1),  # the other direction
        _comparison(1e-4, 9),  # significant but 9 seeds: no claim
        _comparison(0.02, 10),  # the largest of 4: 0.02 x 1, a claim
    ]
    qat_stats.decide(family)
    assert [c["verdict"] for c in family] == [
        "QAT better", "PTQ better", qat_stats.TOO_FEW, "QAT better",
    ]  # fmt: skip
    assert family[3]["p_holm"] == pytest.approx(0.02) and family[0]["family"] == 4
    more = [_comparison(1e-4, 10) for _ in range(3)] + [_comparison(0.02, 10)]
    more.append(_comparison(0.02, 10))
    qat_stats.decide(more)
    assert more[3]["p_holm"] == pytest.approx(0.04) and more[3]["verdict"] == "QAT better"
    few = [_comparison(0.03, 10), _comparison(0.04, 10)]
    qat_stats.decide(few)  # uncorrected both < 0.05; Holm: 0.06, 0.06
    assert [c["verdict"] for c in few] == [qat_stats.NO_DIFFERENCE] * 2


def test_mann_whitney_p() -> None:
    assert qat_stats.mann_whitney_p([500.0] * 3, [500.0] * 3) == 1.0
    assert qat_stats.mann_whitney_p([], [1.0]) is None
    assert qat_stats.mann_whitney_p([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]) == pytest.approx(
        0.1
    )  # exact floor at 3 vs 3
    assert qat_stats.mann_whitney_p(list(range(10, 20)), list(range(10))) < 1e-3  # normal approx. above 8


def test_relative_loss_is_paired_by_seed() -> None:
    fp = {0: 500.0, 1: 150.0, 2: 480.0, 3: 300.0}  # a large seed-to-seed spread
    ptq = {
        s: r - 0.01 * r * (1 + s % 2) for s, r in fp.items()
    }  # each policy loses 1% or 2% of its own return
    e = qat_stats.relative_loss(ptq, fp)
    assert e["value"] == pytest.approx(100 * (1 - sum(ptq.values()) / sum(fp.values()))) and e["n"] == 4
    assert 0.999 <= e["low"] <= e["high"] <= 2.001  # unpaired, the spread would swamp a 1-2% loss
    assert "n=4 seeds" in e["coverage"]
    assert qat_stats.relative_loss({0: 1.0}, {1: 2.0})["value"] is None  # no common seed
    neg = qat_stats.relative_loss({0: -200.0, 1: -200.0, 2: -200.0}, {0: -100.0, 1: -100.0, 2: -100.0})
    assert neg["value"] == pytest.approx(100.0)  # a more negative reward is a loss
    assert qat_stats.relative_loss({0: 1.0, 1: 2.0}, {0: 1.0, 1: -1.0})["value"] is None  # fp32 mean 0


def test_lowest_within() -> None:
    rows = [{"bits": b, "qat": {"E%": {"value": e}}} for b, e in ((8, 0.0), (6, 4.0), (4, 9.0), (2, 1.0))]
    assert qat_stats.lowest_within(rows, "qat") == 6  # 2 bits passing again does not count: 4 failed
    assert qat_stats.lowest_within([{"bits": 8, "qat": {"E%": {"value": 6.0}}}], "qat") is None


def test_readme_blocks_rewritten_in_place(tmp_path: Path) -> None:
    path = tmp_path / "README.md"
    path.write_text("a\n<!-- qat-report:status -->\nold\n<!-- /qat-report:status -->\nb\n<!-- qat-report:x -->\nk\n"
                    "<!-- /qat-report:x -->\n")  # fmt: skip
    assert qat_md.update_readme(path, {"status": "new\n"}) == ["status"]
    assert qat_md.readme_blocks(path.read_text()) == {"status": "new\n", "x": "k\n"}
    assert path.read_text().startswith("a\n") and "\nb\n" in path.read_text()
    assert qat_md.update_readme(tmp_path / "none.md", {"status": "x"}) == []


def test_relative_loss_coverage_is_what_the_simulation_gives() -> None:
    # a paired percentile bootstrap of 3 seeds undercovers like the mean's (about 76% for a nominal 95%)
    share = coverage.simulate("relative", 3, 200)
    assert abs(coverage.COVERAGE["relative"][3][0] - share) < 0.1 and share < 0.9
    assert "n=3 seeds: real coverage 76%" in coverage.note("relative", 3)
    assert coverage.COVERAGE["relative"][10][0] > coverage.COVERAGE["relative"][3][0]


PAIR = "ppo_Hopper-v4"


def _write_study(out: Path, control: bool) -> None:
    """fp32 policies of 3 seeds with a large spread; the fine-tune alone adds 50% to each (the control); 6-bit QAT
    of each seed loses 2% of its own control's return."""
    fp32 = {0: 100.0, 1: 200.0, 2: 300.0}
    recs: dict[str, Any] = {}
    for s, r in fp32.items():
        ft, q = 1.5 * r, 0.98 * 1.5 * r
        recs[f"fp32_s{s}"] = {
            "kind": "fp32", "pair": PAIR, "seed": s, "steps": 1000, "curve": [], "fp32": [r, r],
            "ptq_w": {"6": [r, r]}, "ptq_wa": {"6": [0.5 * r, 0.5 * r]},
        }  # fmt: skip
        recs[f"qat6_s{s}"] = {
            "kind": "qat", "pair": PAIR, "seed": s, "bits": 6, "steps": 1000, "schedule": "finetune",
            "recipe": {"finetune_steps": 100}, "curve": [], "qat_deployed": [q, q], "qat_fake_quant": [q, q],
            "deploy_check": {"layers": {"l0": {"max_diff_over_bound": 0.1}}, "action_agreement": 1.0},
        }  # fmt: skip
        if control:
            recs[f"ft32_s{s}"] = {
                "kind": qat_stats.CONTROL_KIND, "pair": PAIR, "seed": s, "steps": 1000, "curve": [],
                qat_stats.CONTROL_KIND: [ft, ft],
            }  # fmt: skip
    (out / "records" / PAIR).mkdir(parents=True)
    for name, rec in recs.items():
        (out / "records" / PAIR / f"{name}.json").write_text(json.dumps(rec))


def test_control_gets_its_row_and_qat_its_paired_loss_against_it(tmp_path: Path) -> None:
    _write_study(tmp_path, control=True)
    recs = qat_stats.load(tmp_path)
    assert sorted(recs[PAIR]) == ["fp32", qat_stats.CONTROL, "qat6"]
    res = qat_stats.summarize(recs)["pairs"][PAIR]
    assert res["control"]["mean"]["value"] == pytest.approx(300.0) and res["control"]["n"] == 3
    assert res["control"]["E%"]["value"] == pytest.approx(-50.0)  # the extra training alone
    (row,) = res["rows"]
    assert row["qat"]["E%"]["value"] == pytest.approx(-47.0)  # against fp32: quantization + training
    vs = row["qat_vs_control"]  # against the control: the quantization alone, paired by seed
    assert (
        vs["value"] == pytest.approx(2.0) and vs["low"] == pytest.approx(2.0) == vs["high"] and vs["n"] == 3
    )
    report = qat_md.render(tmp_path).read_text()
    assert f"| {PAIR} | 3/3 | 3/3 | 3/3 |" in report and "| pair | fp32 | ft32 | qat6 |" in report
    assert f"| {qat_stats.CONTROL_LABEL} | 300.0 [" in report
    assert "QAT E% vs control [CI] |" in report and "| 2.0 [2.0, 2.0] |" in report
    assert "isolates the quantization" in report and "includes the extra training" in report
    assert "3 fine-tune controls" in report and "Records: 9 cells" in report
    assert (
        f"{PAIR}: QAT's E% against the {qat_stats.CONTROL_LABEL} (the quantization alone) holds 0 at no"
        in report
    )


def test_without_control_records_nothing_of_it_appears(tmp_path: Path) -> None:
    _write_study(tmp_path, control=False)
    res = qat_stats.summarize(qat_stats.load(tmp_path))["pairs"][PAIR]
    assert "control" not in res and "qat_vs_control" not in res["rows"][0]  # summary.json as before
    report = qat_md.render(tmp_path).read_text()
    for text in ("fine-tune control", qat_stats.CONTROL_LABEL, "vs control", "ft32"):
        assert text not in report, text
    assert "| pair | fp32 | qat6 |" in report


def test_a_pair_without_qat_records_claims_nothing() -> None:
    """A zoo agent whose fp32 replicates and controls exist but no QAT cell yet: no 'holds 0 at no bits'."""
    rows = [{"bits": 8, "qat": None, "qat_vs_control": None}]
    summary = {"family": 0, "pairs": {"zoo_x": {"rows": rows, "control": {"mean": {"value": 1.0}}}}}
    block = qat_md.claims_block(summary)
    assert "zoo_x: no QAT records yet (nothing to claim)." in block
    assert "holds 0" not in block
