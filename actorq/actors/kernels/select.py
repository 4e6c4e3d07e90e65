"""Pick the actor's kernel on the machine that runs it: verify every candidate against fp32, time the verified ones
at the actor's batch size, use the fastest.

``precision="auto"`` considers every precision and keeps fp32 unless another verified kernel is faster than the
fastest fp32 one by more than :data:`AUTO_MARGIN` (so ``auto`` is never measurably slower than fp32: small
policies, where int8's per-layer overhead dominates, stay fp32).

The outcome is cached per (CPU fingerprint, torch and ONNX Runtime versions, policy shape, precision, batch,
threads) in a JSON file (``$ACTORQ_KERNEL_CACHE``, default ``~/.cache/actorq/kernels.json``; ``none`` disables),
so a restarted actor does not re-time. The cache is advisory: the cached kernel is verified again before use and
a failure (or any key mismatch) runs the whole selection.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from actorq.actors.kernels.base import Kernel, PolicySpec
from actorq.actors.kernels.registry import CANDIDATES, candidates_for
from actorq.actors.kernels.verify import (
    Check,
    KernelVerificationError,
    standard_probes,
    verify_probes,
)
from actorq.hardware import cpu_fingerprint, cpu_summary
from actorq.metrics import json_safe

logger = logging.getLogger(__name__)

AUTO_MARGIN = 0.03
"""``auto`` leaves fp32 only for a kernel at least this much faster (median) than the fastest fp32 kernel."""
TIME_BUDGET_S = 1.0
"""Wall time spent timing the verified candidates (after pruning the clearly slow ones)."""
CACHE_SCHEMA = 2
"""Part of every cache key; raised when verification changes (2: the saturation probe), so choices and
rejection lists made under the old checks are not reused."""


@dataclass
class Selection:
    """What was chosen, how it measured, and what was rejected (logged, and written into summary.json)."""

    kernel: str
    batch: int
    error: float
    """The chosen kernel's verified error (see :mod:`actorq.actors.kernels.verify` for the measure)."""
    time_us: float | None
    """Its median forward time at ``batch`` (None when it was the only candidate and not timed)."""
    detail: str
    timings_us: dict[str, float] = field(default_factory=dict)
    errors: dict[str, float] = field(default_factory=dict)
    rejected: list[dict[str, Any]] = field(default_factory=list)
    """``{"kernel", "error", "reason"}`` per candidate that failed verification (or failed to build)."""
    unavailable: dict[str, str] = field(default_factory=dict)
    not_applicable: dict[str, str] = field(default_factory=dict)
    """Candidates left out for this network (``Kernel.inapplicable``), with why."""
    order: list[str] = field(default_factory=list)
    """Verified kernels, chosen first then by time (the fallbacks)."""
    cached: bool = False
    cpu: str = ""
    first_message: list[dict[str, Any]] = field(default_factory=list)
    """The checks on the first real weight message (``{"kernel", "ok", "error", "reason"}``), once it came."""

    @property
    def precision(self) -> str:
        return self.kernel.split("/", 1)[0]

    def to_json(self) -> dict[str, Any]:
        record = asdict(self)
        record["precision"] = self.precision
        return json_safe(record)

    def describe(self) -> str:
        """One log line: choice, error, time, rejections."""
        timed = f", {self.time_us:.0f} us at batch {self.batch}" if self.time_us is not None else ""
        rejected = "; ".join(f"{r['kernel']}: {r['reason']}" for r in self.rejected)
        return f"kernel {self.kernel} ({self.detail}{timed}{', cached' if self.cached else ''})" + (
            f"; rejected {rejected}" if rejected else ""
        )


