"""What every measurement of this machine shares (``actorq plan`` and the ``actorq bench`` commands): the machine
it ran on, the one order rule of interleaved measurements (:func:`rotated`), lists and JSON, the ratios between
variants, random actions and scratch directories.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from actorq.config import ConfigError
from actorq.hardware import cpu_info

START_TIMEOUT_S = 600.0
"""How long a bench worker may take to start: TensorFlow, torch and Reverb imports in several processes at once on a
loaded 2-core machine can take minutes."""
START_DELAY_S = 1.0
"""A block's common start is this far after its commands are sent (every worker must be waiting by then)."""

log = logging.getLogger(__name__)

T = TypeVar("T")


def config_meta(args: Any, config: Any) -> dict[str, Any]:
    """What every bench's JSON ``meta`` says of the config it timed: the file, the overrides, the task, the algorithm
    and the policy network (so a report can refuse figures of another config)."""
    return {
        "config": args.config,
        "overrides": list(args.overrides),
        "task": f"{config.env.suite}:{config.env.task}",
        "algorithm": config.algorithm,
        "policy_layers": list(config.network.policy_layers),
    }


def machine_info() -> dict[str, Any]:
    """The CPU (:func:`actorq.hardware.cpu_info`), torch and Python versions, and the load (bench metadata)."""
    cpu = cpu_info()
    info: dict[str, Any] = {**cpu, "python": platform.python_version()}
    # The short keys the report reads (also in reports written before cpu_info existed).
    info.update(cpu=cpu["model"], cpus=cpu["cores"], isa=[f for f, on in cpu["flags"].items() if on])
    with contextlib.suppress(ImportError):
        import torch

        info["torch"] = torch.__version__
    info["loadavg"] = os.getloadavg()[0]
    return info


def cpu_line(machine: dict[str, Any]) -> str:
    """``CPU: model (N cores; flags)`` from :func:`machine_info`, the last line of a bench's table."""
    flags = ", ".join(machine["isa"]) or "no vector flags recorded"
    return f"CPU: {machine['cpu']} ({machine['cpus']} cores; {flags})"


def cpu_flags() -> list[str]:
    """Every flag of the CPU as ``/proc/cpuinfo`` lists it (empty where there is none)."""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("flags"):
                return line.split(":", 1)[1].split()
    return []


def rotated(items: list[T], round_index: int, rounds: int) -> list[T]:
    """``items`` in the order of round ``round_index`` of ``rounds``: rotated left by the round's shift.

    The one order rule of every interleaved measurement (experiment runs here, bench blocks and kernel timings in
    :mod:`actorq.bench`, :mod:`actorq.plan`): with at least as many rounds as items the shift is the round's index (a Latin square:
    each item at each position once per ``len(items)`` rounds); with fewer rounds the shifts are spread over the
    whole cycle, so no item always goes early or late.
    """
    n = len(items)
    if n == 0:
        return []
    shift = round_index % n if rounds >= n else (round_index * n) // rounds
    return items[shift:] + items[:shift]


def interleave(items: list[T], repeats: int) -> list[tuple[int, T]]:
    """(repeat, item) in run order: every item once per repeat, in the order rotated each repeat
    (:func:`rotated`), so drift of a shared machine hits every item alike."""
    return [(r, item) for r in range(repeats) for item in rotated(items, r, repeats)]


def parse_list(text: str, allowed: tuple, what: str, cast: Any = str) -> list:
    """``"a,b"`` -> ``[cast("a"), cast("b")]``; ConfigError naming ``what`` when empty, not castable or (with
    ``allowed``) not one of ``allowed``."""
    try:
        out = [cast(p.strip()) for p in str(text).split(",") if p.strip()]
    except ValueError:
        raise ConfigError(f"{what} {text!r}: expected a comma-separated list") from None
    bad = [p for p in out if allowed and p not in allowed]
    if not out or bad:
        raise ConfigError(f"{what} {text!r}: choose from {', '.join(map(str, allowed))}")
    return out


def blocks_document(
    kind: str,
    meta: dict[str, Any],
    records: list[dict[str, Any]],
    rows: list[dict[str, Any]],
    sweep: list[dict[str, Any]] | None = None,
    notes: list[str] | None = None,
) -> dict[str, Any]:
    """The JSON document of a bench measured in blocks (``actors``, ``ablation``, ``replay``): what ``actorq
    report`` reads from them."""
    return {
        "kind": kind,
        "meta": meta,
        "records": records,
        "summary": rows,
        "sweep": sweep or [],
        "notes": notes or [],
    }


def write_json(path: str | Path, doc: dict[str, Any]) -> None:
    """Write a bench's result and say so on stdout: the one JSON writer of ``actorq bench`` (numpy numbers as
    floats)."""
    Path(path).write_text(json.dumps(doc, indent=1, default=float))
    sys.stdout.write(f"wrote {path}\n")


def repeat_rates(rates: dict[int, float]) -> dict[str, Any]:
    """A variant's rates per repeat -> ``repeats``, ``rates_by_repeat`` and the median (``steps_per_s``) with its
    min and max: the columns every bench summary reports and :func:`set_speedup` pairs."""
    return {
        "repeats": len(rates),
        "rates_by_repeat": rates,
        "steps_per_s": float(np.median(list(rates.values()))),
        "steps_per_s_min": min(rates.values()),
        "steps_per_s_max": max(rates.values()),
    }


def set_speedup(row: dict[str, Any], base: dict[str, Any]) -> None:
    """``row``'s steps/s against ``base``'s: ``speedup`` (ratio of medians) and the range of the paired
    per-repeat ratios (``speedup_min``/``speedup_max``: repeats ran interleaved, so each pair shared the machine)."""
    row["baseline"] = base["variant"]
    row["speedup"] = row["steps_per_s"] / base["steps_per_s"] if base["steps_per_s"] > 0 else None
    paired = [
        row["rates_by_repeat"][rep] / base["rates_by_repeat"][rep]
        for rep in row["rates_by_repeat"]
        if base["rates_by_repeat"].get(rep)
    ]
    row["speedup_min"], row["speedup_max"] = (min(paired), max(paired)) if paired else (None, None)


def random_action(spec: Any, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random action of a ``dm_env`` action spec: an index of a discrete one, a point in a box."""
    if hasattr(spec, "num_values"):  # a discrete task (dm_env DiscreteArray)
        return np.asarray(rng.integers(spec.num_values), dtype=spec.dtype)
    return rng.uniform(spec.minimum, spec.maximum, size=spec.shape).astype(spec.dtype)


def wait_until(wall_time: float) -> None:
    """Return at the wall-clock time ``wall_time`` (a block's common start)."""
    while (left := wall_time - time.time()) > 0:
        time.sleep(min(left, 0.01))


def close_workdir(path: Path, ok: bool, what: str) -> None:
    """A bench's scratch directory at its end: removed after a success, kept (and named) after a failure, whose
    worker logs it holds."""
    if ok:
        shutil.rmtree(path, ignore_errors=True)
    else:
        log.warning("%s logs kept in %s", what, path)
