"""Which side limited each run, read from the run, beside what the one regime model (:mod:`actorq.plan.regime`)
predicts for it.

The model (issue 34): the learner consumes at most **C** samples/s (its *capacity*: learner steps/s x batch when
it is never starved of experience) and the actors of precision p produce at most **S_p** env steps/s (their
*supply* when never blocked). Reverb's samples-per-insert limiter (``spi``) lets the learner consume ``spi``
samples per inserted step, so the env steps/s the run delivers are::

    delivered_p = min(S_p, C / spi)        (spi <= 0, no limiter: S_p)

and, if reward per env step does not depend on the actors' precision, the time-to-threshold speed-up of p over
fp32 is ``delivered_p / delivered_fp32``. Which term is the smaller one is the run's regime:

* **learner-bound**: ``C / spi < S_p``: the actors could go faster and wait on the limiter; quantized actors only
  wait longer.
* **actor-bound**: ``S_p < C / spi``: the learner waits for experience; faster actors shorten the run.
* **balanced**: neither side waits most of the time.

**The label** of a run is read from what happened in it, not from the model's parameters: the replay server's
snapshots of the limiter say which side it held back (:data:`BLOCKED_SHARE` of the acting time and more than the
other side). Without those snapshots the label is the model's (``label_source`` "model"). The model's own verdict
(``predicted``) is printed beside it: where the two disagree, parameters measured elsewhere did not transfer to
the run (on a machine where learner and actors share cores they take CPU from each other, so neither reaches
what it does alone).

**The parameters**, each with where it comes from:

* ``S_p``: the actors' env steps per second of their own busy time, rate-limiter waits taken out
  (``actor_free_rate`` of the run's aggregates; "cpu": steps per CPU-second summed over actors, "wall": busy
  wall time minus waits).
* ``C``: learner samples/s (learner steps/s x batch) **from a run whose learner was never starved** (blocked
  below :data:`STARVED_SHARE` of the acting time): the run itself when its learner was not starved; else the
  median of such runs of the same task, batch and machine, preferring the same precision and sweep cell. A
  starved learner's own rate is what the actors allowed, not its capacity, so it is never used as C; with no such
  run C is unknown and so is the prediction.

**Given parameters** (``actorq report --plan PLAN.json``): C, and S_p where the plan timed the run's precision,
``envs_per_actor`` and cores, measured by ``actorq plan`` on the runs' machine (:mod:`actorq.report.plan_input`
finds them and refuses a plan of another config or machine). A given parameter replaces the one from the runs for
that run, so every run of a plan's setting is predicted from the same figures as the plan's own table.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from actorq.plan.regime import (
    ACTOR_BOUND,
    BALANCED,
    LEARNER_BOUND,
    NO_LIMITER,
    UNKNOWN,
    delivered_rate,
    predicted_label,
)

__all__ = [
    "ACTOR_BOUND",
    "BALANCED",
    "LEARNER_BOUND",
    "NO_LIMITER",
    "UNKNOWN",
]  # labels read by the renderers

BLOCKED_SHARE = 0.5
"""A side the limiter held back for at least this share of the acting time (and more than the other side) sets
the label: actors held back -> learner-bound, learner held back -> actor-bound."""
STARVED_SHARE = 0.1
"""A learner held back for less than this share of the acting time counts as never starved: its samples/s are
its capacity C."""


@dataclass(frozen=True)
class RunRates:
    """What the model needs of one run (all rates measured over the acting time; None: not recorded)."""

    name: str
    """The run's name (for naming where C comes from)."""
    group: tuple[str, ...]
    """Runs whose learners are comparable share it: task, batch size and machine."""
    precision: str
    """The actors' precision ("fp32", "int8", ...)."""
    cell: str
    """The sweep cell ("" outside a sweep): C from the same cell is preferred."""
    samples_per_insert: float
    """The limiter's configured ratio (<= 0: no limiter)."""
    batch_size: int
    """Learner batch: samples per learner step."""
    learner_steps_per_s: float | None
    """Measured learner steps/s while learning."""
    env_steps_per_s: float | None
    """Measured env steps/s of all actors together while acting."""
    actor_free_rate: float | None
    """The actors' env steps/s with rate-limiter waits taken out (S_p)."""
    actor_free_source: str | None
    """How ``actor_free_rate`` was measured ("cpu" or "wall")."""
    learner_blocked_share: float | None
    """Share of the acting time the limiter held the learner back (starved)."""
    actor_blocked_share: float | None
    """Share of the acting time the limiter held the actors back."""

    @property
    def learner_samples_per_s(self) -> float | None:
        """Measured samples/s the learner consumed."""
        if self.learner_steps_per_s is None or self.batch_size <= 0:
            return None
        return self.learner_steps_per_s * self.batch_size

    @property
    def never_starved(self) -> bool:
        """Whether the learner was held back less than :data:`STARVED_SHARE` of the time (C measurable here)."""
        return self.learner_blocked_share is not None and self.learner_blocked_share < STARVED_SHARE


@dataclass(frozen=True)
class Estimate:
    """A model parameter and where it comes from."""

    value: float
    source: str
    """How and where it was measured, as the report prints it."""
    runs: tuple[str, ...] = ()
    """The runs it was measured in (empty: measured outside the runs, e.g. by ``actorq plan``)."""
    plan: str = ""
    """The plan it was measured by (``plan FILE, MACHINE``; empty: measured in the runs)."""


