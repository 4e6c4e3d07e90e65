"""Watching a run through its roles' status records: stop conditions, the live progress view, and summary.json.

Launchers know nothing about role internals: everything here comes from the typed records of
:mod:`actorq.status`, which the placement hands over (read from ``RUN_DIR/<label>/status.json``, or asked of a
role on another host), so the same monitor serves every placement. Metrics CSV files are for people and never read
here. Values no run can make are not trusted to stop one: an evaluation whose return is not finite or beyond
:data:`~actorq.status.RETURN_LIMIT`, an actor count at or beyond :data:`~actorq.status.COUNTER_LIMIT`.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from statistics import mean

from actorq.config import ExperimentConfig
from actorq.config.shards import actor_shard, replay_label
from actorq.durable import write_atomic
from actorq.metrics import json_safe
from actorq.status import (
    COUNTER_LIMIT,
    RETURN_LIMIT,
    RUN_DIR_FORMAT,
    ActorStatus,
    Evaluation,
    EvaluatorStatus,
    LearnerStatus,
    QuantizerStatus,
    ReplayStatus,
    RoleStatus,
)
from actorq.target import DEFAULT_WINDOW, first_crossing
from actorq.timers import BREAKDOWN_COMPONENTS

log = logging.getLogger(__name__)

REPLAY_COUNTS = ("inserts", "samples", "size", "actor_steps")
"""summary.json's ``replay`` counts, each the sum over shards of the shard's own (``per_shard``)."""

StatusReader = Callable[[str], "RoleStatus | None"]
"""Returns a role's latest status record by label (None before its first)."""
RestartReader = Callable[[], "dict[str, int]"]
"""Returns the restarts so far of each role restarted at least once, by label (the supervisor keeps them)."""


@functools.lru_cache(maxsize=1)
def code_version() -> dict | None:
    """The git commit of the checkout this ``actorq`` package runs from, and whether tracked files differ from it
    (a record read months later names the code that made it); None outside a git checkout or without git."""
    package = Path(__file__).resolve().parents[1]
    try:

        def git(*args: str) -> str:
            return subprocess.run(
                ["git", "-C", str(package), *args], capture_output=True, text=True, check=True, timeout=10
            ).stdout.strip()

        return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain", "-uno", "."))}
    except (OSError, subprocess.SubprocessError):
        return None


