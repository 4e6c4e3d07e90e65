"""One records folder, one machine: ``actorq experiment`` refuses to add runs of this machine to finished records
made on another.

A grid of many hours is continued across sessions from committed records, and each session may get another CPU.
Its time-to-threshold speed-ups compare wall-clock times, which differ up to 2x between such machines, so before
any run starts the finished records in the experiment's records folder are compared with this machine
(:func:`actorq.hardware.machine_differences`, the rule the report uses for plans too). Only when a run would
actually run: re-rendering a finished grid never refuses. ``--allow-other-machine`` mixes them on purpose; the
report then lists both machines and says its speed-ups mix them.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from actorq.config import ConfigError
from actorq.hardware import cpu_info, cpu_summary, machine_differences, machine_groups, machine_slug
from actorq.report.records import finished_record

log = logging.getLogger(__name__)

ALLOW_FLAG = "--allow-other-machine"
"""The opt-out of :func:`check_same_machine`, as ``actorq experiment`` and ``actorq grid`` spell it."""


def recorded_machines(records_dir: Path) -> list[tuple[dict[str, Any], list[str]]]:
    """The machines of the finished records in ``records_dir``: ``(hardware, [run names])`` per machine."""
    names, infos = [], []
    for path in sorted(Path(records_dir).glob("*.json")):
        record = finished_record(records_dir, path.stem)
        if record is not None:
            names.append(path.stem)
            infos.append(record["summary"].get("hardware") or {})
    return [(info, [names[i] for i in members]) for info, members in machine_groups(infos)]


def check_same_machine(
    records_dir: Path, to_run: int, allow: bool, here: dict[str, Any] | None = None
) -> None:
    """Refuse to run ``to_run`` runs here when ``records_dir`` holds finished runs of another machine.

    Args:
        records_dir: The experiment's records folder.
        to_run: How many of its planned runs would run (not skipped as finished); 0 never refuses.
        allow: ``--allow-other-machine``: log a warning instead of refusing.
        here: This machine's :func:`~actorq.hardware.cpu_info` (default: read it).

    Raises:
        ConfigError: Naming the folder, the machines there and here, the fields that differ, and the fixes.
    """
    if not to_run:
        return
    here = cpu_info() if here is None else here
    others = [
        (info, names) for info, names in recorded_machines(records_dir) if machine_differences(info, here)
    ]
    if not others:
        return
    there = "; ".join(
        f"{cpu_summary(info) if info else 'no machine recorded'}: {_runs(len(names))} (e.g. {names[0]}), "
        f"{_differing(info, here)}"
        for info, names in others
    )
    what = (
        f"records folder {records_dir} holds finished runs of another machine ({there}), and {_runs(to_run)} "
        f"would run on this one ({cpu_summary(here)})"
    )
    if allow:
        log.warning("%s: mixing them (%s); the report names both machines", what, ALLOW_FLAG)
        return
    slug = machine_slug(here)
    raise ConfigError(
        f"{what}. Time-to-threshold speed-ups compare wall-clock times, so one table's runs must come from one "
        f"machine: keep one records folder per machine, e.g. `--records DIR/{slug}` (this machine's slug; with "
        f"`actorq grid` it gives DIR/{slug}/<task>/records), or pass {ALLOW_FLAG} to mix them on purpose (the "
        "report then lists both machines and says its speed-ups mix them)"
    )


def _runs(n: int) -> str:
    return f"{n} run{'' if n == 1 else 's'}"


def _differing(info: dict[str, Any], here: dict[str, Any]) -> str:
    if not info:
        return "a record of an older version that cannot show it ran on this machine"
    return f"differing from this machine in {', '.join(machine_differences(info, here))}"
