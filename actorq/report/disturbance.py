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
    known = [m for m in runs if m.outside_share is not None]
    if not known:
        return ""
    limit = f"{OUTSIDE_LOAD_LIMIT:.0%}"
    bad = sorted((m for m in known if disturbed(m.outside_share)), key=lambda m: -m.outside_share)
    if not bad:
        worst = max(m.outside_share for m in known)
        return (
            f"Other processes used at most {worst:.1%} of the machine while each run ran "
            f"(limit {limit}; {len(known)} of {len(runs)} runs have the figure)."
        )
    named = ", ".join(f"{m.run.name} ({m.outside_share:.0%})" for m in bad)
    return (
        f"**{len(bad)} of {len(known)} runs shared the machine**: other processes used more than {limit} of its "
        f"CPU while they ran: {named}. Their times and rates are slowed by that, not only by their settings. "
        "Run them again: move OUT/<run> aside (e.g. into OUT/_incomplete), delete its record, and rerun the "
        "experiment's command (it runs only what is missing)."
    )
