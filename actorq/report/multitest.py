"""Holm's step-down correction of a family of p-values (Holm 1979), for the reports' comparison tables.

A table that calls "A better than B" wherever one of its m tests has p < 0.05 makes a false claim in about
1 - 0.95^m of tables when nothing differs (60% at m = 18). Holm's adjusted p-values keep that family-wise error at
the level for any dependence between the tests, and reject everything Bonferroni does and more.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the order given: reject test i at level a when ``holm(p)[i] <= a``.

    The i-th smallest of m p-values is multiplied by (m - i + 1), then made non-decreasing in that order and
    capped at 1 (``statsmodels.stats.multitest.multipletests(p, method="holm")[1]``; the unit tests compare).

    Raises:
        ValueError: a p-value outside [0, 1] or NaN (a test that gave no p-value is left out of the family, not
            passed as NaN).
    """
    bad = [p for p in pvalues if not (isinstance(p, (int, float)) and not math.isnan(p) and 0.0 <= p <= 1.0)]
    if bad:
        raise ValueError(f"p-values must be numbers in [0, 1]; got {bad[:3]} (leave a test without one out)")
    m = len(pvalues)
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(sorted(range(m), key=lambda k: pvalues[k])):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted
