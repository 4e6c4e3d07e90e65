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

The speed-ups are also simulated where they are used, with an effect (:func:`effect_coverage`): per comparison, at
its own number of seeds and its fp32 runs' real censoring rate, under true speed-ups of 1, 2 and 3, the runs of a
seed correlated (log-normal times whose spread is the comparison's own log-normal fit): how often the ratio of
Kaplan-Meier medians' interval, the RMST ratio's and (``--effects --aft``, slow) the log-normal AFT ratio's hold
the truth, and how often the medians' interval is unbounded.

Percentile bootstrap intervals undercover at small n (the resamples of n values are less spread than new samples
of n), which is what the figures show; a skewed or heavy-tailed reward covers less than the normal here. The
figures in :data:`COVERAGE` were measured with ``python -m actorq.report.coverage`` (see :func:`main`); the report
prints the one for its n and says so, or that none was measured at that n.
"""

from __future__ import annotations

import argparse
import logging
import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.stats import norm

from actorq.report import bootstrap, censored, intervals

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


TRUE_RATIOS = (1.0, 2.0, 3.0)
"""The true speed-ups coverage is simulated under."""
SEED_CORRELATION = 0.5
"""Correlation of a seed's two log times in :func:`effect_coverage` (a seed's runs share its initial network and
its slot on the machine)."""
EFFECT_SIMS = 200
"""Simulations per true ratio in the report (a share from 200 is within about 3 points of the real coverage)."""
DEFAULT_SIGMA = 0.5
"""The spread of log times simulated with where a comparison has no log-normal fit."""


def true_rmst(mu: float, sigma: float, tau: float) -> float:
    """E[min(T, tau)] of a log-normal T (log mean ``mu``, spread ``sigma``)."""
    z = (math.log(tau) - mu) / sigma
    return math.exp(mu + sigma**2 / 2) * norm.cdf(z - sigma) + tau * norm.sf(z)


def budget_for(censored_share: float, ratio: float, sigma: float) -> float:
    """The budget at which log-normal times (fp32's log mean 0, the other's ``-ln ratio``, spread ``sigma``) leave
    ``censored_share`` of both groups' runs together unreached (clipped to 0.5%-95%)."""
    share = min(max(censored_share, 0.005), 0.95)

    def excess(log_tau: float) -> float:
        return (norm.sf(log_tau / sigma) + norm.sf((log_tau + math.log(ratio)) / sigma)) / 2 - share

    return math.exp(brentq(excess, -20 * sigma - 10, 20 * sigma + 10))


@dataclass(frozen=True)
class EffectCoverage:
    """Real coverage of a comparison's intervals at one true ratio."""

    ratio: float
    median: float
    """Share of the medians' ratio intervals holding the truth (an undefined one counts as holding it)."""
    median_unbounded: float
    """Share of the medians' ratio intervals with an end at 0 or infinity (or none)."""
    rmst: float
    aft: float | None
    sims: int


def effect_coverage(
    n: int,
    censored_share: float,
    ratio: float,
    sigma: float = DEFAULT_SIGMA,
    rho: float = SEED_CORRELATION,
    sims: int = EFFECT_SIMS,
    seed: int = 0,
    paired: bool = True,
    aft: bool = False,
) -> EffectCoverage:
    """Simulate ``sims`` comparisons of ``n`` seeds: fp32's log times N(0, sigma^2), the other's ``-ln ratio``
    lower, the seed's two correlated by ``rho``; both censored at the budget ``tau`` that leaves ``censored_share``
    of the two groups' runs together unreached (the comparison's own share). Intervals as the report makes them
    (paired when ``paired``)."""
    rng = np.random.default_rng(seed)
    tau = budget_for(censored_share, ratio, sigma)
    truth_rmst = true_rmst(0.0, sigma, tau) / true_rmst(-math.log(ratio), sigma, tau)
    held = {"median": 0, "unbounded": 0, "rmst": 0, "aft": 0}
    for _ in range(sims):
        shared = rng.normal(size=n) * math.sqrt(rho) if paired else np.zeros(n)
        own = math.sqrt(1 - rho) if paired else 1.0
        tb = np.exp(sigma * (shared + own * rng.normal(size=n)))
        to = np.exp(sigma * (shared + own * rng.normal(size=n)) - math.log(ratio))
        reach_b = [float(t) if t <= tau else None for t in tb]
        reach_o = [float(t) if t <= tau else None for t in to]
        at = [tau] * n
        med = bootstrap.speedup_ci(reach_b, reach_o, paired=paired, base_censored_at=at, other_censored_at=at)
        held["median"] += _holds(med, ratio)
        held["unbounded"] += censored.unbounded(med)
        b, o = censored.Times.of(reach_b, at), censored.Times.of(reach_o, at)
        held["rmst"] += _holds(censored.rmst_ratio_ci(b, o, tau, paired)[0], truth_rmst)
        if aft:
            held["aft"] += _holds(censored.aft_ratio(b, o)[0], ratio)
    return EffectCoverage(
        ratio, held["median"] / sims, held["unbounded"] / sims, held["rmst"] / sims,
        held["aft"] / sims if aft else None, sims,
    )  # fmt: skip


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
    parser.add_argument(
        "--effects", type=float, nargs="+", metavar="CENSORED_SHARE",
        help="instead: the speed-ups' coverage under true ratios 1, 2, 3 at these fp32 censoring shares",
    )  # fmt: skip
    parser.add_argument("--sigma", type=float, default=DEFAULT_SIGMA, help="--effects: spread of log times")
    parser.add_argument("--rho", type=float, default=SEED_CORRELATION, help="--effects: a seed's correlation")
    parser.add_argument("--aft", action="store_true", help="--effects: also the log-normal AFT ratio (slow)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")  # rliable logs each call at INFO
    log.setLevel(logging.INFO)
    if args.effects:
        for share in args.effects:
            for n in args.n:
                for r in TRUE_RATIOS:
                    c = effect_coverage(n, share, r, args.sigma, args.rho, args.sims, aft=args.aft)
                    log.info(
                        "n=%d censored %.2f true %gx: medians %.3f (unbounded %.3f), RMST %.3f, AFT %s (%d sims)",
                        n, share, r, c.median, c.median_unbounded, c.rmst,
                        "-" if c.aft is None else f"{c.aft:.3f}", c.sims,
                    )  # fmt: skip
        return
    for method in args.methods:
        for n in args.n:
            sims = args.sims_improvement if method == "improvement" else args.sims
            log.info('"%s": {%d: (%.3f, %d)},', method, n, simulate(method, n, sims), sims)


if __name__ == "__main__":
    main()
