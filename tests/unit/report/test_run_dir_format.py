"""The run directory is the runtime's interface to the lab: its format is versioned, and a reader refuses a newer one."""

from __future__ import annotations

import json

import numpy as np
import pytest

from actorq.report.runs import load_run
from actorq.status import RUN_DIR_FORMAT
from tests.unit.report.synthetic import make_run


def _set_format(path, value) -> None:
    summary = json.loads((path / "summary.json").read_text())
    summary["run_dir_format"] = value
    (path / "summary.json").write_text(json.dumps(summary))


def test_runs_of_this_format_and_older_ones_without_the_field_are_read(tmp_path):
    run = make_run(tmp_path, "int8", 0, np.linspace(0, 100, 10))
    assert load_run(run).summary.get("run_dir_format") is None  # made before the field existed: format 1
    _set_format(run, RUN_DIR_FORMAT)
    assert load_run(run).summary["run_dir_format"] == RUN_DIR_FORMAT


@pytest.mark.parametrize("value", [RUN_DIR_FORMAT + 1, "1", None])
def test_a_newer_or_unreadable_format_is_refused_with_what_to_do(tmp_path, value):
    run = make_run(tmp_path, "int8", 0, np.linspace(0, 100, 10))
    _set_format(run, value)
    with pytest.raises(ValueError, match="run directory format .* reads up to"):
        load_run(run)
