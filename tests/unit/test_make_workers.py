"""``make test``'s first pass: one xdist worker per core, capped by the memory available, never fewer than one.

``make -n`` prints the pytest command without running it; the cores and ``/proc/meminfo`` are given through the
Makefile's ``TEST_CORES`` and ``TEST_MEMINFO`` so the rule is checked for machines this one is not.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _per_worker_mib() -> int:
    m = re.search(r"^TEST_WORKER_MIB := (\d+)$", (ROOT / "Makefile").read_text(), re.M)
    assert m, "Makefile has no numeric TEST_WORKER_MIB"
    return int(m.group(1))


def _workers(**make_vars: str) -> int:
    """The ``-n N`` of the first pass that ``make -n test`` prints with ``make_vars`` set."""
    args = ["make", "-n", "--no-print-directory", "test", "STAMP="] + [
        f"{k}={v}" for k, v in make_vars.items()
    ]
    dry = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    first = next(line for line in dry.stdout.splitlines() if "pytest" in line and "not (" in line)
    m = re.search(r" -n (\d+) ", first)
    assert m, first
    return int(m.group(1))


def _meminfo(tmp_path: Path, available_mib: float | None) -> str:
    path = tmp_path / "meminfo"
    lines = ["MemTotal:       98765432 kB"]
    if available_mib is not None:
        lines.append(f"MemAvailable:   {int(available_mib * 1024)} kB")
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_one_worker_per_core_when_memory_suffices(tmp_path):
    per = _per_worker_mib()
    assert _workers(TEST_CORES="2", TEST_MEMINFO=_meminfo(tmp_path, 10 * per)) == 2
    assert _workers(TEST_CORES="16", TEST_MEMINFO=_meminfo(tmp_path, 16 * per)) == 16


def test_memory_caps_the_workers(tmp_path):
    per = _per_worker_mib()
    # a 64-core box with room for 5.9 workers gets 5, not 64
    assert _workers(TEST_CORES="64", TEST_MEMINFO=_meminfo(tmp_path, 5.9 * per)) == 5
    # less than one worker's memory still runs the suite, on one
    assert _workers(TEST_CORES="8", TEST_MEMINFO=_meminfo(tmp_path, per / 2)) == 1


def test_unknown_memory_falls_back_to_the_cores(tmp_path):
    assert _workers(TEST_CORES="3", TEST_MEMINFO=_meminfo(tmp_path, None)) == 3
    assert _workers(TEST_CORES="3", TEST_MEMINFO=str(tmp_path / "absent")) == 3


def test_an_explicit_count_wins(tmp_path):
    assert _workers(TEST_WORKERS="7", TEST_CORES="2", TEST_MEMINFO=_meminfo(tmp_path, 1)) == 7
