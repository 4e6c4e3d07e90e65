"""Timing of the actor's runtime (per-component wall-time accumulators and the components' names), and periods."""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field

BREAKDOWN_COMPONENTS = ("inference", "env", "pull", "decode", "apply", "adder")
"""Actor runtime components, as in the ActorQ paper's Fig. 4c/4d (plus env and adder time)."""


@dataclass
class Timers:
    """Accumulates wall time per named component; ``with timers.time("env"): ...``."""

    totals: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    @contextmanager
    def time(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.totals[name] += time.perf_counter() - start
            self.counts[name] += 1

    def add(self, name: str, seconds: float) -> None:
        self.totals[name] += seconds
        self.counts[name] += 1

    def snapshot(self) -> dict[str, float]:
        return dict(self.totals)


class Periodic:
    """True once every ``period_s`` seconds (first call returns True after one period)."""

    def __init__(self, period_s: float):
        self.period_s = period_s
        self._next = time.monotonic() + period_s

    def due(self) -> bool:
        now = time.monotonic()
        if now >= self._next:
            self._next = now + self.period_s
            return True
        return False
