"""Per-run measurements: from a run's rows (or its curated record) to the numbers the report says about it.

Energy estimate (used when hardware counters are missing, which is the case in most VMs): CPU seconds of every
process of the run (``summary.energy.cpu_seconds``, measured by the launcher) times :data:`WATTS_PER_CORE`, a
documented per-busy-core power figure; CO2 from that energy times the carbon intensity codecarbon used for the
run (or :data:`DEFAULT_CARBON_INTENSITY`). Idle and DRAM power are left out: on a shared machine they are not the
run's. It is labelled an estimate wherever it is printed.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from actorq.metrics import UNFINISHED_EXITS
from actorq.report import bootstrap, stats
from actorq.report.disturbance import cpu_double_counted, outside_share
from actorq.report.regime import Regime, RunRates
from actorq.report.runs import RunData
from actorq.timers import BREAKDOWN_COMPONENTS

log = logging.getLogger(__name__)

WATTS_PER_CORE = 350.0 / 60.0
"""Power of one busy core: Intel Xeon Platinum 8580 (5th gen Xeon, the family of this VM's CPU model 207),
TDP 350 W over 60 cores = 5.83 W. An estimate, not a measurement."""
DEFAULT_CARBON_INTENSITY = 0.369
"""kg CO2 per kWh when a run has no codecarbon figure: codecarbon 3.3.2's offline value for the USA."""
PROJECTION_K = (1.0, 2.0, 4.0, 10.0, math.inf)
"""Learner speed-ups the projection is shown for (inf: the actors' own limit)."""


@dataclass
class RunMetrics:
    """Everything the report says about one run."""

    run: RunData
    t_reach: float | None = None
    t_censored: float | None = None
    """Where the threshold was not reached: seconds at the run's last evaluation (its time to threshold is later)."""
    steps_reach: float | None = None
    final_return: float | None = None
    best_raw: float | None = None
    untrained_return: float | None = None
    """The initial policy's score, smoothed as the threshold is (see :func:`stats.untrained_return`)."""
    budget_steps: float | None = None
    """The run's actor-step budget (``max_actor_steps``; the paper's "steps trained" in our configs)."""
    t_budget: float | None = None
    """Wall seconds to spend that budget, when the run ended on it."""
    breakdown: dict[str, float] = field(default_factory=dict)
    """Seconds per env step per component (all actors' totals over all their steps)."""
    actor_steps: float = 0.0
    wall: float = 0.0
    acting_start: float | None = None
    """Seconds from time zero to the first experience insert."""
    actor_rate: float | None = None
    """Measured env steps/s of all actors together while acting."""
    actor_free_rate: float | None = None
    """Unthrottled env steps/s of all actors together (see ``actor_free_source``)."""
    actor_wall_rate: float | None = None
    actor_free_source: str | None = None
    """"cpu": sum over actors of steps per CPU second (each on its own core); "wall": steps over the breakdown's
    wall time minus rate-limiter waits (a lower bound when the limiter engaged in every sampling interval)."""
    wait_share: float | None = None
    learner_rate: float | None = None
    learner_insert_rate: float | None = None
    achieved_spi: float | None = None
    regime: Regime | None = None
    """Its label and the model's numbers (:mod:`actorq.report.regime`); set when the runs measured together are
    assessed (:func:`actorq.report.analysis.build_tables`), since C may come from another run."""
    staleness: float | None = None
    """Median learner steps between the learner's newest weights and those an actor acts with."""
    message_bytes: int | None = None
    comm_bits: int | None = None
    broadcasts: float | None = None
    broadcast_cost: dict[str, float] = field(default_factory=dict)
    """Seconds per received broadcast: pull, decode, apply (pull includes no-change pulls)."""
    cpu_seconds: float | None = None
    cpu_to_reach: float | None = None
    codecarbon: dict[str, Any] = field(default_factory=dict)
    best_smoothed: float | None = None
    """The run's best smoothed return (the statistic of k consecutive evaluations the threshold rule uses)."""
    cut_off: bool = False
    """A run a session's end cut off part-way that counts, censored (``exit: interrupted``; only such runs get into
    a report). Its time is censored at its last evaluation, but it has no final or best reward: those are where a
    run stopped, at its threshold or at its budget's end, and a cut-off run stopped at neither (an Acrobot fp16 run
    cut at 32% of its budget ended at -347, its last three evaluations' mean, where every finished run ended at
    -88..-95). Leaving it out is not neutral either: a cut hits long runs more often, so the runs left lean towards
    the fast ones; the report says how many runs each reward figure covers (n of N) and why."""
    learner_steps_reach: float | None = None
    """Learner steps at the evaluation that first reached the threshold."""
    evaluations_per_version: float | None = None
    """Evaluations after the learner's first update per weight version they scored
    (:func:`stats.evaluations_per_version`)."""
    reach_versions: int | None = None
    """How many distinct weight versions the k evaluations that first reached the threshold scored."""
    acting_seconds: float | None = None
    """Seconds from the first experience insert to the launcher's end."""
    learner_steps_per_s: float | None = None
    """Learner steps over the acting time (from the first experience insert to the end)."""
    role_cpu_seconds: dict[str, float] = field(default_factory=dict)
    """CPU seconds per role (replay, learner, quantizer, actors together, evaluator), from their status records."""
    learner_blocked_share: float | None = None
    """Share of the acting time the rate limiter held the learner back (see
    :func:`bootstrap.limiter_blocked_shares`)."""
    actor_blocked_share: float | None = None
    """Share of the acting time the rate limiter held the actors back."""
    outside_share: float | None = None
    """Share of the machine's CPU other processes used while the run ran (:mod:`actorq.report.disturbance`)."""
    outside_source: str | None = None
    """Where ``outside_share`` comes from: "measured" (the launcher) or "codecarbon" (older runs)."""
    cpu_miscounted: bool = False
    """The launcher counted some of the run's processes twice (:func:`disturbance.cpu_double_counted`): its CPU
    seconds, energy and outside share are dropped (None), not reported wrong."""

    @property
    def label(self) -> str:
        return self.run.label

    @property
    def seed(self) -> int:
        return self.run.seed

    def energy_kwh(self, to_reach: bool = False) -> float | None:
        """Estimated energy (kWh) of the run, or up to reaching the threshold."""
        cpu = self.cpu_to_reach if to_reach else self.cpu_seconds
        return None if cpu is None else cpu * WATTS_PER_CORE / 3.6e6

    def co2_kg(self, to_reach: bool = False) -> float | None:
        kwh = self.energy_kwh(to_reach)
        intensity = self.codecarbon.get("carbon_intensity_kg_per_kwh") or DEFAULT_CARBON_INTENSITY
        return None if kwh is None else kwh * intensity

    def projected(self, k: float, budget: bool = False) -> float | None:
        """Time to reward (or, with ``budget``, to the run's actor-step budget) with a k-times faster learner
        (:func:`stats.projected_time`); None when the run has no such step count or no throughput figures."""
        steps = self.budget_steps if budget else self.steps_reach
        if steps is None or not self.actor_free_rate or (not self.learner_insert_rate and math.isfinite(k)):
            return None
        learner = self.learner_insert_rate if self.learner_insert_rate else math.inf
        return stats.projected_time(
            steps, self.actor_free_rate, learner, k, startup_s=self.acting_start or 0.0
        )


def _last(rows: list[dict[str, Any]], key: str) -> float | None:
    for row in reversed(rows):
        if row.get(key) is not None:
            return float(row[key])
    return None


def _column(rows: list[dict[str, Any]], key: str) -> np.ndarray:
    return np.asarray([np.nan if r.get(key) is None else float(r[key]) for r in rows], dtype=np.float64)


def _actor_measurements(m: RunMetrics) -> None:
    totals = dict.fromkeys(BREAKDOWN_COMPONENTS, 0.0)
    steps = wait = 0.0
    broadcast = {"pull": [], "decode": [], "apply": []}
    received = []
    for rows in m.run.actors.values():
        if not rows:
            continue
        n = _last(rows, "step") or 0.0
        steps += n
        for comp in BREAKDOWN_COMPONENTS:
            totals[comp] += _last(rows, f"{comp}_s") or 0.0
        adder = _column(rows, "adder_s")
        if np.isfinite(adder).any():
            intrinsic = stats.intrinsic_cost_per_step(_column(rows, "step"), adder)
            wait += max(0.0, (_last(rows, "adder_s") or 0.0) - intrinsic * n)
        got = _last(rows, "broadcasts_received") or 0.0
        received.append(got)
        if got > 0:
            for comp in broadcast:
                broadcast[comp].append((_last(rows, f"{comp}_s") or 0.0) / got)
    busy = sum(totals.values())
    if steps > 0:
        m.breakdown = {comp: totals[comp] / steps for comp in BREAKDOWN_COMPONENTS}
    if busy > 0 and steps > 0:
        m.wait_share = wait / busy
        m.actor_wall_rate = len([r for r in m.run.actors.values() if r]) * steps / max(busy - wait, 1e-9)
        m.actor_free_rate, m.actor_free_source = m.actor_wall_rate, "wall"
    cpu_rates = [
        stats.cpu_rate(_column(rows, "step"), _column(rows, "cpu_s")) for rows in m.run.actors.values()
    ]
    if cpu_rates and all(r is not None for r in cpu_rates):
        # Each actor on a core of its own (the paper's setup); rate-limiter waits take no CPU.
        m.actor_free_rate = float(sum(cpu_rates))
        m.actor_free_source = "cpu"
    m.broadcasts = min(received) if received else None
    m.broadcast_cost = {k: float(np.mean(v)) for k, v in broadcast.items() if v}


def _learner_measurements(m: RunMetrics) -> None:
    rows = [r for r in m.run.learner if (r.get("step") or 0) > 0 and r.get("time") is not None]
    if len(rows) >= 2:
        dt = float(rows[-1]["time"]) - float(rows[0]["time"])
        if dt > 0:
            m.learner_rate = (float(rows[-1]["step"]) - float(rows[0]["step"])) / dt
    spi = float(m.run.cfg("replay", "samples_per_insert", 0.0))
    batch = float(m.run.cfg("learner", "batch_size", 0))
    if m.learner_rate and spi > 0 and batch > 0:
        m.learner_insert_rate = m.learner_rate * batch / spi
    inserts, samples = _last(m.run.replay, "inserts"), _last(m.run.replay, "samples")
    if inserts:
        m.achieved_spi = (samples or 0.0) / inserts


def rates(m: RunMetrics) -> RunRates:
    """What the regime model needs of a measured run."""
    hardware = m.run.summary.get("hardware") or {}
    return RunRates(
        name=m.run.name,
        group=(
            m.run.task,
            str(m.run.cfg("learner", "batch_size", 0)),
            str(hardware.get("model")),
            str(hardware.get("cores")),
        ),  # fmt: skip
        precision=m.run.precision,
        cell=",".join(f"{k}={v}" for k, v in sorted(m.run.sweep.items())),
        samples_per_insert=float(m.run.cfg("replay", "samples_per_insert", 0.0)),
        batch_size=int(m.run.cfg("learner", "batch_size", 0)),
        learner_steps_per_s=m.learner_rate,
        env_steps_per_s=m.actor_rate,
        actor_free_rate=m.actor_free_rate,
        actor_free_source=m.actor_free_source,
        learner_blocked_share=m.learner_blocked_share,
        actor_blocked_share=m.actor_blocked_share,
    )


def _staleness(m: RunMetrics) -> None:
    learner = [r for r in m.run.learner if r.get("time") is not None and r.get("step") is not None]
    if len(learner) < 2:
        return
    lt, ls = _column(learner, "time"), _column(learner, "step")
    lags = []
    for rows in m.run.actors.values():
        for r in rows:
            w, t = r.get("weights_learner_step"), r.get("time")
            if w is None or t is None or w < 0 or not lt[0] <= t <= lt[-1]:
                continue
            lags.append(max(0.0, float(np.interp(t, lt, ls)) - float(w)))
    m.staleness = float(np.median(lags)) if lags else None


AGGREGATES = (
    "acting_start",
    "breakdown",
    "wait_share",
    "actor_wall_rate",
    "actor_free_rate",
    "actor_free_source",
    "learner_rate",
    "learner_insert_rate",
    "achieved_spi",
    "staleness",
    "broadcasts",
    "broadcast_cost",
    "cpu_seconds",
    "codecarbon",
    "role_cpu_seconds",
    "learner_blocked_share",
    "actor_blocked_share",
    "outside_share",
    "outside_source",
)
"""The per-run measurements reduced from the metrics rows: what a curated record keeps instead of the rows."""


def run_aggregates(run: RunData) -> dict[str, Any]:
    """The :data:`AGGREGATES` of a run read from its directory, plus ``energy_curve`` (``[[elapsed, cpu_s]]``, for
    the CPU spent up to the threshold); JSON-ready."""
    if run.aggregates is not None:
        return run.aggregates
    m = RunMetrics(run)
    if run.replay:
        m.acting_start = stats.first_activity_time(
            _column(run.replay, "time") - run.start, _column(run.replay, "inserts")
        )
    elif run.eval_t.size:
        m.acting_start = stats.first_activity_time(run.eval_t, run.eval_steps)
    _actor_measurements(m)
    _learner_measurements(m)
    _staleness(m)
    energy = run.summary.get("energy") or {}
    m.cpu_seconds = energy.get("cpu_seconds")
    m.codecarbon = energy.get("codecarbon") or {}
    m.role_cpu_seconds = role_cpu_seconds(run)
    m.outside_share, m.outside_source = outside_share(run)
    _blocked_shares(m)
    out = {key: getattr(m, key) for key in AGGREGATES}
    curve = [
        [float(r["elapsed"]), float(r["cpu_seconds"])]
        for r in run.energy
        if r.get("elapsed") is not None and r.get("cpu_seconds") is not None
    ]
    out["energy_curve"] = curve
    return out


def role_cpu_seconds(run: RunData) -> dict[str, float]:
    """CPU seconds per role from the roles' last status records (actors summed as "actors"); empty when the
    run directory has none (in-process roles share a process and record None)."""
    from actorq.status import read_status

    out: dict[str, float] = {}
    for directory in sorted(p for p in run.path.iterdir() if p.is_dir()) if run.path.is_dir() else []:
        record = read_status(directory) if (directory / "status.json").is_file() else None
        if record is None or record.cpu_s is None:
            continue
        key = "actors" if record.role == "actor" else record.role
        out[key] = out.get(key, 0.0) + float(record.cpu_s)
    return out


def _blocked_shares(m: RunMetrics) -> None:
    """Shares of the acting time the rate limiter held the learner / the actors back (replay's snapshots)."""
    from actorq.config import ConfigError, config_from_dict, error_buffer

    rows = [r for r in m.run.replay if r.get("time") is not None]
    if m.acting_start is not None:
        rows = [r for r in rows if float(r["time"]) - m.run.start >= m.acting_start]

    def unset_dropped(data: dict[str, Any]) -> dict[str, Any]:  # None in a config.yaml means "the default"
        return {k: unset_dropped(v) if isinstance(v, dict) else v for k, v in data.items() if v is not None}

    try:
        config = config_from_dict(unset_dropped(m.run.config))
    except ConfigError as exc:  # an old or foreign config.yaml: no limiter bounds to compare with
        log.info("%s: no rate-limiter bounds (%s)", m.run.name, exc)
        return
    shares = bootstrap.limiter_blocked_shares(
        _column(rows, "inserts"),
        _column(rows, "samples"),
        config.replay.samples_per_insert,
        config.replay.min_size,
        error_buffer(config),
        config.learner.batch_size,
    )
    if shares is not None:
        m.learner_blocked_share, m.actor_blocked_share = shares


def measure_run(run: RunData, threshold: float | None, k: int, statistic: str) -> RunMetrics:
    """Per-run numbers; ``threshold`` None leaves the time-to-threshold fields empty. The same from a run directory
    and from its curated record: both go through :func:`run_aggregates`."""
    m = RunMetrics(run)
    m.wall = float(run.summary.get("wall_seconds") or 0.0)
    m.actor_steps = float(run.summary.get("actor_steps") or 0.0)
    budget = run.config.get("max_actor_steps")
    m.budget_steps = float(budget) if isinstance(budget, (int, float)) and budget > 0 else None
    if m.budget_steps and run.summary.get("exit") == "max_actor_steps":
        m.t_budget = m.wall
    m.cut_off = run.summary.get("exit") in UNFINISHED_EXITS
    if run.eval_return.size:
        m.best_raw = float(np.nanmax(run.eval_return))
        if not m.cut_off:
            m.best_smoothed = stats.best_smoothed([run.eval_return], k, statistic)
            m.final_return = float(np.mean(run.eval_return[-k:]))
        m.untrained_return = stats.untrained_return(run.eval_learner_steps, run.eval_return, k, statistic)
        m.evaluations_per_version = stats.evaluations_per_version(run.eval_learner_steps)
    if threshold is not None and run.eval_return.size:
        i = stats.first_crossing(run.eval_return, run.eval_learner_steps, threshold, k, statistic)
        if i is not None:
            m.t_reach = float(run.eval_t[i])
            m.steps_reach = float(run.eval_steps[i]) if np.isfinite(run.eval_steps[i]) else None
            m.learner_steps_reach = (
                float(run.eval_learner_steps[i]) if np.isfinite(run.eval_learner_steps[i]) else None
            )
            m.reach_versions = stats.versions_in_window(run.eval_learner_steps, i, k)
        else:
            m.t_censored = float(run.eval_t[-1])
    agg = run_aggregates(run)
    for key in AGGREGATES:
        setattr(m, key, agg.get(key))
    m.breakdown, m.broadcast_cost = m.breakdown or {}, m.broadcast_cost or {}
    m.codecarbon, m.role_cpu_seconds = m.codecarbon or {}, m.role_cpu_seconds or {}
    # The supervisor's wall_seconds starts once the roles are up; the acting time runs from time zero's clock.
    ended = (run.summary.get("energy") or {}).get("ended_at")
    end = float(ended) - run.start if isinstance(ended, (int, float)) and ended > run.start else m.wall
    acting = m.acting_seconds = end - (m.acting_start or 0.0)
    m.actor_rate = m.actor_steps / acting if acting > 0 else None
    learner_steps = float(run.summary.get("learner_steps") or 0.0)
    m.learner_steps_per_s = learner_steps / acting if acting > 0 and learner_steps else None
    m.message_bytes = run.summary.get("message_bytes")
    m.comm_bits = run.summary.get("comm_bits")
    curve = agg.get("energy_curve") or []
    if cpu_double_counted(run.summary.get("energy") or {}, curve):
        log.warning(
            "%s: its launcher counted some processes twice (%s CPU seconds in %.0f s): no CPU, energy or "
            "outside-share figure for this run",
            run.name,
            m.cpu_seconds,
            m.wall,
        )
        m.cpu_miscounted = True
        m.cpu_seconds = m.outside_share = m.outside_source = None
    elif m.t_reach is not None and curve:
        elapsed, cpu = np.asarray(curve, np.float64).T
        m.cpu_to_reach = float(np.interp(m.t_reach, elapsed, cpu))
    return m
