"""``actorq bench comm``'s numbers from its blocks' timelines: how long a published version takes to reach the
actors, how many versions behind the publisher they run, their env steps/s, and the summary table and notes.

Everything here is arithmetic on what the workers recorded (wall-clock times of one machine's clock, or of hosts
whose clocks agree): the publisher's list of publishes (version, when its policy-table insert started and ended)
and each actor's install timeline (``(time, version)``: its first entry the version it ran at the block's start,
then one per version it installed, timed right after the step that decoded, verified and applied it).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

import numpy as np

STALENESS_INTERVAL_S = 0.05
"""Staleness is sampled on this grid over a block (finer than any pull: one pull per ``update_period`` steps)."""


def version_at(timeline: Sequence[tuple[float, int]], t: float, before: int) -> int:
    """The version of a ``(time, version)`` timeline (sorted by time) at time ``t``: that of its last entry at or
    before ``t``; ``before`` when every entry is later."""
    i = bisect.bisect_right([when for when, _ in timeline], t)
    return timeline[i - 1][1] if i else before


def staleness_samples(
    published: Sequence[tuple[float, int]],
    installed: Sequence[tuple[float, int]],
    start: float,
    end: float,
    interval_s: float = STALENESS_INTERVAL_S,
) -> list[int]:
    """Versions the actor runs behind the publisher, sampled every ``interval_s`` from ``start`` until ``end``.

    Args:
        published: ``(time the insert completed, version)`` per publish: from then on an actor can fetch it.
        installed: The actor's ``(time, version)`` timeline; its first entry is the version it starts with.
        start: Sampling starts here (the block's start).
        end: And stops before here (the block's end).
        interval_s: Grid step.

    Returns:
        Per sample, the publisher's newest version minus the actor's (0 while the actor runs the newest). Before
        the block's first publish the publisher's newest is the version the actor started with.
    """
    if not installed:
        raise ValueError("the actor's timeline is empty: its first entry is the version it started with")
    first = installed[0][1]
    times = np.arange(start, end, interval_s)
    return [version_at(published, t, first) - version_at(installed, t, first) for t in times]


def reach_times(publishes: Sequence[dict[str, Any]], installed: Sequence[tuple[float, int]]) -> list[float]:
    """Seconds from a version's policy-table insert (``t_insert``) until the actor ran it, per version it
    installed that was published in the block (versions it skipped because a newer one came first count in
    :func:`skipped`, not here)."""
    insert_at = {p["version"]: p["t_insert"] for p in publishes}
    return [t - insert_at[v] for t, v in installed[1:] if v in insert_at]


def skipped(publishes: Sequence[dict[str, Any]], installed: Sequence[tuple[float, int]]) -> int:
    """Versions published in the block, older than the newest the actor installed, that it never ran (a newer
    one was published before it fetched them)."""
    ran = {v for _, v in installed}
    newest = max(ran)
    return sum(1 for p in publishes if p["version"] < newest and p["version"] not in ran)


def _quantile(values: Sequence[float], q: float) -> float | None:
    return float(np.quantile(values, q)) if len(values) else None


def block_record(publisher: dict[str, Any], actors: list[dict[str, Any]], start: float, end: float) -> dict:
    """One block's record from the publisher's result and the actors' (their timelines and step counts)."""
    publishes = publisher["publishes"]
    published = [(p["t_done"], p["version"]) for p in publishes]
    reach: list[float] = []
    stale: list[int] = []
    for actor in actors:
        installed = [tuple(entry) for entry in actor["installed"]]
        actor["reach_s"] = reach_times(publishes, installed)
        actor["skipped"] = skipped(publishes, installed)
        actor["staleness"] = staleness_samples(published, installed, start, end)
        reach += actor["reach_s"]
        stale += actor["staleness"]
    rates = [a["steps"] / a["seconds"] for a in actors if a["seconds"] > 0]
    # Seconds between an actor's looks at the policy table (one per update_period env steps): part of every
    # reach time, however fast the link.
    polls = [a["seconds"] / a["pulls"] for a in actors if a["pulls"]]
    return {
        "message_bytes": publisher["message_bytes"],
        "publishes": len(publishes),
        "installs": sum(len(a["reach_s"]) for a in actors),
        "skipped": sum(a["skipped"] for a in actors),
        "reach_s": _quantile(reach, 0.5),
        "reach_s_p90": _quantile(reach, 0.9),
        "reach_s_max": max(reach) if reach else None,
        "staleness": _quantile(stale, 0.5),
        "staleness_mean": float(np.mean(stale)) if stale else None,
        "staleness_p90": _quantile(stale, 0.9),
        "staleness_max": max(stale) if stale else None,
        "steps_per_s": float(np.mean(rates)) if rates else 0.0,
        "poll_s": float(np.mean(polls)) if polls else None,
        "publish_late_s": max((p["late_s"] for p in publishes), default=0.0),
        "quantize_ms": _quantile([p["quantize_ms"] for p in publishes], 0.5),
        "publisher": publisher,
        "per_actor": actors,
    }


SUMMARY_KEYS = (
    "reach_s",
    "reach_s_p90",
    "staleness",
    "staleness_p90",
    "staleness_max",
    "steps_per_s",
    "poll_s",
)
"""A block's figures that the summary gives as the median over its repeats (with min and max)."""


def summarize(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (link rate, comm bits): medians over the repeats of each :data:`SUMMARY_KEYS` figure (and
    their ranges), the message's bytes, and the time the bytes alone take on the link."""
    rows = []
    speed = {r["rate"]: r["rate_bits_per_s"] or float("inf") for r in records}  # None: the link not limited
    keys = sorted({(r["rate"], r["comm_bits"]) for r in records}, key=lambda k: (speed[k[0]], -k[1]))
    for rate, bits in keys:
        blocks = [r for r in records if r["rate"] == rate and r["comm_bits"] == bits]
        row: dict[str, Any] = {
            "rate": rate,
            "rate_bits_per_s": blocks[0]["rate_bits_per_s"],
            "comm_bits": bits,
            "repeats": len(blocks),
            "message_bytes": int(np.median([b["message_bytes"] for b in blocks])),
            "publishes": int(sum(b["publishes"] for b in blocks)),
            "installs": int(sum(b["installs"] for b in blocks)),
            "skipped": int(sum(b["skipped"] for b in blocks)),
        }
        for key in SUMMARY_KEYS:
            values = [b[key] for b in blocks if b[key] is not None]
            row[key] = float(np.median(values)) if values else None
            row[f"{key}_min"] = min(values) if values else None
            row[f"{key}_max"] = max(values) if values else None
        bps = row["rate_bits_per_s"]
        row["wire_s"] = 8 * row["message_bytes"] / bps if bps else None
        rows.append(row)
    return rows


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def format_table(rows: list[dict[str, Any]]) -> str:
    """The summary as a text table: one line per (rate, bits)."""
    head = (
        f"{'link':>9} {'bits':>4} {'MB':>7} {'wire s':>7} {'reach s':>8} {'p90':>7} "
        f"{'stale':>5} {'p90':>5} {'max':>4} {'steps/s':>8} {'range':>15} {'poll s':>6} {'pub':>4} {'inst':>4} "
        f"{'skip':>4}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['rate'] or 'none':>9} {r['comm_bits']:>4} {r['message_bytes'] / 1e6:>7.2f} "
            f"{_fmt(r['wire_s'], '.3f'):>7} {_fmt(r['reach_s'], '.3f'):>8} {_fmt(r['reach_s_p90'], '.3f'):>7} "
            f"{_fmt(r['staleness'], '.1f'):>5} {_fmt(r['staleness_p90'], '.1f'):>5} "
            f"{_fmt(r['staleness_max'], '.0f'):>4} {r['steps_per_s']:>8.1f} "
            f"{_fmt(r['steps_per_s_min'], '.0f') + '-' + _fmt(r['steps_per_s_max'], '.0f'):>15} "
            f"{_fmt(r['poll_s'], '.3f'):>6} {r['publishes']:>4} {r['installs']:>4} {r['skipped']:>4}"
        )
    return "\n".join(lines)


def notes(rows: list[dict[str, Any]], actors: int, period_s: float) -> list[str]:
    """Per link rate: what fewer bits change (reach time, staleness, env steps/s against the widest wire), and
    whether the link can carry every version to every actor at all (``actors`` x wire time against the period)."""
    out = []
    for rate in dict.fromkeys(r["rate"] for r in rows):
        at = [r for r in rows if r["rate"] == rate]
        base = max(at, key=lambda r: r["comm_bits"])
        for r in at:
            wire = r["wire_s"]
            if wire is not None:
                load = actors * wire / period_s
                fits = (
                    "the link carries every version to every actor"
                    if load < 1
                    else "the link cannot carry every version to every actor: they skip versions"
                )
                link = f"{actors} x {wire:.3f} s of wire per {period_s:.2f} s period ({load:.0%}): {fits}"
            else:
                link = "link not limited"
            if r is base:
                out.append(f"{rate or 'no limit'}, {r['comm_bits']}-bit (baseline): {link}")
                continue
            reach = (
                f"reach {base['reach_s'] / r['reach_s']:.2f}x faster"
                if r["reach_s"] and base["reach_s"]
                else "reach -"
            )
            steps = (
                f"env steps/s {r['steps_per_s'] / base['steps_per_s']:.2f}x"
                if base["steps_per_s"]
                else "env steps/s -"
            )
            stale = f"staleness {_fmt(r['staleness'], '.1f')} vs {_fmt(base['staleness'], '.1f')} versions"
            out.append(f"{rate or 'no limit'}, {r['comm_bits']}-bit: {reach}, {stale}, {steps}; {link}")
    return out
