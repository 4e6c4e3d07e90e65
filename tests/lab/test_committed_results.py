"""The committed results under reports/ agree with what the package renders from their records (lab checks: they
guard the curated results, not the product's behaviour)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from actorq.studies import qat_md, qat_stats
from actorq.studies.zoo_table import table2_markdown
from tests.unit.report.synthetic import make_run, ramp_returns
from tests.unit.report.test_plan_input import TASK, tables
from tests.unit.studies.test_qat_stats import COMMITTED as QAT_COMMITTED
from tests.unit.test_zoo_table import COMMITTED as ZOO_COMMITTED


def test_the_committed_plans_own_prediction_is_the_reports(tmp_path):
    # The plan and the report share the regime model: runs at the plan's recommended setting get the plan's
    # predicted speed-up from the plan's own figures.
    path = Path(__file__).parents[2] / "reports/plan-2026-11-27-zen4/plan.json"
    data = json.loads(path.read_text())
    setting = data["meta"]["recommendation"]["setting"]
    machine = copy.deepcopy(data["meta"]["machine"])
    runs = tmp_path / "runs"
    for seed in range(2):
        for precision, rate in (("fp32", 400.0), (setting["precision"], 1600.0)):
            make_run(
                runs, precision, seed, ramp_returns(20, 100.0), steps_per_s=rate, spi=setting["spi"], batch=64,
                learner_rate=rate * setting["spi"] / 64, hardware=machine,
                config_extra={
                    "algorithm": data["meta"]["algorithm"], "env": {"suite": "gym", "task": "CartPole-v1"},
                    "network": {"policy_layers": data["meta"]["policy_layers"]},
                    "affinity": {"learner": [0], "actor": [1]},
                    "actor": {"envs_per_actor": setting["envs_per_actor"], "num_actors": 1},
                },
            )  # fmt: skip
            summary = runs / f"{precision}-s{seed}" / "summary.json"
            summary.write_text(summary.read_text().replace(TASK, data["meta"]["task"]))
    t = tables(runs, path)
    assert t.predicted_speedup(setting["precision"]) == pytest.approx(setting["speedup_vs_fp32"])


def test_committed_readme_says_what_the_records_hold() -> None:
    """The README's generated blocks equal what the records give (counts) and what report.md claims."""
    recs = qat_stats.load(QAT_COMMITTED)
    readme = (QAT_COMMITTED / "README.md").read_text()
    blocks = qat_md.readme_blocks(readme)
    assert blocks["status"] == qat_md.status_block(recs)
    report = (QAT_COMMITTED / "report.md").read_text()
    assert blocks["claims"] in report
    n_qat = sum(len(s) for by in recs.values() for k, s in by.items() if k.startswith("qat"))
    n_fp32 = sum(len(by["fp32"]) for by in recs.values())
    for m in re.finditer(r"(\d+) (QAT|fp32) policies", readme):  # every count the prose gives
        assert int(m.group(1)) == {"QAT": n_qat, "fp32": n_fp32}[m.group(2)], m.group(0)
    assert qat_md.status_block(recs).startswith(f"Records: {n_qat + n_fp32} cells")
    grid = dict(re.findall(r"^\| (\w+_[\w-]+) \| ((?:\d+/\d+ \| ?)+)$", report, re.M))
    assert set(grid) == set(recs)
    for pair, cells in grid.items():  # report.md's "seeds with a record" grid
        cols = ["fp32", *(f"qat{b}" for b in qat_stats.widths(recs))]
        assert [int(x) for x in re.findall(r"(\d+)/\d+", cells)] == [len(recs[pair].get(c, {})) for c in cols]


def test_the_committed_report_holds_the_tables_the_package_renders():
    text = table2_markdown(ZOO_COMMITTED)
    report = (ZOO_COMMITTED / "report.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert len(rows) >= 10 and all(row in report for row in rows)
