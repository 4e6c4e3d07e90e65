"""How many weight versions a run's evaluations scored, and the caveat when precisions had different bars."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from actorq.report import stats
from actorq.report.cli import build_report
from actorq.report.records import write_record
from tests.unit.report.synthetic import edit_evaluator_rows, make_run

# Six evaluations at 0, then six at 1000: every run's best mean of 3 is 1000, the threshold 950, and the first
# window at it is evaluations 6, 7 and 8.
STEP_UP = np.array([0.0] * 6 + [1000.0] * 6)


def _evaluate_each_version(path: Path, times: int) -> None:
    """Rewrite the run's evaluator rows as an evaluator on a clock would make them against a learner publishing
    every 50 steps: each version (learner step 50, 100, ...) scored ``times`` times in a row."""

    def restep(i: int, row: dict) -> None:
        row["step"] = 50 * (1 + i // times)

    edit_evaluator_rows(path, restep)


def _section(text: str) -> str:
    head = "### Evaluations per weight version"
    return text[text.index(head) : text.index("### Convergence")]


def _report(root: Path, fp32_times: int, int8_times: int) -> tuple[str, Path]:
    runs = root / "runs"
    for seed in (0, 1):
        for precision, times in (("fp32", fp32_times), ("int8", int8_times)):
            _evaluate_each_version(make_run(runs, precision, seed, STEP_UP), times)
    return build_report([str(runs)], root / "r").read_text(), runs


def test_evaluations_per_version_counts_only_evaluations_after_learning_began():
    assert stats.evaluations_per_version([0, 0, 50, 50, 50, 100]) == pytest.approx(2.0)
    assert stats.evaluations_per_version([0, 50, 100, 150]) == pytest.approx(1.0)
    assert stats.evaluations_per_version([0, 0]) is None


def test_versions_in_window_counts_the_distinct_versions_the_window_scored():
    steps = [0, 50, 50, 100, 100, 100]
    assert stats.versions_in_window(steps, 5, 3) == 1
    assert stats.versions_in_window(steps, 3, 3) == 2
    # The window holds only evaluations after learning began, as the threshold's smoothing does.
    assert stats.versions_in_window(steps, 1, 3) == 1
    with pytest.raises(ValueError, match="before the learner's first update"):
        stats.versions_in_window(steps, 0, 3)


def test_a_precision_evaluated_three_times_per_version_gets_the_caveat(tmp_path):
    text, runs = _report(tmp_path, fp32_times=3, int8_times=1)
    section = _section(text)
    # fp32: 12 evaluations of 4 versions; its window at evaluations 6-8 scored one version (the third).
    assert "| fp32 | 2 | 3.00 [3.00, 3.00] | 1: 2 (2 reached) |" in section
    assert "| int8 | 2 | 1.00 [1.00, 1.00] | 3: 2 (2 reached) |" in section
    assert "**Caveat: the threshold was not the same bar for every precision.**" in text
    assert "int8 1.00 against fp32 3.00" in text
    per_run = json.loads((tmp_path / "r" / "report.json").read_text())
    fp32 = next(iter(per_run.values()))["labels"]["fp32"]["per_run"]
    assert {(r["evaluations_per_version"], r["reach_versions"]) for r in fp32.values()} == {(3.0, 1)}

    # The curated records carry the learner steps: the report from them says the same.
    for path in sorted(p for p in runs.iterdir() if p.is_dir()):
        write_record(path, tmp_path / "records")
    again = build_report([str(tmp_path / "records")], tmp_path / "r2").read_text()
    assert _section(again) == section


def test_the_same_evaluations_per_version_get_no_caveat(tmp_path):
    text, _ = _report(tmp_path, fp32_times=1, int8_times=1)
    assert "| fp32 | 2 | 1.00 [1.00, 1.00] | 3: 2 (2 reached) |" in _section(text)
    assert "not the same bar" not in text
