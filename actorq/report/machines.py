"""Where a task's runs ran: one line per machine, and a plain warning when they ran on more than one.

Two runs ran on one machine when :func:`actorq.hardware.machine_differences` finds nothing between their
``summary.hardware`` records (the rule ``actorq experiment`` refuses to mix records by, and plans are checked with).
Time-to-threshold speed-ups compare wall-clock times, which differ up to 2x between machines, so a table whose runs
came from several (``actorq experiment --allow-other-machine``, or records folders read together) says so.
"""

from __future__ import annotations

from actorq.hardware import cpu_summary, machine_differences, machine_groups
from actorq.report import markdown as md
from actorq.report import stats
from actorq.report.analysis import TaskTable
from actorq.report.measure import RunMetrics
from actorq.report.runs import split_label


def _runs(t: TaskTable) -> list[tuple[str, RunMetrics]]:
    return [(label, m) for label in t.labels() for m in t.runs[label]]


def hardware_lines(t: TaskTable) -> list[str]:
    """Where the runs ran (CPU, flags, caches; bandwidth as the median over runs) and the kernels the actors
    verified: one line per machine, not per run (runs that recorded no machine are left out)."""
    runs = [(label, m) for label, m in _runs(t) if m.run.summary.get("hardware")]
    groups = machine_groups([m.run.summary["hardware"] for _, m in runs])
    lines = []
    for number, (hw, members) in enumerate(groups, 1):
        kernels, weights, dram = set(), [], []
        for label, m in (runs[i] for i in members):
            kernel, own = m.run.summary.get("kernel"), m.run.summary["hardware"]
            weights.append(own.get("weights_read_gbs"))
            dram.append(own.get("dram_read_gbs"))
            if kernel:
                kernels.add(
                    f"{split_label(label)[0]}: {kernel} (error {md.fmt(m.run.summary.get('kernel_error'), 4)})"
                )
        flags = ", ".join(f for f, on in (hw.get("flags") or {}).items() if on) or "-"
        name = f"Machine {number}" if len(groups) > 1 else "Machine"
        lines.append(
            f"{name} ({len(members)} runs): {hw.get('model', '?')}, {hw.get('cores', '?')} cores ({flags}); "
            f"L3 {hw.get('l3_bytes')} B; read bandwidth {md.fmt(stats.plain_median(weights).median, 2)} GB/s at the "
            f"policy's weight size, {md.fmt(stats.plain_median(dram).median, 2)} GB/s from DRAM (medians over runs"
            f"{_range(dram)}); "
            f"actor kernels: {', '.join(sorted(kernels)) or 'not recorded'}.\n"
        )
    return lines


def _range(values: list) -> str:
    """``; DRAM lo-hi`` when the runs' DRAM bandwidths differ (a cloud VM's changes between days), else empty."""
    known = [v for v in values if v is not None]
    return f"; DRAM {min(known):.2f}-{max(known):.2f} GB/s" if known and min(known) != max(known) else ""


def mixed_machines_note(t: TaskTable) -> str:
    """A warning when the task's runs ran on more than one machine (how many runs of each label on each, and where
    the machines differ); empty when they ran on one."""
    runs = _runs(t)
    groups = machine_groups([m.run.summary.get("hardware") or {} for _, m in runs])
    if len(groups) < 2:
        return ""
    first = groups[0][0]
    parts = []
    for number, (hw, members) in enumerate(groups, 1):
        counts: dict[str, int] = {}
        for i in members:
            counts[runs[i][0]] = counts.get(runs[i][0], 0) + 1
        per_label = ", ".join(f"{label} {n}" for label, n in counts.items())
        where = cpu_summary(hw) if hw else "no machine recorded"
        differs = (
            f", differing from machine 1 in {', '.join(machine_differences(first, hw))}" if number > 1 else ""
        )
        parts.append(f"machine {number}, {where}: {len(members)} runs ({per_label}){differs}")
    return (
        f"**Caveat: these runs come from {len(groups)} machines** ({'; '.join(parts)}). Wall-clock times differ "
        "between machines, so the times to threshold and the speed-ups below mix them; a table of one machine needs "
        "one records folder per machine.\n"
    )
