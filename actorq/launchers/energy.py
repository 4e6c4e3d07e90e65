"""Energy and CPU time of one run: the context manager every launcher (local, launchpad, in-process) wraps a run in.

Three measurements, all returned by :meth:`EnergyMeter.summary` (the launcher puts it in ``summary.json`` under
``"energy"``); models built on them (watts per core, carbon intensity) live in the report, not here:

* **CPU time** of everything the run started: user + system seconds of every descendant process of the
  launcher, sampled with psutil every ``period_s`` and once more at exit, plus the launcher's own CPU time.
  Roles the launcher started and reaped are also counted exactly through ``RUSAGE_CHILDREN`` (which covers the
  seconds between the last sample and a process's exit); the larger of the two child totals is reported. The
  cumulative series goes to ``RUN_DIR/energy/metrics.csv`` so a report can take the CPU time spent up to any
  moment, e.g. when a reward was first reached.
* **CPU time of everything else**: the machine's busy CPU seconds over the run (``/proc/stat`` through psutil,
  steal included) minus the run's own (``outside_cpu_seconds``). On a 2-core machine anything else running (a test
  suite, even at nice 19) takes CPU from the learner: a run where this exceeds
  :data:`actorq.metrics.OUTSIDE_LOAD_LIMIT` of the machine gets a warning, and reports flag it.
* **codecarbon** ``OfflineEmissionsTracker`` (no network; country from ``$ACTORQ_CARBON_COUNTRY``, default USA),
  machine-wide, writing ``RUN_DIR/emissions.csv``. Where the machine exposes no RAPL counters (typical in VMs)
  codecarbon itself estimates CPU power from a TDP table and the load, and its machine-wide figure includes
  other tenants' load: ``hardware_counters`` says which case applies. Optional: when codecarbon is missing or
  fails, its entry is ``{"status": "unavailable", "reason": ...}`` and the run goes on.
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from actorq.metrics import OUTSIDE_LOAD_LIMIT, MetricsWriter

log = logging.getLogger(__name__)

RAPL_PATH = Path("/sys/class/powercap/intel-rapl")
DEFAULT_COUNTRY = "USA"


def hardware_counters_available() -> bool:
    """True when the kernel exposes Intel RAPL energy counters (codecarbon then measures, not estimates)."""
    return RAPL_PATH.exists()


def _cpu_seconds(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return float(times.user + times.system)


def process_key(proc: psutil.Process) -> tuple[int, float]:
    """``(pid, start)``: one process, told apart from a later one that reuses its pid, the same at every sample.

    ``start`` is the process's start in clock ticks since boot (``/proc/PID/stat``, field 22), which nothing
    changes. Not psutil's ``create_time()``: that adds ``/proc/stat``'s boot time, which the kernel moves whenever
    the clock is adjusted (NTP on a VM): each move made every running role a "new" process whose CPU seconds so far
    were added again (an Acrobot run: 17,850 CPU seconds counted in 2,424 s on 2 cores). Where there is no
    ``/proc`` (not Linux) it falls back to the create time.
    """
    try:
        stat = Path(f"/proc/{proc.pid}/stat").read_bytes()
        # The name (field 2) is in parentheses and may hold spaces or ")": the fields after its last ")" start at 3.
        return proc.pid, float(stat.rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return proc.pid, proc.create_time()


def machine_cpu_seconds() -> tuple[float, float]:
    """``(busy, steal)``: CPU seconds the whole machine ran since boot, summed over its CPUs, and of those the
    steal (time the hypervisor gave other guests while this one wanted the CPU). Busy counts every process, the
    run's and anyone else's, and steal (the run's processes wanted that time too); guest time is inside user."""
    t = psutil.cpu_times()
    steal = float(getattr(t, "steal", 0.0))
    busy = t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0) + steal
    return float(busy), steal


def _rusage_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return float(usage.ru_utime + usage.ru_stime)


