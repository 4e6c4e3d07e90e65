"""``actorq experiment``'s plan order and its finished-run rule (pure functions; the real runs are in
tests/integration/test_experiment.py)."""

from __future__ import annotations

import json

from actorq.experiments.orchestration import plan_runs, run_finished


def test_plan_interleaves_precisions_in_a_latin_square():
    runs = plan_runs(["fp32", "fp16", "int8"], [0, 1, 2])
    assert [r.name for r in runs] == [
        "fp32-s0", "fp16-s0", "int8-s0", "fp16-s1", "int8-s1", "fp32-s1", "int8-s2", "fp32-s2", "fp16-s2",
    ]  # fmt: skip
    firsts = [runs[i].label for i in (0, 3, 6)]
    assert sorted(firsts) == ["fp16", "fp32", "int8"]  # no precision always goes first


def test_run_finished_rules(tmp_path):
    assert not run_finished(tmp_path)
    for reason, done in (
        ("max_minutes", True),
        ("target", True),
        ("interrupted", False),
        ("role_failed", False),
    ):
        (tmp_path / "summary.json").write_text(json.dumps({"exit": reason}))
        assert run_finished(tmp_path) is done
    (tmp_path / "summary.json").write_text("{not json")
    assert not run_finished(tmp_path)
