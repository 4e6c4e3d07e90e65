"""What machine a figure was measured on: CPU model, cores, the flags that decide kernels, caches, bandwidth.

Every benchmark record, every run's summary.json and every kernel choice carries :func:`cpu_info`, because the
same code runs different kernels (and different numbers) on an AVX2-only AMD EPYC, an AVX512-VNNI Xeon or an
ARM server. :func:`read_bandwidth_gbs` measures the single-core read bandwidth for a working set of a given size,
which bounds how fast a batch-1 forward can stream a policy's weights (the "weight-streaming floor").
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import re
import time
from pathlib import Path
from typing import Any

import numpy as np

KERNEL_FLAGS = (
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512_vnni",
    "avx_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_int8",
    "amx_bf16",
    "asimd",
    "asimddp",
    "sve",
)
"""CPU flags (as /proc/cpuinfo spells them) that change which int8/fp16 kernels exist and how exact they are."""

ISA_LIMIT_VARIABLES = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY")
"""Environment variables that make oneDNN / ATen use fewer instructions than the CPU has (e.g. AVX2 on AVX512)."""


def _cpuinfo_text() -> str:
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


def _cache_size(level: int) -> int | None:
    """Bytes of the level-``level`` unified/data cache seen by cpu0 (Linux sysfs), or None."""
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for index in sorted(base.glob("index*")):
        try:
            if int((index / "level").read_text()) != level:
                continue
            if (index / "type").read_text().strip() not in ("Unified", "Data"):
                continue
            text = (index / "size").read_text().strip().upper()
        except (OSError, ValueError):
            continue
        unit = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            return int(digits) * unit
    return None


@functools.lru_cache(maxsize=1)
def cpu_info() -> dict[str, Any]:
    """The CPU: ``{"model", "arch", "cores", "flags": {flag: bool}, "l2_bytes", "l3_bytes", "isa_limit"}``.

    ``flags`` covers :data:`KERNEL_FLAGS`; ``isa_limit`` lists any :data:`ISA_LIMIT_VARIABLES` set in this
    process's environment (a run limited to AVX2 on an AVX512 CPU must say so next to its numbers).
    """
    text = _cpuinfo_text()
    model, flags = "", set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("model name", "hardware", "cpu model") and not model:
            model = value.strip()
        elif key in ("flags", "features") and not flags:
            flags = set(value.split())
    return {
        "model": model or platform.processor() or platform.machine(),
        "arch": platform.machine(),
        "cores": os.cpu_count() or 1,
        "flags": {flag: flag in flags for flag in KERNEL_FLAGS},
        "l2_bytes": _cache_size(2),
        "l3_bytes": _cache_size(3),
        "isa_limit": {k: os.environ[k] for k in ISA_LIMIT_VARIABLES if os.environ.get(k)},
    }


FINGERPRINT_KEYS = ("model", "arch", "flags", "isa_limit", "l2_bytes", "l3_bytes")
"""The :func:`cpu_info` fields that decide which kernels a machine picks and how fast they run. The model name alone
does not tell machines apart: a Zen 3 and a Zen 4 EPYC both say "AMD EPYC"; their flags and L2 do."""


def cpu_fingerprint() -> str:
    """A short hash of the model, flags and ISA limits: equal on machines that would pick the same kernels."""
    info = cpu_info()
    key = json.dumps({k: info[k] for k in FINGERPRINT_KEYS}, sort_keys=True)
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def _compared(info: dict[str, Any]) -> dict[str, Any]:
    """The fields :func:`machine_differences` compares, as it compares them: ``cores`` and :data:`FINGERPRINT_KEYS`,
    flags as the sorted list of those that are on, a missing ``isa_limit`` as none."""
    out = {key: info.get(key) for key in ("cores", *FINGERPRINT_KEYS)}
    if out["flags"] is not None:
        out["flags"] = sorted(f for f, on in out["flags"].items() if on)
    out["isa_limit"] = out["isa_limit"] or {}
    return out


def machine_differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Where two :func:`cpu_info` records (a bench's, a run's ``summary.hardware``) differ, one ``field: a vs b``
    per field of :data:`FINGERPRINT_KEYS` and ``cores``; empty: figures measured on one transfer to the other.

    Flags compare as the set of those that are on (records of older versions list fewer flags as off); a field
    one record lacks differs from any value (an old record cannot show it ran on the same machine)."""
    ca, cb = _compared(a), _compared(b)
    return [f"{key}: {_short(ca[key])} vs {_short(cb[key])}" for key in ca if ca[key] != cb[key]]


def machine_groups(infos: list[dict[str, Any]]) -> list[tuple[dict[str, Any], list[int]]]:
    """Records grouped by machine, in order of first appearance: ``(first record, indices of its records)``; two
    records are one machine when :func:`machine_differences` finds nothing between them."""
    groups: list[tuple[dict[str, Any], list[int]]] = []
    for i, info in enumerate(infos):
        for first, members in groups:
            if not machine_differences(first, info):
                members.append(i)
                break
        else:
            groups.append((info, [i]))
    return groups


