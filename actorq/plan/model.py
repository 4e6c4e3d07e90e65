"""``actorq plan``'s predictions from its measurements: no processes, no timing, only the regime model.

Each :class:`Measurement` is one *split* of the machine's cores (the learner's and the actors') at one actor
precision and number of environments per actor: the actors' env steps/s **S_p** while the learner ran beside them,
and the learner's samples/s **C** while those actors ran beside it (or a learner rate given by the user, e.g. a GPU
learner measured elsewhere). For every samples-per-insert ratio ``spi`` the delivered env steps/s and the regime come
from :mod:`actorq.plan.regime` (the one definition of ``min(S_p, C / spi)``); the predicted time-to-reward
speed-up of a precision is its delivered rate over fp32's at the same split, environments and spi (reward per env
step assumed not to depend on the actors' precision, which the report tests).

:func:`recommend` names the setting where quantized actors gain most (at the spi nearest the config's that gets
within :data:`NEAR_BEST` of the largest gain), the fastest setting of each precision at that spi ("best against
best"), and, when no quantized precision gains :data:`HELPS`, why not.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from actorq.plan.regime import (
    ACTOR_BOUND,
    LEARNER_BOUND,
    delivered_rate,
    predicted_label,
    predicted_speedup,
)

BASE = "fp32"
"""The precision every speed-up is relative to."""
HELPS = 1.1
"""A precision "helps" when its predicted speed-up over fp32 is at least this."""
NEAR_BEST = 0.95
"""The recommended spi is the one nearest the config's whose gain is at least this share of the largest gain."""
SIDE_NOTE = 0.1
"""Say so when the evaluator and the quantizer together take at least this share of the learner's cores."""
ENV_DOMINATES = 0.3
"""Inference below this share of an fp32 actor step: the env step (and the rest of the loop) dominates."""
DEFAULT_SPIS = (0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
"""The samples-per-insert ratios a plan covers (the config's own is added)."""
LEARNER_ROLES = ("learner", "replay", "quantizer", "evaluator")
"""Roles that go on the learner's cores (``affinity.<role>``); the actors get ``affinity.actor``."""


@dataclass(frozen=True)
class Split:
    """Which cores the learner (with replay, quantizer and evaluator) and the actors get."""

    name: str
    """How tables name it, e.g. ``learner [0] + actors [1]``."""
    learner_cpus: tuple[int, ...]
    """The learner's cores; empty with :attr:`learner_elsewhere`."""
    actor_cpus: tuple[int, ...]
    """The actors' cores (may be the learner's: a shared split)."""
    actors: int
    """Actor processes (one per actor core)."""
    learner_elsewhere: bool = False
    """The learner runs on another machine at a given rate (``--learner-steps-per-s``): no affinity to set."""

    def overrides(self) -> list[str]:
        """``affinity.*`` and ``actor.num_actors`` overrides that give a run this split."""
        out = [f"actor.num_actors={self.actors}"]
        if self.learner_elsewhere:
            return out
        out += [f"affinity.{role}={_cpus(self.learner_cpus)}" for role in LEARNER_ROLES]
        return out + [f"affinity.actor={_cpus(self.actor_cpus)}"]


def _cpus(cpus: tuple[int, ...]) -> str:
    return "[" + ",".join(str(c) for c in cpus) + "]"


def make_splits(cores: list[int], learner_counts: list[int] | None = None) -> list[Split]:
    """The splits a plan times on ``cores``: the learner on its own ``k`` cores and the actors on the rest, for each
    ``k`` in ``learner_counts`` (default 1, half and all but one), then everything sharing every core.

    Raises:
        ValueError: a count leaves no core to the actors, or is below 1.
    """
    n = len(cores)
    counts = learner_counts if learner_counts is not None else sorted({1, n // 2, n - 1} & set(range(1, n)))
    splits = []
    for k in dict.fromkeys(counts):
        if not 1 <= k < n:
            raise ValueError(f"learner cores {k}: must be 1..{n - 1} on this machine's {n} cores {cores}")
        learner, actors = tuple(cores[:k]), tuple(cores[k:])
        splits.append(
            Split(f"learner {_cpus(learner)} + actors {_cpus(actors)}", learner, actors, len(actors))
        )
    shared = tuple(cores)
    return splits + [Split(f"shared {_cpus(shared)}", shared, shared, n)]


@dataclass(frozen=True)
class Measurement:
    """One timed cell: a split, a precision and environments per actor, learner and actors beside each other."""

    split: Split
    precision: str
    envs_per_actor: int
    supply: float
    """S_p: env steps/s of all the split's actors together (no rate limiter)."""
    capacity: float
    """C: learner samples/s (steps/s x batch) beside those actors (or given)."""
    capacity_source: str
    """Where C comes from ("measured beside the actors", "given: R steps/s x batch B")."""
    kernel: str = ""
    """The actors' inference kernel (``int8/ort-s8r``)."""
    inference_ms: float | None = None
    """Actor inference per env step (ms)."""
    step_ms: float | None = None
    """An actor's whole loop per env step (ms): env, inference, writing, pulls."""
    capacity_alone: float | None = None
    """The learner's samples/s beside the actors without the evaluator and the quantizer (what the learner bench
    measures); :attr:`capacity` is what is left of it beside them. None where C was given."""
    evaluator_share: float | None = None
    """Share of the learner's cores the evaluator takes (an evaluation of full-length episodes every period)."""
    quantizer_share: float | None = None
    """Share of the learner's cores the quantizer takes at the learner's rate beside it (one message per
    ``learner.publish_period`` steps)."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Prediction:
    """The model's numbers for one measurement at one spi."""

    measurement: Measurement
    spi: float
    delivered: float
    """Predicted env steps/s, ``min(S_p, C / spi)``."""
    label: str
    """learner-bound, actor-bound, balanced or no rate limiter."""
    speedup: float | None = None
    """Predicted time-to-reward speed-up over fp32 at the same split, environments and spi."""

    @property
    def key(self) -> tuple[str, int, float]:
        """The setting apart from precision: split, environments per actor, spi."""
        return self.measurement.split.name, self.measurement.envs_per_actor, self.spi

    def overrides(self) -> list[str]:
        """Config overrides that run this setting."""
        m = self.measurement
        return [
            f"actor.precision={m.precision}",
            f"actor.envs_per_actor={m.envs_per_actor}",
            f"replay.samples_per_insert={self.spi:g}",
            *m.split.overrides(),
        ]

    def as_dict(self) -> dict[str, Any]:
        m = self.measurement
        return {
            "split": m.split.name,
            "precision": m.precision,
            "envs_per_actor": m.envs_per_actor,
            "spi": self.spi,
            "supply_env_steps_per_s": m.supply,
            "capacity_samples_per_s": m.capacity,
            "learner_env_steps_per_s": m.capacity / self.spi if self.spi > 0 else None,
            "delivered_env_steps_per_s": self.delivered,
            "regime": self.label,
            "speedup_vs_fp32": self.speedup,
            "overrides": self.overrides(),
        }


def spi_grid(config_spi: float, spis: tuple[float, ...] = DEFAULT_SPIS) -> list[float]:
    """``spis`` plus the config's own ratio (when it has a limiter), ascending."""
    extra = [config_spi] if config_spi > 0 else []
    return sorted({float(s) for s in (*spis, *extra)})


def predict(measurements: list[Measurement], spis: list[float]) -> list[Prediction]:
    """Every measurement at every spi, with its speed-up over fp32 at the same split, environments and spi."""
    raw = []
    for m in measurements:
        for spi in spis:
            delivered = delivered_rate(m.supply, m.capacity, spi)
            raw.append(Prediction(m, spi, delivered, predicted_label(m.supply, m.capacity, spi)))
    base = {p.key: p for p in raw if p.measurement.precision == BASE}
    out = []
    for p in raw:
        b = base.get(p.key)
        speedup = predicted_speedup([p.delivered], [b.delivered]) if b is not None else None
        out.append(Prediction(p.measurement, p.spi, p.delivered, p.label, speedup))
    return out


@dataclass(frozen=True)
class Recommendation:
    """What a plan names: a setting, each precision's best at its spi, and the verdict on quantized actors."""

    setting: Prediction
    """The named setting (a quantized precision where one helps, else fp32's fastest)."""
    helps: bool
    """Whether a quantized precision is predicted to gain at least :data:`HELPS` anywhere in the plan."""
    best_per_precision: dict[str, Prediction]
    """Each precision's fastest setting (split, environments) at the named setting's spi: best against best."""
    reasons: list[str] = field(default_factory=list)
    """Why quantized actors do not help (at the config's spi, or anywhere), in plain words."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "setting": self.setting.as_dict(),
            "helps": self.helps,
            "best_per_precision": {p: v.as_dict() for p, v in self.best_per_precision.items()},
            "best_against_best": {
                p: _ratio(v.delivered, self.best_per_precision.get(BASE))
                for p, v in self.best_per_precision.items()
            },
            "reasons": self.reasons,
        }


def _ratio(delivered: float, base: Prediction | None) -> float | None:
    return predicted_speedup([delivered], [base.delivered]) if base is not None else None


def _spi_distance(spi: float, config_spi: float) -> float:
    """How far ``spi`` is from the config's (log scale); with no limiter in the config, larger spi is nearer."""
    if config_spi <= 0:
        return -spi
    return abs(math.log(spi / config_spi))


def best_at(predictions: list[Prediction], precision: str, spi: float) -> Prediction | None:
    """``precision``'s fastest split and environments at ``spi`` (most delivered env steps/s)."""
    mine = [p for p in predictions if p.measurement.precision == precision and p.spi == spi]
    return max(mine, key=lambda p: p.delivered, default=None)


def recommend(predictions: list[Prediction], config_spi: float) -> Recommendation:
    """Name the setting (see the module docstring) and say why quantized actors do not help where they do not.

    Raises:
        ValueError: no fp32 predictions (nothing to compare with).
    """
    if not any(p.measurement.precision == BASE for p in predictions):
        raise ValueError("a plan needs fp32 measurements: every speed-up is relative to fp32")
    quantized = [p for p in predictions if p.measurement.precision != BASE and p.speedup is not None]
    top = max((p.speedup for p in quantized), default=1.0)
    helps = top >= HELPS
    if helps:
        near = [p for p in quantized if p.speedup >= NEAR_BEST * top]
        setting = min(near, key=lambda p: (_spi_distance(p.spi, config_spi), -p.speedup, -p.delivered))
    else:
        spi = min({p.spi for p in predictions}, key=lambda s: _spi_distance(s, config_spi))
        setting = best_at(predictions, BASE, spi)
    precisions = dict.fromkeys(p.measurement.precision for p in predictions)
    best = {q: b for q in precisions if (b := best_at(predictions, q, setting.spi)) is not None}
    reasons = explain(predictions, config_spi, at_config=helps)
    q = setting.measurement.precision
    if (
        helps
        and q in best
        and (ratio := _ratio(best[q].delivered, best.get(BASE))) is not None
        and ratio < HELPS
    ):
        reasons.append(
            f"best against best at spi {setting.spi:g}, {q} is {ratio:.2f}x fp32: the {setting.speedup:.2f}x above "
            f"is at a setting that favours {q}; fp32 at its own best ({best[BASE].measurement.split.name}, "
            f"{best[BASE].measurement.envs_per_actor} env(s)/actor) is about as fast."
        )
    return Recommendation(setting, helps, best, reasons)


def explain(predictions: list[Prediction], config_spi: float, at_config: bool = False) -> list[str]:
    """Why quantized actors do not help: per quantized precision, at its best setting (or, with ``at_config``,
    only where they do not help at the spi nearest the config's)."""
    spis = sorted({p.spi for p in predictions})
    near = min(spis, key=lambda s: _spi_distance(s, config_spi))
    reasons = []
    for q in dict.fromkeys(p.measurement.precision for p in predictions if p.measurement.precision != BASE):
        mine = [p for p in predictions if p.measurement.precision == q and p.speedup is not None]
        if at_config:
            mine = [p for p in mine if p.spi == near]
        if not mine:
            continue
        p = max(mine, key=lambda x: (x.speedup, x.delivered))
        if p.speedup >= HELPS:
            continue
        base = next(b for b in predictions if b.key == p.key and b.measurement.precision == BASE)
        reasons.append(_reason(p, base, near if at_config else None))
    return reasons


def capacity_notes(measurements: list[Measurement]) -> list[str]:
    """Where the learner's samples/s differ by :data:`HELPS` or more between precisions of one split and
    environments (in learner-bound settings that ratio *is* the predicted gain, so say where it comes from), and
    where the evaluator and the quantizer take :data:`SIDE_NOTE` or more of the learner's cores."""
    cells: dict[tuple[str, int], list[Measurement]] = {}
    for m in measurements:
        cells.setdefault((m.split.name, m.envs_per_actor), []).append(m)
    notes = []
    for (split, envs), ms in cells.items():
        low, high = min(ms, key=lambda m: m.capacity), max(ms, key=lambda m: m.capacity)
        if low.capacity > 0 and high.capacity / low.capacity >= HELPS:
            notes.append(
                f"{split}, {envs} env(s)/actor: the learner took {high.capacity:.0f} samples/s beside "
                f"{high.precision} actors but {low.capacity:.0f} beside {low.precision} ones "
                f"({high.capacity / low.capacity:.2f}x); learner-bound predictions inherit that ratio. Actors that "
                "take less CPU or memory bandwidth leave more to the learner, but on a loaded machine it may be "
                "noise: rerun with more --repeats."
            )
    for m in measurements:
        shares = (m.evaluator_share or 0.0) + (m.quantizer_share or 0.0)
        if shares >= SIDE_NOTE and m.precision == BASE:
            notes.append(
                f"{m.split.name}, {m.envs_per_actor} env(s)/actor: the evaluator ({m.evaluator_share:.0%}) and the "
                f"quantizer ({m.quantizer_share:.0%}) take {shares:.0%} of the learner's cores, so the learner gets "
                f"{m.capacity:.0f} samples/s instead of {m.capacity_alone:.0f}; a longer evaluator.period_s, fewer "
                "evaluator.episodes, a longer learner.publish_period or quantizer.poll_interval_s give it back."
            )
    return notes


def _reason(p: Prediction, base: Prediction, config_spi: float | None) -> str:
    """One plain sentence: why ``p`` (a quantized precision) is not predicted faster than fp32 (``base``)."""
    m, b = p.measurement, base.measurement
    where = f"{m.precision} ({m.split.name}, {m.envs_per_actor} env(s)/actor, spi {p.spi:g})"
    head = f"{where}: predicted {p.speedup:.2f}x fp32"
    if config_spi is not None:
        head += " at the config's spi"
    supply_ratio = m.supply / b.supply if b.supply > 0 else float("inf")
    if supply_ratio >= HELPS:  # the actors are faster, so the learner's C / spi caps both
        ceiling = b.capacity / b.supply if b.supply > 0 else float("nan")
        return (
            f"{head}. Learner-bound: the learner takes {b.capacity / p.spi:.0f} env steps/s at spi {p.spi:g} "
            f"({b.capacity:.0f} samples/s) and fp32 actors already supply {b.supply:.0f}; {m.precision} actors "
            f"({m.supply:.0f}) would only wait longer on the rate limiter. They help below spi ~{ceiling:.2g}, or "
            "with a faster learner (its own cores, a GPU)."
        )
    share = b.inference_ms / b.step_ms if b.inference_ms is not None and b.step_ms else None
    share_text = (
        f"{share:.0%} of an fp32 actor step" if share is not None else "its share of the step unknown"
    )
    if b.envs_per_actor > 1:
        return (
            f"{head}. Batched fp32 inference is already cheap: with {b.envs_per_actor} environments per forward "
            f"fp32 inference is {share_text}, so {m.precision} actors supply {m.supply:.0f} env steps/s against "
            f"fp32's {b.supply:.0f} ({supply_ratio:.2f}x)."
        )
    if share is not None and share < ENV_DOMINATES:
        return (
            f"{head}. The env step dominates: inference is {share_text}, so even free inference would give at "
            f"most {1 / (1 - share):.2f}x (Amdahl); {m.precision} actors supply {supply_ratio:.2f}x fp32's env "
            "steps/s."
        )
    return (
        f"{head}. The {m.kernel or m.precision} kernel is not faster than fp32's here: {m.precision} actors supply "
        f"{m.supply:.0f} env steps/s against fp32's {b.supply:.0f} ({supply_ratio:.2f}x)."
    )


__all__ = [
    "ACTOR_BOUND",
    "BASE",
    "DEFAULT_SPIS",
    "HELPS",
    "LEARNER_BOUND",
    "Measurement",
    "Prediction",
    "Recommendation",
    "Split",
    "best_at",
    "capacity_notes",
    "explain",
    "make_splits",
    "predict",
    "recommend",
    "spi_grid",
]


def network_sizes(config: dict[str, Any]) -> dict[str, list[int]]:
    """``{"policy_layers": [...], "critic_layers": [...], ...}``: every ``*_layers`` of a plain config (a run's
    saved config, :func:`actorq.config.to_dict`) in its ``network`` section or its algorithm's: what sets the
    learner's cost per sample besides the batch. Keyed without the section (a size that moved between sections
    still compares)."""
    sections = [config.get("network"), config.get(str(config.get("algorithm")))]
    return {
        key: [int(n) for n in value]
        for section in sections
        if isinstance(section, dict)
        for key, value in section.items()
        if key.endswith("_layers") and isinstance(value, (list, tuple))
    }
