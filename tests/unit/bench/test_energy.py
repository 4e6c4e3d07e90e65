"""actorq/launchers/energy.py: CPU time of the processes a run starts, and codecarbon that may fail without harm."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from actorq.launchers import energy as energy_mod
from actorq.launchers.energy import EnergyMeter
from actorq.metrics import read_metrics

BUSY = "import time\nt = time.process_time()\nwhile time.process_time() - t < {cpu}: pass\n"


def test_cpu_seconds_of_children_are_counted_exactly_once_reaped(tmp_path):
    with EnergyMeter(tmp_path, period_s=0.2, codecarbon=False) as meter:
        procs = [subprocess.Popen([sys.executable, "-c", BUSY.format(cpu=0.6)]) for _ in range(2)]
        for p in procs:
            p.wait()
    summary = meter.summary()
    # Two children burned 0.6 s of CPU each (plus interpreter start-up): RUSAGE_CHILDREN sees all of it.
    assert 1.2 <= summary["roles_cpu_seconds"] < 1.2 + 2.0
    assert summary["cpu_seconds"] == pytest.approx(
        summary["roles_cpu_seconds"] + summary["launcher_cpu_seconds"], abs=1e-2
    )
    assert summary["codecarbon"] == {"status": "unavailable", "reason": "disabled"}
    assert summary["started_at"] <= summary["ended_at"] and summary["hardware_counters"] in (True, False)
    rows = read_metrics(tmp_path / "energy" / "metrics.csv")
    assert rows and rows[-1]["cpu_seconds"] == pytest.approx(summary["cpu_seconds"], abs=1e-2)
    cpu = [r["cpu_seconds"] for r in rows]
    assert cpu == sorted(cpu)  # cumulative


def test_live_children_are_sampled(tmp_path):
    with EnergyMeter(tmp_path, period_s=0.1, codecarbon=False) as meter:
        proc = subprocess.Popen([sys.executable, "-c", BUSY.format(cpu=30)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and meter.children_seconds() < 0.5:
            time.sleep(0.1)
        live = meter.children_seconds()
        proc.kill()
        proc.wait()
    assert live >= 0.5  # seen while the child was still running (before any rusage)


def test_codecarbon_failure_is_recorded_not_raised(tmp_path, monkeypatch):
    class Broken:
        def __init__(self, *a, **k):
            raise RuntimeError("no codecarbon here")

    import codecarbon

    monkeypatch.setattr(codecarbon, "OfflineEmissionsTracker", Broken)
    with EnergyMeter(tmp_path, period_s=0.1) as meter:
        time.sleep(0.3)
    cc = meter.summary()["codecarbon"]
    assert cc["status"] == "unavailable" and "no codecarbon here" in cc["reason"]
    assert energy_mod.DEFAULT_COUNTRY == "USA"
