"""How often the report's nominal 95% intervals hold the truth at the number of seeds used, by simulation.

Each method is run as the report runs it (the same functions, the same packages) on samples drawn from a known
distribution, and the share of intervals that hold the known value is its real coverage:

* ``iqm``, ``mean`` (:func:`actorq.report.intervals.iqm_ci`, :func:`~actorq.report.intervals.mean_ci`; the mean
  also covers the paired reward differences): n draws of N(0, 1), truth 0.
* ``improvement`` (:func:`~actorq.report.intervals.improvement_ci`): two groups of n draws of N(0, 1), truth 0.5.
* ``km`` (:func:`~actorq.report.intervals.km_median`): n times from Exp(1) censored at a budget that 70% of runs
  reach, truth ln 2.
* ``relative`` (:func:`actorq.report.bootstrap.relative_loss_ci`, paired): fp32 scores N(10, 1) and, per seed,
  the quantized score 1 + N(0, 1) lower: truth E% = 10.
* ``speedup`` (:func:`actorq.report.bootstrap.speedup_ci`, paired): two groups of n such censored times, truth 1;
  an undefined interval (every resample unbounded) counts as holding it (it claims nothing).

Percentile bootstrap intervals undercover at small n (the resamples of n values are less spread than new samples
of n), which is what the figures show; a skewed or heavy-tailed reward covers less than the normal here. The
figures in :data:`COVERAGE` were measured with ``python -m actorq.report.coverage`` (see :func:`main`); the report
prints the one for its n and says so, or that none was measured at that n.
"""

from __future__ import annotations

import argparse
import logging
import math

import numpy as np

from actorq.report import bootstrap, intervals

log = logging.getLogger(__name__)

REACHED_SHARE = 0.7
"""The share of simulated runs whose time is inside the budget (the rest are censored at it)."""

COVERAGE: dict[str, dict[int, tuple[float, int]]] = {
    "iqm": {3: (0.757, 1000), 5: (0.898, 1000), 10: (0.926, 1000)},
    "mean": {3: (0.757, 1000), 5: (0.835, 1000), 10: (0.890, 1000)},
    "improvement": {3: (0.800, 200), 5: (0.900, 200), 10: (0.920, 200)},
    "km": {5: (0.952, 1000), 10: (0.940, 1000)},
    "speedup": {5: (0.964, 1000), 10: (0.964, 1000)},
    "relative": {3: (0.762, 1000), 5: (0.842, 1000), 10: (0.897, 1000)},
}
"""``{method: {n: (coverage, simulations)}}``, measured by ``python -m actorq.report.coverage --n 5 10`` (seed 0;
2026-11-26, rliable 1.2.0, lifelines 0.30.0; n=3 and ``relative`` on 2026-11-27 with ``--n 3`` / ``--n 3 5 10``;
``speedup`` again on 2026-12-02 with ``--n 5 10 --methods speedup``, when its median became the ceil(n/2)-th run:
n=10 0.971 -> 0.964, n=5 unchanged). A share from 1,000 simulations is within about 2 points of the
real coverage (95% binomial), from 200 about 4."""

METHODS = {
    "iqm": "rliable stratified percentile bootstrap of the IQM",
    "mean": "rliable stratified percentile bootstrap of the mean",
    "improvement": "rliable stratified percentile bootstrap of the probability of improvement",
    "km": "lifelines Kaplan-Meier median, exponential Greenwood band",
    "speedup": "hand-written paired percentile bootstrap of the ratio of censored medians",
    "relative": "hand-written paired percentile bootstrap of the relative loss E% of the means",
}
"""How the report names each interval's method."""
DRAWN_FROM = {
    "iqm": "normal scores",
    "mean": "normal scores",
    "improvement": "two groups of equal normal scores",
    "km": f"exponential times, {REACHED_SHARE:.0%} reached",
    "speedup": f"two groups of equal exponential times, {REACHED_SHARE:.0%} reached",
    "relative": "paired normal scores, a 10% loss",
}
"""The known distribution each method's coverage was simulated on (see the module docstring)."""


def _holds(interval: bootstrap.Interval, truth: float) -> bool:
    if interval.low is None or interval.high is None:
        return True  # no interval: no claim to be wrong
    return interval.low <= truth <= interval.high


def _censored(rng: np.random.Generator, n: int) -> tuple[list[float | None], list[float]]:
    budget = -math.log(1.0 - REACHED_SHARE)
    t = rng.exponential(1.0, n)
    return [float(v) if v <= budget else None for v in t], [budget] * n


def one(method: str, n: int, rng: np.random.Generator) -> bool:
    """Whether one simulated interval of ``method`` at ``n`` seeds holds its truth.

    Raises:
        ValueError: an unknown method.
    """
    if method == "iqm":
        return _holds(intervals.iqm_ci(list(rng.normal(size=n))), 0.0)
    if method == "mean":
        return _holds(intervals.mean_ci(list(rng.normal(size=n))), 0.0)
    if method == "improvement":
        return _holds(intervals.improvement_ci(list(rng.normal(size=n)), list(rng.normal(size=n))), 0.5)
    if method == "km":
        times, at = _censored(rng, n)
        return _holds(intervals.km_median(times, at), math.log(2.0))
    if method == "relative":
        base = rng.normal(10.0, 1.0, n)
        return _holds(bootstrap.relative_loss_ci(list(base), list(base - 1.0 + rng.normal(size=n))), 10.0)
    if method == "speedup":
        (base, base_at), (other, other_at) = _censored(rng, n), _censored(rng, n)
        ci = bootstrap.speedup_ci(
            base, other, paired=True, base_censored_at=base_at, other_censored_at=other_at
        )
        return _holds(ci, 1.0)
    raise ValueError(f"method must be one of {sorted(METHODS)}, got {method!r}")


def simulate(method: str, n: int, sims: int, seed: int = 0) -> float:
    """The share of ``sims`` simulated intervals of ``method`` at ``n`` seeds that hold the truth."""
    rng = np.random.default_rng(seed)
    return sum(one(method, n, rng) for _ in range(sims)) / sims


def note(method: str, n: int) -> str:
    """``"95% rliable stratified percentile bootstrap of the mean, n=5 seeds: real coverage 84% (simulated on
    normal scores, 1,000 draws)"``."""
    name = f"{bootstrap.LEVEL:.0%} {METHODS[method]}, n={n} seeds"
    measured = COVERAGE.get(method, {}).get(n)
    if measured is None:
        return f"{name}: real coverage not measured at this n (`python -m actorq.report.coverage`)"
    share, sims = measured
    return f"{name}: real coverage {share:.0%} (simulated on {DRAWN_FROM[method]}, {sims:,} draws)"


def main(argv: list[str] | None = None) -> None:
    """Print the coverage of each method at each n, as :data:`COVERAGE` holds it."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, nargs="+", default=[5])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=sorted(METHODS))
    parser.add_argument("--sims", type=int, default=1000, help="simulations per method and n")
    parser.add_argument("--sims-improvement", type=int, default=200, help="fewer: ~1 s each")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")  # rliable logs each call at INFO
    log.setLevel(logging.INFO)
    for method in args.methods:
        for n in args.n:
            sims = args.sims_improvement if method == "improvement" else args.sims
            log.info('"%s": {%d: (%.3f, %d)},', method, n, simulate(method, n, sims), sims)


if __name__ == "__main__":
    main()
