"""Run directories are safe: a new run never writes into another run's directory, and `make run` gets a new one.

``actorq.cli.main`` runs in this process with the launcher replaced by a stub, so nothing is started.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import actorq.cli as cli
import actorq.launchers.train
from actorq.errors import ExitCode

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "configs/dqn/gym_cartpole.yaml")


class _NoLaunch:
    """Stands in for the launch: records the run directory, starts nothing."""

    started: list[Path] = []

    @staticmethod
    def launch(config, run_dir, config_path, **options) -> int:
        _NoLaunch.started.append(Path(run_dir))
        return 0


@pytest.fixture(autouse=True)
def no_launch(monkeypatch):
    _NoLaunch.started = []
    monkeypatch.setattr(actorq.launchers.train, "launch", _NoLaunch.launch)


def _errors(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]


def test_new_run_dir_is_used_and_printed(tmp_path, capsys):
    run_dir = tmp_path / "fresh"
    assert cli.main(["train", CONFIG, "--run-dir", str(run_dir), "--quiet"]) == 0
    assert _NoLaunch.started == [run_dir]
    assert f"run directory: {run_dir}" in capsys.readouterr().out
    assert (run_dir / "config.yaml").is_file()


def test_empty_existing_run_dir_is_accepted(tmp_path):
    assert cli.main(["train", CONFIG, "--run-dir", str(tmp_path), "--quiet"]) == 0
    assert _NoLaunch.started == [tmp_path]


def test_non_empty_run_dir_without_resume_is_refused(tmp_path, capsys):
    (tmp_path / "summary.json").write_text("{}")
    (tmp_path / "learner").mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    code = cli.main(["train", CONFIG, "--run-dir", str(tmp_path), "--quiet"])
    assert code == ExitCode.USAGE and not _NoLaunch.started
    errors = _errors(capsys)
    assert len(errors) == 1
    # The message names both ways out: resume that run, or use another directory.
    assert f"--resume {tmp_path}" in errors[0] and "new or empty --run-dir" in errors[0]
    assert "learner" in errors[0] and "summary.json" in errors[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written, nothing removed


def test_second_run_into_the_same_dir_is_refused(tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert cli.main(["train", CONFIG, "--run-dir", str(run_dir), "--quiet"]) == 0
    assert cli.main(["train", CONFIG, "--run-dir", str(run_dir), "--quiet"]) == ExitCode.USAGE
    assert _NoLaunch.started == [run_dir]
    assert "is not empty" in _errors(capsys)[0]


def test_run_dir_that_is_a_file_is_refused(tmp_path, capsys):
    path = tmp_path / "afile"
    path.write_text("x")
    assert cli.main(["train", CONFIG, "--run-dir", str(path), "--quiet"]) == ExitCode.USAGE
    assert "is a file" in _errors(capsys)[0]


def test_resume_with_another_run_dir_is_refused(tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert cli.main(["train", CONFIG, "--run-dir", str(run_dir), "--quiet"]) == 0
    other = tmp_path / "other"
    code = cli.main(["train", "--resume", str(run_dir), "--run-dir", str(other), "--quiet"])
    assert code == ExitCode.USAGE and _NoLaunch.started == [run_dir] and not other.exists()
    errors = _errors(capsys)
    assert len(errors) == 1 and str(other) in errors[0] and f"--run-dir {run_dir}" in errors[0]
    # Naming the same directory (spelled differently) is fine, and so is leaving --run-dir out.
    same = str(run_dir) + "/"
    assert cli.main(["train", "--resume", str(run_dir), "--run-dir", same, "--quiet"]) == 0
    assert cli.main(["train", "--resume", str(run_dir), "--quiet"]) == 0
    assert _NoLaunch.started == [run_dir] * 3


@pytest.mark.subprocess
@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_run_uses_a_new_dated_directory():
    dry = subprocess.run(["make", "-n", "run"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    dirs = re.findall(r"--run-dir (\S+)", dry.stdout)
    assert len(dirs) == 1 and re.fullmatch(r"runs/make-run-\d{8}-\d{6}", dirs[0]), dry.stdout
