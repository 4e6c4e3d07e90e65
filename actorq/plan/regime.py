"""The one regime model: which side limits a run, and what that predicts (``actorq plan`` predicts with it, the
report labels runs beside it).

The learner consumes at most **C** samples/s (its *capacity*: learner steps/s x batch when never starved of
experience) and the actors of precision p produce at most **S_p** env steps/s (their *supply* when never blocked).
Reverb's samples-per-insert limiter (``spi``) lets the learner consume ``spi`` samples per inserted step, so the env
steps/s a run delivers are ``min(S_p, C / spi)`` (``S_p`` without a limiter), and if reward per env step does not
depend on the actors' precision, the time-to-threshold speed-up of p over fp32 is ``delivered_p / delivered_fp32``.
The smaller term is the run's regime: **learner-bound** (``C / spi < S_p``: quantized actors only wait longer),
**actor-bound** (``S_p < C / spi``: faster actors shorten the run), or **balanced**.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

LEARNER_BOUND = "learner-bound"
ACTOR_BOUND = "actor-bound"
BALANCED = "balanced"
NO_LIMITER = "no rate limiter"
UNKNOWN = "unknown"

MARGIN = 1.2
"""The model calls a run balanced while ``S_p`` and ``C / spi`` are within this factor of each other."""


def delivered_rate(supply: float, capacity: float | None, samples_per_insert: float) -> float:
    """Env steps/s the run delivers: ``min(S_p, C / spi)`` (``S_p`` without a limiter).

    Raises:
        ValueError: a rate is negative, or a limiter without a capacity.
    """
    if supply < 0 or (capacity is not None and capacity < 0):
        raise ValueError(f"rates must be >= 0, got supply {supply} and capacity {capacity}")
    if samples_per_insert <= 0:
        return float(supply)
    if capacity is None:
        raise ValueError("a run with a rate limiter needs the learner's capacity")
    return float(min(supply, capacity / samples_per_insert))


def predicted_label(supply: float | None, capacity: float | None, samples_per_insert: float) -> str:
    """The model's regime: which term of ``min(S_p, C / spi)`` is smaller, by more than :data:`MARGIN`."""
    if samples_per_insert <= 0:
        return NO_LIMITER
    if supply is None or capacity is None or supply <= 0 or capacity <= 0:
        return UNKNOWN
    ratio = supply * samples_per_insert / capacity
    if ratio >= MARGIN:
        return LEARNER_BOUND
    if ratio <= 1 / MARGIN:
        return ACTOR_BOUND
    return BALANCED


def predicted_speedup(delivered: Sequence[float | None], base: Sequence[float | None]) -> float | None:
    """The model's time-to-threshold speed-up over ``base``: median delivered rate / base's (None if missing)."""
    have = [d for d in delivered if d is not None and math.isfinite(d)]
    have_base = [d for d in base if d is not None and math.isfinite(d)]
    if not have or not have_base or statistics.median(have_base) <= 0:
        return None
    return statistics.median(have) / statistics.median(have_base)