def settle_import_hooks() -> None:
    """Import ``distutils`` here, in the calling thread, before the meter's thread imports codecarbon.

    setuptools' ``_distutils_hack`` (a ``sys.meta_path`` finder every venv with setuptools installs) answers the
    first ``import distutils`` by importing ``setuptools._distutils`` from inside its ``find_spec``, and Python 3.10
    calls ``find_spec`` holding the global import lock. Reverb imports distutils as the first role is built; when
    the meter's thread was importing codecarbon (``dataclasses`` -> ``inspect`` -> ``dis``) at that moment, the
    main thread held the global lock and waited for ``inspect``'s module lock, which the meter's thread held while
    it waited for the global lock: both threads blocked in futex waits for good, and the run never started (seen
    once in 3 in-process runs on a loaded machine; reproduced with those imports racing, 1 hang in 3 tries).
    Python's deadlock detection covers module locks only. Once ``distutils`` is imported the finder imports
    nothing again, so the race is gone whatever the threads import afterwards.
    """
    import distutils  # noqa: F401  (setuptools' shim or the stdlib's: either settles the finder)


class _Codecarbon:
    """codecarbon's offline tracker, silenced and failure-tolerant."""

    def __init__(self, output_dir: Path, measure_power_secs: float):
        self.tracker = None
        self.error = ""
        try:
            from codecarbon import OfflineEmissionsTracker

            # codecarbon logs its set-up at INFO before it applies log_level: silence it first.
            logging.getLogger("codecarbon").setLevel(logging.ERROR)
            self.tracker = OfflineEmissionsTracker(
                country_iso_code=os.environ.get("ACTORQ_CARBON_COUNTRY", DEFAULT_COUNTRY),
                output_dir=str(output_dir),
                project_name=output_dir.name,
                measure_power_secs=measure_power_secs,
                tracking_mode="machine",
                log_level="error",
                save_to_file=True,
                allow_multiple_runs=True,  # experiments may run side by side; there is no shared state here
            )
            self.tracker.start()
        except Exception as exc:  # optional: a broken or absent codecarbon must not stop a training run
            self.tracker = None
            self.error = f"{type(exc).__name__}: {exc}"
            log.warning("codecarbon unavailable (%s); recording CPU time only", self.error)

    def stop(self) -> dict[str, Any]:
        if self.tracker is None:
            return {"status": "unavailable", "reason": self.error or "not started"}
        try:
            self.tracker.stop()
            data = self.tracker.final_emissions_data
        except Exception as exc:
            log.warning("codecarbon failed at stop: %s", exc)
            return {"status": "unavailable", "reason": f"{type(exc).__name__}: {exc}"}
        energy = float(data.energy_consumed)
        return {
            "status": "ok",
            "energy_kwh": energy,
            "emissions_kg": float(data.emissions),
            "cpu_energy_kwh": float(data.cpu_energy),
            "ram_energy_kwh": float(data.ram_energy),
            "cpu_power_w": float(data.cpu_power),
            "ram_power_w": float(data.ram_power),
            "carbon_intensity_kg_per_kwh": float(data.emissions) / energy if energy > 0 else None,
            "duration_s": float(data.duration),
            "tracking_mode": "machine",
            "country_iso_code": data.country_iso_code,
            "cpu_model": data.cpu_model,
            "cpu_count": int(data.cpu_count),
        }