SLUG_FLAGS = ("amx_int8", "avx512_vnni", "avx_vnni", "avx512f", "avx2", "sve", "asimddp", "asimd")
"""The kernel flags a machine slug names, best first: the slug names the first one the CPU has."""


def machine_slug(info: dict[str, Any] | None = None) -> str:
    """A filesystem-safe name of a machine (default: this one) for a folder of its runs, e.g.
    ``amd-epyc-7b13-2c-avx2-1f3a9c``: model, cores, best kernel flag (:data:`SLUG_FLAGS`), and a short hash of the
    fields :func:`machine_differences` compares, so machines it tells apart get different slugs even where the
    model name is only "AMD EPYC" (a Zen 2 and a Zen 3 VM)."""
    info = cpu_info() if info is None else info
    flags = info.get("flags") or {}
    model = re.sub(
        r"\((r|tm)\)|\bcpu\b|@.*", " ", str(info.get("model") or info.get("arch") or "cpu").lower()
    )
    best = next((f for f in SLUG_FLAGS if flags.get(f)), "base")
    digest = hashlib.sha256(json.dumps(_compared(info), sort_keys=True).encode()).hexdigest()[:6]
    return re.sub(r"[^a-z0-9]+", "-", f"{model}-{info.get('cores', '?')}c-{best}-{digest}").strip("-")


def _short(value: Any) -> str:
    if value is None:
        return "not recorded"
    if isinstance(value, list):
        return " ".join(map(str, value)) or "none"
    return str(value)


def cpu_summary(info: dict[str, Any] | None = None) -> str:
    """One line for logs and tables, e.g. ``AMD EPYC (x86_64, 2 cores; avx2 fma f16c)``, of this machine or of a
    :func:`cpu_info` record (a run's ``summary.hardware``; fields it lacks read ``?``)."""
    info = cpu_info() if info is None else info
    flags = " ".join(f for f, on in (info.get("flags") or {}).items() if on) or "no listed flags"
    limit = "".join(f"; {k}={v}" for k, v in (info.get("isa_limit") or {}).items())
    return (
        f"{info.get('model', '?')} ({info.get('arch', '?')}, {info.get('cores', '?')} cores; {flags}{limit})"
    )


def read_bandwidth_gbs(nbytes: int, repeats: int = 7, max_seconds: float = 0.5) -> float:
    """Single-core read bandwidth (GB/s, 1e9 bytes) for a working set of ``nbytes``, measured now.

    Streams an ``nbytes`` buffer with a vectorised int64 sum (numpy, one thread) ``repeats`` times after a warm-up
    pass and returns ``nbytes / median time``. A working set that fits in cache reads at cache speed, one that
    doesn't at DRAM speed, exactly as a batch-1 forward re-reading the same weights every step does.
    ``weight bytes / this`` is therefore the weight-streaming floor of a batch-1 forward.

    Args:
        nbytes: Working-set size in bytes (rounded up to 8 bytes, at least 64 KiB).
        repeats: Timed passes (median taken).
        max_seconds: Stop early once this much time has been spent (at least 3 passes are timed).
    """
    n = max(int(nbytes), 1 << 16) // 8 + 1
    buf = np.ones(n, dtype=np.int64)
    buf.sum()  # warm-up: page faults and cache fill
    times: list[float] = []
    start = time.perf_counter()
    for _ in range(max(int(repeats), 3)):
        t0 = time.perf_counter()
        buf.sum()
        times.append(time.perf_counter() - t0)
        if len(times) >= 3 and time.perf_counter() - start > max_seconds:
            break
    return float(buf.nbytes / np.median(times) / 1e9)


def bandwidth_record(weight_bytes: int | None = None) -> dict[str, Any]:
    """Read bandwidth measured now: ``dram_read_gbs`` (256 MiB) and, when ``weight_bytes`` is given,
    ``weights_read_gbs`` at that working set (with ``weights_read_bytes``).

    On a cloud VM the DRAM figure changes between days with the host's other tenants (a Zen 3 read 8-13 GB/s one
    day and 17.6 the next), and a batch-1 forward whose weights exceed the L3 runs at its speed: a figure timed on
    one day carries the bandwidth it was timed at, so another day's can be compared with it.
    """
    record: dict[str, Any] = {"dram_read_gbs": round(read_bandwidth_gbs(256 << 20, repeats=5), 2)}
    if weight_bytes:
        record["weights_read_gbs"] = round(read_bandwidth_gbs(weight_bytes), 2)
        record["weights_read_bytes"] = int(weight_bytes)
    return record


def hardware_record(weight_bytes: int | None = None) -> dict[str, Any]:
    """:func:`cpu_info` plus :func:`bandwidth_record`."""
    return {**cpu_info(), **bandwidth_record(weight_bytes)}