@dataclass(frozen=True)
class Given:
    """Model parameters for one run measured outside the runs (``actorq plan``); None: take it from the runs."""

    capacity: Estimate | None = None
    """C, learner samples/s when never starved."""
    supply: Estimate | None = None
    """S_p, the actors' env steps/s when never blocked."""


@dataclass(frozen=True)
class Regime:
    """One run's regime: its label and the numbers behind it."""

    label: str
    """learner-bound, actor-bound, balanced, no rate limiter or unknown."""
    label_source: str
    """"blocked shares" (read from the limiter's snapshots) or "model" (no snapshots: the prediction)."""
    predicted: str
    """The model's label from C and S_p (unknown where either is)."""
    capacity: Estimate | None
    """C, learner samples/s when never starved."""
    supply: Estimate | None
    """S_p, the actors' env steps/s when never blocked."""
    delivered: float | None
    """The model's env steps/s, ``min(S_p, C / spi)``."""
    rates: RunRates

    def as_dict(self) -> dict[str, object]:
        """JSON-ready: the label and the model's numbers with their sources."""

        def est(e: Estimate | None) -> dict[str, object] | None:
            return None if e is None else {"value": e.value, "source": e.source}

        return {"label": self.label, "label_source": self.label_source, "predicted": self.predicted,
                "capacity_samples_per_s": est(self.capacity), "supply_env_steps_per_s": est(self.supply),
                "delivered_env_steps_per_s": self.delivered, "agrees": self.agrees}  # fmt: skip

    @property
    def agrees(self) -> bool | None:
        """Whether the model's label is the observed one (None when either is unknown)."""
        if self.label_source != "blocked shares" or self.predicted == UNKNOWN or self.label == UNKNOWN:
            return None
        return self.predicted == self.label


def observed_label(learner_share: float | None, actor_share: float | None, samples_per_insert: float) -> str:
    """The regime from which side the limiter held back (see :data:`BLOCKED_SHARE`)."""
    if samples_per_insert <= 0:
        return NO_LIMITER
    if learner_share is None or actor_share is None:
        return UNKNOWN
    if actor_share >= BLOCKED_SHARE and actor_share > learner_share:
        return LEARNER_BOUND
    if learner_share >= BLOCKED_SHARE and learner_share > actor_share:
        return ACTOR_BOUND
    return BALANCED


def _capacity(run: RunRates, runs: Sequence[RunRates]) -> Estimate | None:
    """C for ``run`` (see the module docstring): this run, else the closest never-starved runs."""
    if run.never_starved and run.learner_samples_per_s:
        return Estimate(run.learner_samples_per_s, "this run, learner never starved", (run.name,))
    peers = [r for r in runs if r.group == run.group and r.never_starved and r.learner_samples_per_s]
    for match, where in (
        (lambda r: r.precision == run.precision and r.cell == run.cell, "same precision and cell"),
        (lambda r: r.cell == run.cell, "same cell, other precisions"),
        (lambda r: r.precision == run.precision, f"{run.precision}, other cells"),
        (lambda r: True, "other cells and precisions"),
    ):
        chosen = [r for r in peers if match(r)]
        if chosen:
            value = statistics.median(r.learner_samples_per_s for r in chosen)
            names = tuple(r.name for r in chosen)
            return Estimate(value, f"median of {len(chosen)} never-starved runs: {where}", names)
    return None


def _supply(run: RunRates) -> Estimate | None:
    if not run.actor_free_rate:
        return None
    how = {"cpu": "env steps per actor CPU-second", "wall": "busy time without limiter waits, a lower bound"}
    return Estimate(run.actor_free_rate, how.get(run.actor_free_source or "", "actors' timings"))


def assess(runs: Sequence[RunRates], given: Sequence[Given | None] | None = None) -> list[Regime]:
    """Each run's :class:`Regime`, in order, for runs measured together (C may come from one run for another).

    ``given[i]``: parameters of ``runs[i]`` measured outside the runs (see the module docstring), each used in
    place of the one the runs give.

    Raises:
        ValueError: ``given`` is not one entry per run.
    """
    if given is not None and len(given) != len(runs):
        raise ValueError(f"given: one entry per run, got {len(given)} for {len(runs)} runs")
    out = []
    for i, run in enumerate(runs):
        spi = run.samples_per_insert
        outside = given[i] if given is not None else None
        outside = outside or Given()
        capacity = None if spi <= 0 else (outside.capacity or _capacity(run, runs))
        supply = outside.supply or _supply(run)
        predicted = predicted_label(
            supply.value if supply else None, capacity.value if capacity else None, spi
        )
        delivered = None
        if supply is not None and (spi <= 0 or capacity is not None):
            delivered = delivered_rate(supply.value, capacity.value if capacity else None, spi)
        label = observed_label(run.learner_blocked_share, run.actor_blocked_share, spi)
        source = "blocked shares"
        if label == UNKNOWN:
            label, source = predicted, "model"
        out.append(Regime(label, source, predicted, capacity, supply, delivered, run))
    return out