class EnergyMeter:
    """Context manager measuring CPU time of the launcher's process tree and (optionally) codecarbon energy.

    Args:
        run_dir: The run directory (``energy/metrics.csv`` and ``emissions.csv`` go there).
        period_s: Seconds between CPU-time samples.
        codecarbon: Also run codecarbon's offline tracker.

    Example::

        with EnergyMeter(run_dir) as energy:
            ...  # start roles, wait, stop (reap) them
        summary["energy"] = energy.summary()
    """

    def __init__(self, run_dir: str | Path, period_s: float = 5.0, codecarbon: bool = True):
        self.run_dir = Path(run_dir)
        self.period_s = period_s
        self._use_codecarbon = codecarbon
        self._codecarbon: _Codecarbon | None = None
        self._last: dict[tuple[int, float], float] = {}  # process_key -> last CPU seconds seen
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._writer: MetricsWriter | None = None
        self._self = psutil.Process()
        self.started_at = 0.0
        self.ended_at = 0.0
        self.samples = 0
        self._result: dict[str, Any] = {}

    # -- sampling --------------------------------------------------------------------------------------------
    def sample(self) -> float:
        """Take one sample of every descendant's CPU time; return the run's cumulative CPU seconds so far."""
        with contextlib.suppress(psutil.Error):
            for proc in self._self.children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    key = process_key(proc)
                    seconds = _cpu_seconds(proc)
                    with self._lock:
                        self._last[key] = max(seconds, self._last.get(key, 0.0))
        total = self.children_seconds() + self.launcher_seconds()
        self.samples += 1
        if self._writer is not None:
            self._writer.write(
                {
                    "step": self.samples,
                    "elapsed": time.time() - self.started_at,
                    "cpu_seconds": total,
                    "processes": len(self._last),
                    # The whole machine's, the run's included: where it outgrows cpu_seconds, something else ran.
                    "machine_cpu_seconds": machine_cpu_seconds()[0] - self._machine0[0],
                }
            )
        return total

    def children_seconds(self) -> float:
        """CPU seconds of all descendants: sampled totals, or reaped children's exact rusage when larger."""
        with self._lock:
            sampled = sum(self._last.values())
        reaped = _rusage_seconds(resource.RUSAGE_CHILDREN) - self._children0
        return max(sampled, reaped)

    def launcher_seconds(self) -> float:
        """CPU seconds of the launcher process itself since the meter started (monitor, codecarbon thread)."""
        return _rusage_seconds(resource.RUSAGE_SELF) - self._self0

    def _loop(self) -> None:
        if self._use_codecarbon:
            # Here, not in __enter__: importing codecarbon takes seconds, which must not delay the run's start.
            self._codecarbon = _Codecarbon(self.run_dir, measure_power_secs=max(self.period_s, 5.0))
        while not self._stop.wait(self.period_s):
            try:
                self.sample()
            except (psutil.Error, OSError) as exc:  # a sampling hiccup must not end the run
                log.warning("energy sample failed: %s: %s", type(exc).__name__, exc)

    # -- context ---------------------------------------------------------------------------------------------
    def __enter__(self) -> EnergyMeter:
        self.started_at = time.time()
        self._self0 = _rusage_seconds(resource.RUSAGE_SELF)
        self._children0 = _rusage_seconds(resource.RUSAGE_CHILDREN)
        self._machine0 = machine_cpu_seconds()
        try:
            self._writer = MetricsWriter(self.run_dir / "energy", tensorboard=False)
        except OSError as exc:
            log.warning("cannot write energy samples: %s", exc)
        settle_import_hooks()
        self._thread = threading.Thread(target=self._loop, name="energy-meter", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.period_s + 60)  # + codecarbon's import when the run was very short
        self.ended_at = time.time()
        total = self.sample()
        if self._codecarbon is not None:
            codecarbon = self._codecarbon.stop()
        else:
            reason = "run ended before codecarbon started" if self._use_codecarbon else "disabled"
            codecarbon = {"status": "unavailable", "reason": reason}
        if self._writer is not None:
            self._writer.close()
        busy, steal = (now - then for now, then in zip(machine_cpu_seconds(), self._machine0, strict=True))
        cores = psutil.cpu_count() or os.cpu_count() or 1
        seconds = self.ended_at - self.started_at
        # Sampling can miss a few of the run's own CPU seconds, never add any: the outside figure is an upper bound.
        outside = max(0.0, busy - total)
        share = outside / seconds / cores if seconds > 0 else 0.0
        if share > OUTSIDE_LOAD_LIMIT:
            log.warning(
                "other processes used %.0f%% of this machine's %d cores while the run ran (limit %.0f%%): its "
                "times and rates are slowed by them, not only by its settings; rerun it on a quiet machine",
                100 * share,
                cores,
                100 * OUTSIDE_LOAD_LIMIT,
            )
        self._result = {
            "started_at": round(self.started_at, 3),
            "ended_at": round(self.ended_at, 3),
            "seconds": round(self.ended_at - self.started_at, 3),
            "cpu_seconds": round(total, 3),
            "roles_cpu_seconds": round(self.children_seconds(), 3),
            "launcher_cpu_seconds": round(self.launcher_seconds(), 3),
            "cpu_samples": self.samples,
            "cpu_method": "psutil samples of descendants + RUSAGE_CHILDREN + launcher RUSAGE_SELF",
            "machine_cpu_seconds": round(busy, 3),
            "outside_cpu_seconds": round(outside, 3),
            "steal_seconds": round(steal, 3),
            "machine_cores": int(cores),
            "hardware_counters": hardware_counters_available(),
            "codecarbon": codecarbon,
        }

    def summary(self) -> dict[str, Any]:
        """The measurements (valid after the ``with`` block)."""
        return dict(self._result)