class RunMonitor:
    """Decides when a run stops and what it reports, from the roles' status records and the restart counts its
    owner (the supervisor) keeps; it holds no state of its own but the run's start time (:meth:`start`)."""

    def __init__(
        self,
        config: ExperimentConfig,
        run_dir: str | Path,
        read: StatusReader,
        labels: list[str],
        started: float | None = None,
        restarts: RestartReader = dict,
    ):
        self.config = config
        self.run_dir = Path(run_dir)
        self.read = read
        self.labels = list(labels)
        self.restarts = restarts
        self.started = started or time.time()

    def start(self) -> None:
        """The run's clock starts now (budgets, rates and the wall time count from here)."""
        self.started = time.time()

    # -- reading ---------------------------------------------------------------------------------------------
    def _record(self, label: str, kind: type):
        record = self.read(label)
        return record if isinstance(record, kind) else None

    def actors(self) -> dict[str, ActorStatus]:
        """Each actor's latest record, by label (actors without one yet are left out)."""
        out = {}
        for label in self.labels:
            if label.startswith("actor_"):
                record = self._record(label, ActorStatus)
                if record is not None and 0 <= record.step < COUNTER_LIMIT:
                    out[label] = record
        return out

    def replay_shards(self) -> dict[str, ReplayStatus]:
        """Each replay shard's latest record, by label (``replay``, ``replay_1``, ...; shards without one left out)."""
        labels = [replay_label(shard) for shard in range(self.config.replay.shards)]
        return {
            label: record for label in labels if (record := self._record(label, ReplayStatus)) is not None
        }

    def replay_summary(self) -> dict:
        """summary.json's ``replay``: experience inserts, samples and items held and the env steps of the actors
        writing to it, summed over the shards, and each shard's own (actor i writes to shard i % shards)."""
        shards = self.config.replay.shards
        records = self.replay_shards()
        steps = [0] * shards
        for label, actor in self.actors().items():
            steps[actor_shard(int(label.rsplit("_", 1)[1]), shards)] += actor.step
        per_shard = {}
        for shard in range(shards):
            record = records.get(replay_label(shard))
            per_shard[replay_label(shard)] = {
                "inserts": record.inserts if record else 0,
                "samples": record.samples if record else 0,
                "size": record.size if record else 0,
                "actor_steps": steps[shard],
            }
        totals = {key: sum(counts[key] for counts in per_shard.values()) for key in REPLAY_COUNTS}
        return {"shards": shards, **totals, "per_shard": per_shard}

    def learner(self) -> LearnerStatus | None:
        return self._record("learner", LearnerStatus)

    def quantizer(self) -> QuantizerStatus | None:
        return self._record("quantizer", QuantizerStatus)

    def evaluations(self) -> tuple[Evaluation, ...]:
        """The evaluator's evaluations whose returns a run can make (finite, within ``RETURN_LIMIT``)."""
        record = self._record("evaluator", EvaluatorStatus)
        if not record:
            return ()
        return tuple(
            e
            for e in record.evaluations
            if math.isfinite(e.eval_return) and abs(e.eval_return) <= RETURN_LIMIT
        )

    def target_evaluation(self) -> Evaluation | None:
        """The evaluation at which the run reached ``target_return`` (None: not yet, or no target).

        The report's rule, so that a run stopped at its target is the run the report counts as having reached it
        (:func:`actorq.target.first_crossing`): the trailing mean of ``DEFAULT_WINDOW`` evaluations made
        after the learner's first update. One lucky greedy episode of an untrained network (CartPole's can score
        500) neither stops the run nor counts."""
        target, ev = self.config.target_return, self.evaluations()
        if target is None or not ev:
            return None
        returns, steps = [e.eval_return for e in ev], [e.learner_step for e in ev]
        hit = first_crossing(returns, steps, target, DEFAULT_WINDOW)
        return None if hit is None else ev[hit]

    def kernel_records(self) -> dict[str, dict]:
        """Each actor's ``kernel.json`` (its verified kernel choice and the machine), by actor directory."""
        records = {}
        for p in sorted(self.run_dir.glob("actor_*/kernel.json")):
            try:
                records[p.parent.name] = json.loads(p.read_text())
            except (OSError, ValueError):
                continue
        return records

    def kernel_summary(self) -> dict:
        """summary.json's kernel fields: what the actors run, its measured error and time, what was rejected."""
        records = self.kernel_records()
        if not records:
            return {}
        first = next(iter(records.values()))
        out = {
            "kernel": first.get("kernel"),
            "kernel_error": first.get("error"),
            "kernel_us": first.get("time_us"),
            "rejected_kernels": {r["kernel"]: r.get("error") for r in first.get("rejected", [])},
            "hardware": first.get("hardware"),
        }
        chosen = {name: r.get("kernel") for name, r in records.items()}
        if len(set(chosen.values())) > 1:
            out["kernel_per_actor"] = chosen
        return out

    def write_failures(self) -> int:
        """Writes to the roles' disks that failed (full disk), over every role's latest record."""
        return sum(r.write_failures for label in self.labels if (r := self.read(label)) is not None)

    def actor_steps(self) -> int:
        return int(sum(record.step for record in self.actors().values()))

    def roles_cpu_seconds(self) -> float:
        """CPU seconds the roles report for their own processes (placements whose roles are not our children)."""
        total = 0.0
        for label in self.labels:
            record = self.read(label)
            if record is not None and record.cpu_s is not None:
                total += record.cpu_s
        return total

    # -- stopping --------------------------------------------------------------------------------------------
    def stop_reason(self) -> str | None:
        """'target', 'max_minutes', 'max_actor_steps', or None to keep going."""
        cfg = self.config
        if self.target_evaluation() is not None:
            return "target"
        if cfg.max_minutes and time.time() - self.started >= cfg.max_minutes * 60:
            return "max_minutes"
        if cfg.max_actor_steps and self.actor_steps() >= cfg.max_actor_steps:
            return "max_actor_steps"
        return None

    # -- the live view ---------------------------------------------------------------------------------------
    def progress(self) -> str:
        """A few lines: elapsed, learner rate, per-actor rate/version, latest evaluation."""
        elapsed = time.time() - self.started
        cfg = self.config
        lines = [
            f"[{elapsed:6.0f}s] {cfg.algorithm} {cfg.env.task} | actors={cfg.actor.num_actors}"
            f" precision={cfg.actor.precision} comm_bits={cfg.comm_bits}"
        ]
        learner = self.learner()
        lstep = learner.step if learner else 0
        rate = learner.steps_per_s if learner else 0.0
        lines.append(f"  learner  step {lstep:>8}  {rate:7.1f} steps/s")
        q = self.quantizer()
        if q:
            lines.append(
                f"  quantizer v{q.version:<6} bytes {q.message_bytes:>10}  quantize {q.quantize_ms:6.1f} ms"
            )
        for name, a in self.actors().items():
            stale = lstep - a.weights_learner_step if a.weights_learner_step >= 0 else -1
            lines.append(
                f"  {name:<9} steps {a.step:>8}  {a.steps_per_s:7.1f}/s"
                f"  v{a.weights_version:<5} stale {stale:>6}  return {_fmt(a.episode_return)}"
            )
        ev = self.evaluations()
        if ev:
            best = max(e.eval_return for e in ev)
            lines.append(
                f"  eval     return {ev[-1].eval_return:8.1f} (best {best:8.1f}) at actor steps {ev[-1].actor_steps}"
            )
        return "\n".join(lines)

    # -- the summary ---------------------------------------------------------------------------------------
    def summary(self, exit_reason: str, wall_seconds: float | None = None, extra: dict | None = None) -> dict:
        wall = wall_seconds if wall_seconds is not None else time.time() - self.started
        actors = self.actors()
        ev = self.evaluations()
        steps = self.actor_steps()
        target = self.config.target_return
        to_target = step_to_target = None
        if (hit := self.target_evaluation()) is not None:
            to_target, step_to_target = hit.time - self.started, hit.learner_step
        breakdown = {}
        for comp in BREAKDOWN_COMPONENTS:
            per_actor = [a.breakdown_s.get(comp, 0.0) / max(a.step, 1) for a in actors.values()]
            breakdown[comp] = mean(per_actor) if per_actor else 0.0
        learner, quantizer = self.learner(), self.quantizer()
        summary = {
            "run_dir_format": RUN_DIR_FORMAT,
            "algorithm": self.config.algorithm,
            "task": f"{self.config.env.suite}:{self.config.env.task}",
            "precision": self.config.actor.precision,
            "comm_bits": self.config.comm_bits,
            "actors": self.config.actor.num_actors,
            "policy_layers": list(self.config.network.policy_layers),
            "seed": self.config.seed,
            "wall_seconds": round(wall, 2),
            "actor_steps": steps,
            "learner_steps": learner.step if learner else 0,
            "best_eval_return": max((e.eval_return for e in ev), default=None),
            "final_eval_return": ev[-1].eval_return if ev else None,
            "evaluations": len(ev),
            "target_return": target,
            "seconds_to_target": None if to_target is None else round(to_target, 2),
            "learner_steps_to_target": step_to_target,
            "actor_steps_per_second": round(steps / wall, 2) if wall > 0 else 0.0,
            "min_broadcasts_received": min((a.broadcasts_received for a in actors.values()), default=0),
            "rejected_messages": sum(a.rejected_messages for a in actors.values()),
            "message_bytes": quantizer.message_bytes if quantizer else 0,
            "breakdown": breakdown,
            "replay": self.replay_summary(),
            **self.kernel_summary(),
            "restarts": dict(self.restarts()),
            "write_failures": self.write_failures(),
            "code": code_version(),
            "exit": exit_reason,
        }
        summary.update(extra or {})
        return json_safe(summary)

    def write_summary(
        self, exit_reason: str, wall_seconds: float | None = None, extra: dict | None = None
    ) -> dict:
        summary = self.summary(exit_reason, wall_seconds, extra)
        try:
            write_atomic(self.run_dir / "summary.json", json.dumps(summary, indent=2))
        except OSError as exc:  # a full disk: the run's outcome is still returned (and printed)
            log.error("could not write %s: %s", self.run_dir / "summary.json", exc)
        return summary


def _fmt(value) -> str:
    return "     -" if value is None else f"{value:8.1f}"
