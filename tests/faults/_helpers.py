"""What the fault tests share: reading a run's files, finding role processes by pid, measuring rates.

Everything is read from the run directory (metrics CSVs, role logs), the way an operator would see a run; the
tests never import TensorFlow or Reverb themselves.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
from pathlib import Path

import psutil

from actorq.metrics import read_metrics

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]
REPLAY_CKPT = r"replay checkpoint \S+ between (?P<before>[\w= ]+?) and (?P<after>[\w= ]+?) \("
"""The replay role's log line for each checkpoint: its table sizes before and after writing it."""
REPLAY_UP = r"replay serving on port \d+ with (?P<sizes>[\w= ]+)"
"""The replay role's log line once it serves: its table sizes, i.e. what it restored from a checkpoint."""


def rows(run_dir: Path, role: str) -> list[dict]:
    return read_metrics(run_dir / role / "metrics.csv")


def last(run_dir: Path, role: str, key: str, default: float = 0.0) -> float:
    for row in reversed(rows(run_dir, role)):
        if row.get(key) is not None:
            return float(row[key])
    return default


def rate(run_dir: Path, role: str, key: str, start: float, end: float) -> float:
    """Increase of ``key`` per second between wall times ``start`` and ``end`` (rows of one process lifetime)."""
    window = [r for r in rows(run_dir, role) if start <= r["time"] <= end and r.get(key) is not None]
    if len(window) < 2 or window[-1]["time"] <= window[0]["time"]:
        return 0.0
    return (window[-1][key] - window[0][key]) / (window[-1]["time"] - window[0]["time"])


def role_pid(launcher_pid: int, label: str) -> int | None:
    """Pid of the live role process ``label`` (``replay``, ``actor_0``, ...) among the launcher's children (the local
    launcher starts each as ``python -m actorq.roles NAME ...``)."""
    role, _, index = label.partition("_")
    for child in psutil.Process(launcher_pid).children():
        try:
            argv = child.cmdline()
            if child.status() == psutil.STATUS_ZOMBIE or "actorq.roles" not in argv or role not in argv:
                continue
        except psutil.Error:
            continue
        if index and argv[argv.index("--index") + 1] != index:
            continue
        return child.pid
    return None


def log_lines(run_dir: Path, label: str, pattern: str) -> list[re.Match]:
    """Every match of ``pattern`` in ``logs/<label>.log`` (all lifetimes of the role, in order)."""
    path = run_dir / "logs" / f"{label}.log"
    text = path.read_text(errors="replace") if path.exists() else ""
    return list(re.finditer(pattern, text))


def table_sizes(text: str) -> dict[str, int]:
    """``{"priority_table": 123, ...}`` from the replay role's ``name=size`` log fields."""
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", text)}


def record(run_dir: Path, fault: str, **numbers: float) -> None:
    """Append one fault's measurements to RUN_DIR/fault_measurements.json (and the test log)."""
    path = run_dir / "fault_measurements.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data[fault] = {k: round(v, 2) if isinstance(v, float) else v for k, v in numbers.items()}
    path.write_text(json.dumps(data, indent=2))
    log.warning("fault %s: %s", fault, data[fault])
    # Where the numbers should also go when someone wants them after the run (the tmp run dir is removed).
    report = os.environ.get("ACTORQ_FAULT_REPORT")
    if report:
        merged = json.loads(Path(report).read_text()) if Path(report).exists() else {}
        merged[fault] = data[fault]
        Path(report).write_text(json.dumps(merged, indent=2))


def alive(pids: list[int]) -> list[int]:
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def stop_owned(proc: subprocess.Popen, pids: list[int] | set[int]) -> None:
    """SIGTERM the launcher ``proc`` (SIGKILL after 30 s), then SIGKILL what is left of ``pids``: only processes
    this test started."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    for pid in alive(sorted(pids)):
        os.kill(pid, signal.SIGKILL)
