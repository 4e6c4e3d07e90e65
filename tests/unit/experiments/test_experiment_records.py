"""``actorq experiment``'s record writing: a run it cannot read is logged and the grid goes on; a bug is not."""

from __future__ import annotations

import argparse
import logging

import pytest

from actorq.experiments import experiment
from actorq.experiments.experiment import Experiment
from actorq.experiments.orchestration import PlannedRun


def _experiment(tmp_path) -> Experiment:
    args = argparse.Namespace(
        out=str(tmp_path / "out"), records=None, config="c.yaml", overrides=[], precisions="fp32", seed_list=[0],
        sweep=[], interruptions="rerun",
    )  # fmt: skip
    return Experiment(args, [PlannedRun("fp32", 0)])


def test_an_unreadable_run_directory_is_logged_and_the_grid_goes_on(tmp_path, caplog):
    exp = _experiment(tmp_path)
    (exp.out / "fp32-s0").mkdir(parents=True)  # no summary.json: the run died before writing it
    with caplog.at_level(logging.ERROR):
        assert exp._write_record(PlannedRun("fp32", 0)) is False
    assert "could not write the record of fp32-s0" in caplog.text and "summary.json" in caplog.text
    assert not (exp.records_dir / "fp32-s0.json").exists()


def test_a_bug_in_the_record_writer_is_not_swallowed(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise TypeError("a report-side bug")

    monkeypatch.setattr(experiment, "write_record", broken)
    with pytest.raises(TypeError, match="report-side bug"):
        _experiment(tmp_path)._write_record(PlannedRun("fp32", 0))
