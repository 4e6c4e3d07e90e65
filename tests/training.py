"""Running ``actorq train`` as a user would, in its own process, and reading what it wrote."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def train_argv(*args: str) -> list[str]:
    """The command line of ``actorq train ARGS`` run as a module by this interpreter (what every test starts)."""
    return [sys.executable, "-m", "actorq.cli", "train", *args]


def train_summary(
    args: list[str], run_dir: Path, env: dict[str, str] | None = None, timeout: float = 240
) -> dict[str, Any]:
    """``python -m actorq.cli train ARGS --quiet --run-dir RUN_DIR`` from the repository root; its summary.json.

    Fails the test, with the run's errors and stderr, when no summary was written or the command did not exit 0.
    """
    result = subprocess.run(
        train_argv(*args, "--quiet", "--run-dir", str(run_dir)),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    summary_path = run_dir / "summary.json"
    assert summary_path.is_file(), result.stderr[-3000:]
    summary = json.loads(summary_path.read_text())
    assert result.returncode == 0, (summary.get("errors"), result.stderr[-3000:])
    return summary