def time_kernels(kernels: list[Kernel], x: np.ndarray, budget_s: float = TIME_BUDGET_S) -> dict[str, float]:
    """Median forward time (us) of each kernel on ``x``, measured in interleaved rounds in a rotating order.

    After a warm-up and one round, kernels slower than 3x the fastest are dropped (their time is still
    reported); the rest run rounds until ``budget_s`` is spent (at least 5 rounds).
    """
    x = np.ascontiguousarray(x)
    for k in kernels:
        k.forward(x)
        k.forward(x)
    samples: dict[str, list[float]] = {k.name: [] for k in kernels}
    live = list(kernels)
    start, rounds = time.perf_counter(), 0
    while rounds < 5 or time.perf_counter() - start < budget_s:
        shift = rounds % len(live)
        for k in live[shift:] + live[:shift]:
            for _ in range(3):
                t0 = time.perf_counter()
                k.forward(x)
                samples[k.name].append(time.perf_counter() - t0)
        rounds += 1
        if rounds == 1 and len(live) > 1:
            best = min(np.median(samples[k.name]) for k in live)
            live = [k for k in live if np.median(samples[k.name]) <= 3 * best]
        if rounds > 200:
            break
    return {name: float(np.median(s) * 1e6) for name, s in samples.items() if s}


def _choose(timings: dict[str, float], precision: str) -> list[str]:
    """Verified kernels best first: by time, except that ``auto`` prefers fp32 within :data:`AUTO_MARGIN`."""
    order = sorted(timings, key=timings.get)
    if precision == "auto":
        fp32 = [n for n in order if n.startswith("fp32/")]
        if fp32 and timings[order[0]] > (1 - AUTO_MARGIN) * timings[fp32[0]]:
            order.remove(fp32[0])
            order.insert(0, fp32[0])
    return order


# -- cache ----------------------------------------------------------------------------------------------------
def cache_path() -> Path | None:
    value = os.environ.get("ACTORQ_KERNEL_CACHE", "")
    if value.lower() == "none":
        return None
    return Path(value) if value else Path.home() / ".cache" / "actorq" / "kernels.json"


def _cache_key(spec: PolicySpec, precision: str, batch: int) -> str:
    try:
        import onnxruntime

        ort_version = onnxruntime.__version__
    except ImportError:
        ort_version = None
    return json.dumps(
        {
            "schema": CACHE_SCHEMA,
            "cpu": cpu_fingerprint(),
            "torch": torch.__version__,
            "onnxruntime": ort_version,
            "algorithm": spec.algorithm,
            "shape": [spec.obs_dim, *spec.layers, spec.out_dim],
            "torso": [spec.torso.kind, list(spec.torso.obs_shape), spec.torso.pixels] if spec.torso else None,
            "threads": spec.threads,
            "precision": precision,
            "batch": batch,
            "candidates": sorted(c.name for c in CANDIDATES),
        },
        sort_keys=True,
    )


def _cache_read(key: str) -> dict[str, Any] | None:
    path = cache_path()
    if path is None or not path.is_file():
        return None
    try:
        entry = json.loads(path.read_text()).get(key)
    except (OSError, ValueError, AttributeError):
        logger.warning("kernel cache %s is unreadable; selecting afresh", path)
        return None
    return entry if isinstance(entry, dict) else None


def _cache_write(key: str, selection: Selection) -> None:
    path = cache_path()
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            data = json.loads(path.read_text()) if path.is_file() else {}
            data = data if isinstance(data, dict) else {}
        except ValueError:
            data = {}
        data[key] = selection.to_json()
        # Atomic replace: several actors may write at once; the last complete file wins.
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".kernels-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1)
        os.replace(tmp, path)
    except OSError as exc:
        logger.warning("could not write the kernel cache %s (%s)", path, exc)


def _from_cache(entry: dict[str, Any]) -> Selection:
    fields = {k: entry[k] for k in Selection.__dataclass_fields__ if k in entry}
    fields["error"] = float("inf") if fields.get("error") is None else fields["error"]
    return Selection(**fields)


# -- selection ------------------------------------------------------------------------------------------------
def build_kernel(name: str, spec: PolicySpec) -> Kernel:
    """A fresh instance of the registered kernel ``name`` (e.g. ``int8/fbgemm``)."""
    classes = {c.name: c for c in CANDIDATES}
    if name not in classes:
        raise KernelVerificationError(f"unknown kernel {name!r}; registered: {', '.join(classes)}")
    return classes[name](spec)


