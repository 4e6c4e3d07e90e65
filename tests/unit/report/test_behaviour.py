"""The report's table of how quantized actors act (``evaluator.evaluate_quantized`` runs), from runs and records."""

from __future__ import annotations

from pathlib import Path

from actorq.report.cli import build_report
from actorq.report.records import write_record
from tests.unit.report.synthetic import edit_evaluator_rows, make_run, ramp_returns


def _add_quantized_columns(path: Path, agreement: float, untrained_agreement: float, gap: float) -> None:
    """What an ``evaluate_quantized`` evaluator adds to each row: agreement (another value before the learner's
    first update, which the table must leave out) and the broadcast policy's return, ``gap`` below fp32's."""

    def add(_: int, row: dict) -> None:
        learned = int(row["step"]) > 0
        row["quantized_agreement"] = agreement if learned else untrained_agreement
        row["agreement_states"] = 500
        row["quantized_return"] = float(row["eval_return"]) + gap

    edit_evaluator_rows(path, add)


def _behaviour_section(text: str) -> str:
    head = "### How the quantized actors act"
    return text[text.index(head) : text.index("### Actor runtime breakdown")] if head in text else ""


def test_the_table_gives_each_precisions_median_agreement_over_runs_after_learning_began(tmp_path):
    runs = tmp_path / "runs"
    for seed, agreement in ((0, 0.90), (1, 0.80), (2, 0.95)):
        make_run(runs, "fp32", seed, ramp_returns(12, 60, seed=seed))
        path = make_run(runs, "int8", seed, ramp_returns(12, 60, seed=seed), untrained_evals=7)
        _add_quantized_columns(path, agreement, untrained_agreement=0.10, gap=-5.0)
    section = _behaviour_section(build_report([str(runs)], tmp_path / "r").read_text())
    # Medians of 90%, 80%, 95% (the 7 of 12 evaluations at 10% before learning began left out); fp32 runs have no such columns, so no fp32 row.
    assert "| int8 | 3 | 90.0% [80.0%, 95.0%] |  | -5.0 [-5.0, -5.0] |" in section
    assert "| fp32 |" not in section

    # The curated records carry the columns: the report from them says the same.
    for path in sorted(p for p in runs.iterdir() if p.is_dir()):
        write_record(path, tmp_path / "records")
    again = _behaviour_section(build_report([str(tmp_path / "records")], tmp_path / "r2").read_text())
    assert again == section


def test_runs_without_the_columns_get_no_section(tmp_path):
    for precision in ("fp32", "int8"):
        make_run(tmp_path / "runs", precision, 0, ramp_returns(12, 60))
    text = build_report([str(tmp_path / "runs")], tmp_path / "r").read_text()
    assert "How the quantized actors act" not in text
