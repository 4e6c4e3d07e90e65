"""Whether something else ran on the machine during a run, and what the report says about runs where it did.

On a small machine anything else that runs beside a training run (a test suite, another run, another guest's
steal) takes CPU from its learner, so its time to reward and learner steps/s no longer measure its settings. The
figure is the share of the machine's CPU that other processes used while the run ran (0.25: a quarter of all cores,
half a core of two). Runs above :data:`actorq.metrics.OUTSIDE_LOAD_LIMIT` are flagged; they should be run again.

Two sources, the first a run has:

* ``summary.energy.outside_cpu_seconds`` and ``machine_cores``, measured by the launcher's energy meter (the
  machine's busy CPU seconds from ``/proc/stat`` minus the run's own);
* for runs made before that existed, codecarbon's machine-wide ``cpu_utilization_percent`` in
  ``RUN_DIR/emissions.csv`` (its mean over the run) minus the run's own CPU seconds per wall second and core.
"""

from __future__ import annotations

import csv
import logging
from typing import Any

from actorq.metrics import OUTSIDE_LOAD_LIMIT
from actorq.report.runs import RunData

log = logging.getLogger(__name__)

MEASURED = "measured"
CODECARBON = "codecarbon"

CPU_SLACK_S = 5.0
"""CPU seconds a run's own total may exceed what the machine's cores could run, in one sampling interval or over
the run, before the total is taken for a miscount (sampling and ``/proc/stat`` differ by a few seconds: 0.3%
over 887 s in committed runs)."""


def cpu_double_counted(energy: dict[str, Any], curve: list[list[float]]) -> bool:
    """Whether a run's own CPU seconds count some of its processes more than once, so that they, the energy
    estimated from them and the outside share (the machine's busy seconds minus them, clipped at zero) are wrong.

    Launchers before :func:`actorq.launchers.energy.process_key` told processes apart by psutil's create time,
    which moves with the clock: a move re-counted every running role's CPU so far (an Acrobot fp16 run recorded
    17,850 CPU seconds in 2,424 s on 2 cores, and an outside share of 0). Seen as the cumulative CPU curve rising
    faster than ``machine_cores`` in one interval (the last one excepted: it adds the reaped roles' children at
    once), or the run's total above the whole machine's busy seconds.

    Args:
        energy: The run's ``summary.energy``.
        curve: ``[[elapsed, cpu_seconds], ...]``, the meter's cumulative samples (``energy_curve``).
    """
    cores = energy.get("machine_cores")
    if not isinstance(cores, int) or cores <= 0:
        return False
    inner = curve[:-1]
    for (t0, c0), (t1, c1) in zip(inner[:-1], inner[1:], strict=True):
        if c1 - c0 > (t1 - t0) * cores + CPU_SLACK_S:
            return True
    own, machine = energy.get("cpu_seconds"), energy.get("machine_cpu_seconds")
    numbers = isinstance(own, (int, float)) and isinstance(machine, (int, float))
    return numbers and own > machine * 1.01 + CPU_SLACK_S


def measured_share(summary: dict[str, Any]) -> float | None:
    """The share the launcher measured, from a run's ``summary.json``; None for runs made before it did."""
    energy = summary.get("energy") or {}
    seconds, outside, cores = (
        energy.get("seconds"),
        energy.get("outside_cpu_seconds"),
        energy.get("machine_cores"),
    )
    if not isinstance(seconds, (int, float)) or seconds <= 0 or not isinstance(outside, (int, float)):
        return None
    return float(outside) / seconds / cores if isinstance(cores, int) and cores > 0 else None


def outside_share(run: RunData) -> tuple[float | None, str | None]:
    """``(share, source)``: the share of the machine's CPU others used during the run, and where it comes from
    (:data:`MEASURED` or :data:`CODECARBON`); ``(None, None)`` when the run has neither figure."""
    measured = measured_share(run.summary)
    if measured is not None:
        return measured, MEASURED
    energy = run.summary.get("energy") or {}
    seconds, own = energy.get("seconds"), energy.get("cpu_seconds")
    if not isinstance(seconds, (int, float)) or seconds <= 0 or not isinstance(own, (int, float)):
        return None, None
    row = _last_emissions_row(run)
    if row is None:
        return None, None
    try:
        busy, cores = float(row["cpu_utilization_percent"]) / 100.0, int(row["cpu_count"])
    except (KeyError, TypeError, ValueError):
        return None, None
    if cores <= 0:
        return None, None
    return max(0.0, busy - own / seconds / cores), CODECARBON


def _last_emissions_row(run: RunData) -> dict[str, Any] | None:
    path = run.path / "emissions.csv"
    if not path.is_file():
        return None
    try:
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
    except (OSError, csv.Error) as exc:
        log.warning("%s: unreadable (%s); no outside-load figure for this run", path, exc)
        return None
    return rows[-1] if rows else None


def disturbed(share: float | None) -> bool:
    """Whether a run's outside share is above :data:`actorq.metrics.OUTSIDE_LOAD_LIMIT`."""
    return share is not None and share > OUTSIDE_LOAD_LIMIT


def share_cell(share: float | None, source: str | None) -> str:
    """``"1%"``, ``"**24%** (codecarbon)"``: the share, bold when disturbed, and its source when estimated."""
    if share is None:
        return "-"
    text = f"{share:.0%}"
    text = f"**{text}**" if disturbed(share) else text
    return text if source == MEASURED else f"{text} ({source})"


def disturbed_note(runs: list) -> str:
    """A sentence on the runs (:class:`~actorq.report.measure.RunMetrics`) others disturbed, or that none was;
    empty when no run has the figure."""
    miscounted = [m.run.name for m in runs if m.cpu_miscounted]
    dropped = (
        f" {len(miscounted)} run(s) have no figure, and no energy estimate, because the launcher counted some of "
        f"their processes twice (its clock moved; the launcher keys processes by start ticks since): "
        f"{', '.join(miscounted)}."
        if miscounted
        else ""
    )
    known = [m for m in runs if m.outside_share is not None]
    if not known:
        return dropped.strip()
    limit = f"{OUTSIDE_LOAD_LIMIT:.0%}"
    bad = sorted((m for m in known if disturbed(m.outside_share)), key=lambda m: -m.outside_share)
    if not bad:
        worst = max(m.outside_share for m in known)
        return (
            f"Other processes used at most {worst:.1%} of the machine while each run ran "
            f"(limit {limit}; {len(known)} of {len(runs)} runs have the figure)." + dropped
        )
    named = ", ".join(f"{m.run.name} ({m.outside_share:.0%})" for m in bad)
    return (
        f"**{len(bad)} of {len(known)} runs shared the machine**: other processes used more than {limit} of its "
        f"CPU while they ran: {named}. Their times and rates are slowed by that, not only by their settings. "
        "Run them again: move OUT/<run> aside (e.g. into OUT/_incomplete), delete its record, and rerun the "
        "experiment's command (it runs only what is missing)." + dropped
    )