def select_kernel(
    spec: PolicySpec,
    precision: str,
    batch: int = 1,
    requested: str = "auto",
    use_cache: bool = True,
    budget_s: float = TIME_BUDGET_S,
) -> tuple[Kernel, Selection]:
    """Verify, time and pick a kernel for ``spec`` at ``precision`` (or ``"auto"``) and ``batch``.

    Args:
        spec: The policy network.
        precision: ``fp32``, ``fp16``, ``int8`` or ``auto`` (every precision, fp32 preferred unless beaten by
            :data:`AUTO_MARGIN`).
        batch: The actor's batch size (rows per forward).
        requested: ``auto`` or one kernel of ``precision`` (short ``fbgemm`` or full ``int8/fbgemm`` name):
            then only that kernel is verified (not timed) and used.
        use_cache: Consult and update the kernel cache (only for ``requested="auto"``).
        budget_s: Timing budget.

    Returns:
        The chosen kernel, with the probe weights installed (install the real ones before acting), and the
        :class:`Selection` record.

    Raises:
        KernelVerificationError: The requested kernel, or every candidate, fails verification or is unavailable.
    """
    names = candidates_for(precision, requested)
    probes = standard_probes(spec, batch)
    key = _cache_key(spec, precision, batch)
    if use_cache and requested == "auto" and (entry := _cache_read(key)) is not None:
        cached = _from_cache(entry)
        kernel = build_kernel(cached.kernel, spec)
        check = verify_probes(kernel, probes, batch)
        if check.ok:
            cached.cached, cached.error, cached.detail = True, check.error, check.detail
            logger.info("%s", cached.describe())
            return kernel, cached
        logger.warning(
            "cached kernel %s fails verification now (%s); selecting afresh", cached.kernel, check.detail
        )

    selection = Selection(
        kernel="", batch=batch, error=float("inf"), time_us=None, detail="", cpu=cpu_summary()
    )
    verified: dict[str, tuple[Kernel, Check]] = {}
    for cls in (c for c in CANDIDATES if c.name in names):
        reason = cls.unavailable()
        if reason:
            selection.unavailable[cls.name] = reason
            continue
        if skip := cls.inapplicable(spec):
            selection.not_applicable[cls.name] = skip
            continue
        try:
            kernel = cls(spec)
        except Exception as exc:  # e.g. an engine that can't pack these shapes here
            check = Check(cls.name, False, float("inf"), f"failed to build: {type(exc).__name__}: {exc}")
        else:
            check = verify_probes(kernel, probes, batch)
        selection.errors[cls.name] = check.error
        if check.ok:
            verified[cls.name] = (kernel, check)
        else:
            selection.rejected.append({"kernel": cls.name, "error": check.error, "reason": check.detail})
            logger.warning("kernel %s rejected on %s: %s", cls.name, cpu_summary(), check.detail)
    if not verified:
        tried = "; ".join(f"{r['kernel']}: {r['reason']}" for r in selection.rejected)
        missing = "; ".join(
            f"{k}: {v}" for k, v in {**selection.unavailable, **selection.not_applicable}.items()
        )
        raise KernelVerificationError(
            f"no {precision} kernel ({requested}) computes this {spec.algorithm} policy correctly on "
            f"{cpu_summary()}: {tried or missing}. Choose another actor.kernel (or actor.kernel=auto), or "
            f"actor.precision=fp32."
        )
    if len(verified) > 1:
        rows = np.ascontiguousarray(probes[0].x[: max(batch, 1)])
        selection.timings_us = time_kernels([k for k, _ in verified.values()], rows, budget_s)
        selection.order = _choose(selection.timings_us, precision)
    else:
        selection.order = list(verified)
    chosen, check = verified[selection.order[0]]
    selection.kernel, selection.error, selection.detail = chosen.name, check.error, check.detail
    selection.time_us = selection.timings_us.get(chosen.name)
    logger.info("%s", selection.describe())
    if use_cache and requested == "auto":
        _cache_write(key, selection)
    return chosen, selection
