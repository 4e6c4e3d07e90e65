"""actorq/launchers/energy.py: CPU time of the processes a run starts, and codecarbon that may fail without harm."""

from __future__ import annotations

import subprocess
import sys

import psutil
import pytest

from actorq.launchers import energy as energy_mod
from actorq.launchers.energy import EnergyMeter
from actorq.metrics import read_metrics
from tests.waiting import wait_until

BUSY = "import time\nt = time.process_time()\nwhile time.process_time() - t < {cpu}: pass\n"


@pytest.mark.subprocess
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
    assert summary["started_at"] <= summary["ended_at"]
    rows = read_metrics(tmp_path / "energy" / "metrics.csv")
    assert rows and rows[-1]["cpu_seconds"] == pytest.approx(summary["cpu_seconds"], abs=1e-2)
    cpu = [r["cpu_seconds"] for r in rows]
    assert cpu == sorted(cpu)  # cumulative


@pytest.mark.subprocess
def test_live_children_are_sampled(tmp_path):
    with EnergyMeter(tmp_path, period_s=0.1, codecarbon=False) as meter:
        proc = subprocess.Popen([sys.executable, "-c", BUSY.format(cpu=30)])
        live = wait_until(
            lambda: meter.children_seconds() >= 0.5 and meter.children_seconds(), 60, "0.5 s of child CPU"
        )
        proc.kill()
        proc.wait()
    assert live >= 0.5  # seen while the child was still running (before any rusage)


@pytest.mark.subprocess
@pytest.mark.usefixtures("moving_boot_time")
def test_a_process_is_counted_once_while_the_boot_time_moves(tmp_path):
    with EnergyMeter(tmp_path, period_s=0.05, codecarbon=False) as meter:
        proc = subprocess.Popen([sys.executable, "-c", BUSY.format(cpu=30)])
        try:
            wait_until(
                lambda: meter.samples >= 20 and meter.children_seconds() >= 0.5, 60, "20 samples, 0.5 s"
            )
            counted = meter.children_seconds()
            # Read after the meter's figure: the child's own CPU time can only have grown since.
            assert counted <= energy_mod._cpu_seconds(psutil.Process(proc.pid)) + 1e-6
        finally:
            proc.kill()
            proc.wait()
    assert max(r["processes"] for r in read_metrics(tmp_path / "energy" / "metrics.csv")) == 1


class _Emissions:
    """What codecarbon's ``final_emissions_data`` holds after a stop (0.002 kWh at 0.4 kg/kWh)."""

    energy_consumed, emissions, cpu_energy, ram_energy = 0.002, 0.0008, 0.0015, 0.0005
    cpu_power, ram_power, duration, country_iso_code, cpu_model, cpu_count = 40.0, 5.0, 1.5, "FRA", "EPYC", 2


def _fake_tracker(monkeypatch, made: list[dict], fail: bool = False) -> None:
    """Replace codecarbon's tracker by one that records how it was built (or raises on construction)."""
    import codecarbon

    class Tracker:
        def __init__(self, **kwargs):
            if fail:
                raise RuntimeError("no codecarbon here")
            made.append(kwargs)
            self.final_emissions_data = None

        def start(self):
            pass

        def stop(self):
            self.final_emissions_data = _Emissions()

    monkeypatch.setattr(codecarbon, "OfflineEmissionsTracker", Tracker)


def test_codecarbon_failure_is_recorded_not_raised(tmp_path, monkeypatch):
    _fake_tracker(monkeypatch, [], fail=True)
    with EnergyMeter(tmp_path, period_s=0.1) as meter:
        pass  # __exit__ joins the sampling thread, which builds the tracker before its first sample
    cc = meter.summary()["codecarbon"]
    assert cc["status"] == "unavailable" and "no codecarbon here" in cc["reason"]


