"""reports/ is a curated, indexed tree: every folder is in the index and has a README; no raw run output in git."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REPORTS = ROOT / "reports"
RAW = (".log", "port", "metrics.csv", "checkpoint")


def _tracked() -> list[str]:
    try:
        out = subprocess.run(
            ["git", "ls-files", "reports"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return out.split()


def test_every_report_folder_is_indexed_and_described():
    index = (REPORTS / "README.md").read_text()
    folders = sorted({Path(p).parts[1] for p in _tracked() if len(Path(p).parts) > 2})
    assert folders
    for folder in folders:
        assert f"]({folder}/" in index, f"reports/{folder} is not in reports/README.md"
    for readme_dir in {Path(p).parent for p in _tracked() if p.endswith("report.md")}:
        assert (ROOT / readme_dir / "README.md").is_file() or (
            ROOT / readme_dir.parent / "README.md"
        ).is_file(), f"{readme_dir} has a report.md but no README.md saying how, when and where it was made"


def test_no_raw_run_output_is_committed():
    raw = [p for p in _tracked() if "tfevents" in p or p.endswith(RAW) or "/checkpoints/" in p]
    assert not raw, f"raw run output in reports/: {raw[:5]}"


def test_no_analysis_code_lives_in_reports():
    # Code a report depends on belongs in actorq (tested, linted, reachable from a subcommand); reports/ holds
    # what it made and the commands that made it.
    code = [p for p in _tracked() if p.endswith(".py")]
    assert not code, (
        f"Python in reports/ (move it into actorq, or delete it once the package makes its output): {code}"
    )
