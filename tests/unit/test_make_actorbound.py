"""``make reproduce-cpu-actorbound``: which experiments of the grid file it runs, the budget scale it passes, and the
plans it hands the report.

The recipe runs for real, with a fake venv (``VENV=``) whose ``actorq`` only logs its arguments and writes what the
next step reads: a plan where ``--json`` points, a records folder for the task the grid ran. ``STAMP=`` keeps make
from building the real venv.
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")

FAKE_ACTORQ = """#!/bin/sh
# Log the call; do what the recipe's next step reads.
echo "$*" >> "$ACTORQ_LOG"
cmd=$1; shift
if [ "$cmd" = plan ]; then
  while [ $# -gt 0 ]; do [ "$1" = --json ] && echo '{}' > "$2"; shift; done
elif [ "$cmd" = grid ]; then
  while [ $# -gt 0 ]; do [ "$1" = --records ] && mkdir -p "$2/dqn_cartpole/records"; shift; done
fi
exit 0
"""


def _fake_venv(tmp_path: Path) -> Path:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    for name, body in (("actorq", FAKE_ACTORQ), ("python", "#!/bin/sh\necho fake-slug\n")):
        path = venv / "bin" / name
        path.write_text(body)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return venv


def _calls(tmp_path: Path, **make_vars: str) -> dict[str, list[list[str]]]:
    """Run the target with ``make_vars``; the fake ``actorq``'s calls, by subcommand."""
    venv, log = _fake_venv(tmp_path), tmp_path / "actorq.log"
    args = ["make", "--no-print-directory", "reproduce-cpu-actorbound", "STAMP=", f"VENV={venv}"]
    args += [f"ACTORBOUND_RECORDS={tmp_path / 'records'}", f"ACTORBOUND_OUT={tmp_path / 'out'}"]
    args += [f"{k}={v}" for k, v in make_vars.items()]
    # `make test` runs this under make: its MAKEFLAGS (e.g. -n, -k) must not reach the recipe run here.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    done = subprocess.run(
        args, cwd=ROOT, capture_output=True, text=True, timeout=60, env={**env, "ACTORQ_LOG": str(log)}
    )
    assert done.returncode == 0, done.stdout + done.stderr
    calls: dict[str, list[list[str]]] = {}
    for line in log.read_text().splitlines():
        argv = shlex.split(line)
        calls.setdefault(argv[0], []).append(argv[1:])
    return calls


def test_named_experiments_run_and_the_report_gets_only_the_plans_of_tasks_with_records(tmp_path):
    calls = _calls(tmp_path, ACTORBOUND_EXPERIMENTS="dqn_cartpole_env1,dqn_cartpole_env8")
    # Every task is planned before the grid (Acrobot's plan too: made before any of its runs, kept for later)...
    planned = [argv[0] for argv in calls["plan"]]
    assert planned == ["configs/dqn/gym_cartpole.yaml", "configs/dqn/gym_acrobot.yaml"]
    # ... the grid runs the experiments named, at the file's budgets.
    (grid,) = calls["grid"]
    assert grid[grid.index("--experiments") + 1] == "dqn_cartpole_env1,dqn_cartpole_env8"
    assert "--budget-scale" not in grid
    # The report gets the plan of the task that has records, not Acrobot's (it would refuse a plan without runs).
    (report,) = calls["report"]
    plans = [report[i + 1] for i, a in enumerate(report) if a == "--plan"]
    assert plans == [str(tmp_path / "records" / "fake-slug" / "plan-dqn_cartpole.json")]


def test_by_default_every_experiment_and_a_budget_scale_on_request(tmp_path):
    (grid,) = _calls(tmp_path, ACTORBOUND_BUDGET_SCALE="1.7")["grid"]
    assert "--experiments" not in grid
    assert grid[grid.index("--budget-scale") + 1] == "1.7"