@pytest.mark.parametrize("country", [None, "FRA"])
def test_codecarbon_results_and_country(tmp_path, monkeypatch, country):
    made: list[dict] = []
    _fake_tracker(monkeypatch, made)
    if country is None:
        monkeypatch.delenv("ACTORQ_CARBON_COUNTRY", raising=False)
    else:
        monkeypatch.setenv("ACTORQ_CARBON_COUNTRY", country)
    with EnergyMeter(tmp_path, period_s=0.1) as meter:
        pass
    (kwargs,) = made
    # The tracker is offline, machine-wide, writes beside the run, and takes the country the user set (USA if none).
    assert kwargs["country_iso_code"] == (country or "USA")
    assert kwargs["output_dir"] == str(tmp_path) and kwargs["tracking_mode"] == "machine"
    cc = meter.summary()["codecarbon"]
    assert cc["status"] == "ok" and cc["energy_kwh"] == 0.002 and cc["cpu_power_w"] == 40.0
    assert cc["carbon_intensity_kg_per_kwh"] == pytest.approx(0.4)


@pytest.mark.parametrize("rapl", [True, False])
def test_hardware_counters_follow_the_rapl_directory(tmp_path, monkeypatch, rapl):
    rapl_dir = tmp_path / "intel-rapl"
    if rapl:
        rapl_dir.mkdir()
    monkeypatch.setattr(energy_mod, "RAPL_PATH", rapl_dir)
    with EnergyMeter(tmp_path / "run", period_s=0.1, codecarbon=False) as meter:
        pass
    assert meter.summary()["hardware_counters"] is rapl


@pytest.mark.subprocess
def test_cpu_that_other_processes_burn_during_the_run_is_counted_as_outside(tmp_path):
    # The burner is started through a shell that exits at once, so it is no descendant of the meter's process:
    # an unrelated process on the same machine, like a test suite run beside a grid.
    done = tmp_path / "burned"
    burn = BUSY.format(cpu=1.0) + f"open({str(done)!r}, 'w').close()\n"
    with EnergyMeter(tmp_path / "run", period_s=0.2, codecarbon=False) as meter:
        subprocess.run(["sh", "-c", f'{sys.executable} -c "$0" >/dev/null 2>&1 &', burn], check=True)
        wait_until(done.exists, 120, "the unrelated process to burn 1 s of CPU")
    summary = meter.summary()
    assert summary["outside_cpu_seconds"] >= 0.9  # its whole second (the run itself burned next to nothing)
    assert summary["machine_cpu_seconds"] >= summary["outside_cpu_seconds"] + summary["cpu_seconds"] - 0.05
    assert summary["machine_cores"] >= 1 and summary["steal_seconds"] >= 0
    rows = read_metrics(tmp_path / "run" / "energy" / "metrics.csv")
    assert rows[-1]["machine_cpu_seconds"] >= 0.9


@pytest.mark.subprocess
def test_a_childs_cpu_is_the_runs_own_not_outside(tmp_path):
    with EnergyMeter(tmp_path, period_s=0.2, codecarbon=False) as meter:
        subprocess.run([sys.executable, "-c", BUSY.format(cpu=1.0)], check=True)
    summary = meter.summary()
    assert summary["roles_cpu_seconds"] >= 1.0
    # Whatever else this machine ran meanwhile is outside, but the child's second is not double-counted there:
    # machine busy = own + outside (outside is busy minus own, floored at 0).
    assert summary["outside_cpu_seconds"] == pytest.approx(
        max(0.0, summary["machine_cpu_seconds"] - summary["cpu_seconds"]), abs=2e-3
    )


# The meter's thread imports codecarbon while the main thread builds the first role (reverb imports distutils):
# setuptools' distutils finder imports under Python's global import lock, and the two threads deadlocked once.
SETTLED = """
import sys, threading, tempfile
from actorq.launchers.energy import EnergyMeter
assert "distutils" not in sys.modules, "distutils already imported: this check would prove nothing"
started = []
real_start = threading.Thread.start
def start(self):
    started.append(("distutils" in sys.modules, threading.current_thread() is threading.main_thread()))
    real_start(self)
threading.Thread.start = start
with EnergyMeter(tempfile.mkdtemp(), period_s=60, codecarbon=False):
    pass
print(started[0])
"""


@pytest.mark.subprocess
def test_distutils_is_imported_before_the_meters_thread_starts():
    result = subprocess.run([sys.executable, "-c", SETTLED], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert (
        result.stdout.strip() == "(True, True)"
    )  # settled, in the calling thread, before the thread started
