"""Runs that shared the machine with other work: measured or estimated, shown per run, flagged above the limit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from actorq.metrics import OUTSIDE_LOAD_LIMIT
from actorq.report.cli import build_report
from actorq.report.disturbance import (
    CODECARBON,
    MEASURED,
    cpu_double_counted,
    disturbed,
    measured_share,
    outside_share,
)
from actorq.report.records import load_records, write_record
from actorq.report.runs import load_run
from tests.unit.report.synthetic import make_run, ramp_returns


def _set_energy(path: Path, **fields) -> None:
    summary = json.loads((path / "summary.json").read_text())
    summary["energy"].update(fields)
    (path / "summary.json").write_text(json.dumps(summary))


def _measured(path: Path, share: float, cores: int = 2) -> None:
    seconds = 100.0
    _set_energy(
        path,
        seconds=seconds,
        machine_cores=cores,
        outside_cpu_seconds=share * seconds * cores,
        cpu_seconds=150.0,
    )


def test_the_launchers_measurement_comes_first(tmp_path):
    path = make_run(tmp_path, "fp32", 0, ramp_returns(10, 50))
    assert outside_share(load_run(path)) == (None, None)  # neither figure: unknown, not zero
    _measured(path, 0.25)
    (path / "emissions.csv").write_text("cpu_utilization_percent,cpu_count\n10.0,2\n")
    share, source = outside_share(load_run(path))
    assert source == MEASURED and share == pytest.approx(0.25)


def test_older_runs_are_estimated_from_codecarbons_machine_load(tmp_path):
    path = make_run(tmp_path, "fp32", 0, ramp_returns(10, 50))
    # The run used 1.4 of 2 cores; codecarbon saw the machine 95% busy: others used 0.95 - 0.70 = 25%.
    _set_energy(path, seconds=100.0, cpu_seconds=140.0)
    (path / "emissions.csv").write_text("duration,cpu_utilization_percent,cpu_count\n100,95.0,2\n")
    share, source = outside_share(load_run(path))
    assert source == CODECARBON and share == pytest.approx(0.25)
    # A run that kept the machine to itself can read slightly above codecarbon's load: never below zero.
    (path / "emissions.csv").write_text("duration,cpu_utilization_percent,cpu_count\n100,69.0,2\n")
    assert outside_share(load_run(path)) == (0.0, CODECARBON)


def test_the_measured_share_needs_the_launchers_three_figures():
    energy = {"seconds": 200.0, "outside_cpu_seconds": 40.0, "machine_cores": 2}
    assert measured_share({"energy": energy}) == pytest.approx(0.1)
    for missing in energy:
        assert measured_share({"energy": {k: v for k, v in energy.items() if k != missing}}) is None
    assert measured_share({"energy": dict(energy, seconds=0.0)}) is None and measured_share({}) is None


def test_the_limit_is_strict():
    assert not disturbed(None) and not disturbed(OUTSIDE_LOAD_LIMIT) and disturbed(OUTSIDE_LOAD_LIMIT + 0.01)


def test_the_report_flags_disturbed_runs_by_name_from_records_as_from_run_dirs(tmp_path):
    runs = tmp_path / "runs"
    for seed in (0, 1):
        for precision in ("fp32", "int8"):
            path = make_run(runs, precision, seed, ramp_returns(12, 60, seed=seed))
            _measured(path, 0.30 if (precision, seed) == ("fp32", 1) else 0.01)
    text = build_report([str(runs)], tmp_path / "r").read_text()
    assert "**1 of 4 runs shared the machine**" in text and "fp32-s1 (30%)" in text
    assert "| **30%** |" in text and "| 1% |" in text  # the per-run column
    data = json.loads((tmp_path / "r" / "report.json").read_text())
    per_run = {
        name: numbers
        for task in data.values()
        for cell in task["labels"].values()
        for name, numbers in cell["per_run"].items()
    }
    assert per_run["fp32-s1"]["outside_share"] == pytest.approx(0.30)
    assert per_run["int8-s0"]["outside_source"] == MEASURED

    # The curated records carry the figure: the report from them says the same.
    for path in sorted(p for p in runs.iterdir() if p.is_dir()):
        write_record(path, tmp_path / "records")
    loaded, skipped = load_records([tmp_path / "records"])
    assert len(loaded) == 4 and not skipped
    text = build_report([str(tmp_path / "records")], tmp_path / "r2").read_text()
    assert "**1 of 4 runs shared the machine**" in text and "fp32-s1 (30%)" in text


def test_a_quiet_machine_is_said_so_and_unknown_figures_say_nothing(tmp_path):
    for precision in ("fp32", "int8"):
        _measured(make_run(tmp_path / "quiet", precision, 0, ramp_returns(12, 60)), 0.012)
        make_run(tmp_path / "unknown", precision, 0, ramp_returns(12, 60))
    text = build_report([str(tmp_path / "quiet")], tmp_path / "r1").read_text()
    assert "Other processes used at most 1.2% of the machine while each run ran" in text
    text = build_report([str(tmp_path / "unknown")], tmp_path / "r2").read_text()
    assert "shared the machine" not in text and "Other processes used at most" not in text


def test_a_cpu_curve_faster_than_the_machine_is_a_miscount():
    energy = {"machine_cores": 2, "cpu_seconds": 200.0, "machine_cpu_seconds": 204.0}
    steady = [[t, 1.9 * t] for t in range(0, 101, 5)]
    assert not cpu_double_counted(energy, steady)
    # A role re-counted with its CPU so far: 60 s in a 5-s interval of a 2-core machine.
    jump = [[t, 1.9 * t + (60.0 if t >= 50 else 0.0)] for t in range(0, 101, 5)]
    assert cpu_double_counted(energy, jump)
    # The last interval adds the reaped roles' children at once: not a miscount by itself.
    assert not cpu_double_counted(energy, steady + [[100.5, 190.0 + 12.0]])
    # Nor is the sampling slack between the run's total and /proc/stat's; more than the whole machine ran is.
    assert cpu_double_counted(dict(energy, cpu_seconds=260.0), steady)
    assert not cpu_double_counted({k: v for k, v in energy.items() if k != "machine_cores"}, jump)


def test_a_miscounted_run_has_no_cpu_figures_and_the_report_names_it(tmp_path):
    runs = tmp_path / "runs"
    for precision in ("fp32", "int8"):
        path = make_run(runs, precision, 0, ramp_returns(12, 60))
        _measured(path, 0.01)
    rows = "\n".join(
        f"{i},{t},{1.5 * t + (900.0 if t >= 40 else 0.0)},{t}" for i, t in enumerate(range(0, 101, 5))
    )
    (runs / "fp32-s0" / "energy" / "metrics.csv").write_text("step,elapsed,cpu_seconds,time\n" + rows + "\n")
    for source, out in ((runs, "r"), (None, "r2")):
        if source is None:  # the same from the curated records
            for path in sorted(p for p in runs.iterdir() if p.is_dir()):
                write_record(path, tmp_path / "records")
            source = tmp_path / "records"
        text = build_report([str(source)], tmp_path / out).read_text()
        assert "1 run(s) have no figure, and no energy estimate" in text and "twice" in text
        data = json.loads((tmp_path / out / "report.json").read_text())
        per_run = {
            name: numbers
            for task in data.values()
            for cell in task["labels"].values()
            for name, numbers in cell["per_run"].items()
        }
        assert per_run["fp32-s0"]["outside_share"] is None
        assert per_run["int8-s0"]["outside_share"] == pytest.approx(0.01)
