"""Watching a run from its directory: stop conditions, the live progress view, and summary.json.

Launchers know nothing about role internals: everything here is read from the roles' metrics CSV files, so the
same monitor serves local subprocesses, launchpad and in-process runs.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from statistics import mean

from actorq.config import ExperimentConfig
from actorq.metrics import json_safe, read_metrics
from actorq.timers import BREAKDOWN_COMPONENTS


def _last(rows: list[dict], key: str, default=None):
    for row in reversed(rows):
        value = row.get(key)
        if value is not None:
            return value
    return default


class RunMonitor:
    """Reads ``RUN_DIR/<role>/metrics.csv`` files to decide when to stop and what to report."""

    def __init__(self, config: ExperimentConfig, run_dir: str | Path, started: float | None = None):
        self.config = config
        self.run_dir = Path(run_dir)
        self.started = started or time.time()
        self.restarts: dict[str, int] = {}

    # -- reading ---------------------------------------------------------------------------------------------
    def rows(self, role: str) -> list[dict]:
        return read_metrics(self.run_dir / role / "metrics.csv")

    def actor_rows(self) -> dict[str, list[dict]]:
        return {
            p.name: read_metrics(p / "metrics.csv")
            for p in sorted(self.run_dir.glob("actor_*"))
            if p.is_dir()
        }

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

    def actor_steps(self) -> int:
        return int(sum(_last(rows, "step", 0) or 0 for rows in self.actor_rows().values()))

    def eval_rows(self) -> list[dict]:
        return [r for r in self.rows("evaluator") if r.get("eval_return") is not None]

    # -- stopping --------------------------------------------------------------------------------------------
    def stop_reason(self) -> str | None:
        """'target', 'max_minutes', 'max_actor_steps', or None to keep going."""
        cfg = self.config
        if cfg.target_return is not None and any(
            r["eval_return"] >= cfg.target_return for r in self.eval_rows()
        ):
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
        learner = self.rows("learner")
        lines = [
            f"[{elapsed:6.0f}s] {self.config.algorithm} {self.config.env.task} | actors={self.config.actor.num_actors}"
            f" precision={self.config.actor.precision} comm_bits={self.config.comm_bits}"
        ]
        lstep = _last(learner, "step", 0) or 0
        lines.append(f"  learner  step {int(lstep):>8}  {_last(learner, 'steps_per_s', 0) or 0:7.1f} steps/s")
        q = self.rows("quantizer")
        if q:
            lines.append(
                f"  quantizer v{int(_last(q, 'version', 0) or 0):<6} bytes {int(_last(q, 'message_bytes', 0) or 0):>10}"
                f"  quantize {_last(q, 'quantize_ms', 0) or 0:6.1f} ms"
            )
        for name, rows in self.actor_rows().items():
            wstep = _last(rows, "weights_learner_step", -1)
            stale = int(lstep - wstep) if wstep is not None and wstep >= 0 else -1
            lines.append(
                f"  {name:<9} steps {int(_last(rows, 'step', 0) or 0):>8}  {_last(rows, 'steps_per_s', 0) or 0:7.1f}/s"
                f"  v{int(_last(rows, 'weights_version', -1) or -1):<5} stale {stale:>6}"
                f"  return {_fmt(_last(rows, 'episode_return'))}"
            )
        ev = self.eval_rows()
        if ev:
            best = max(r["eval_return"] for r in ev)
            lines.append(
                f"  eval     return {ev[-1]['eval_return']:8.1f} (best {best:8.1f}) at actor steps "
                f"{int(ev[-1].get('actor_steps') or 0)}"
            )
        return "\n".join(lines)

    # -- the summary ---------------------------------------------------------------------------------------
    def summary(self, exit_reason: str, wall_seconds: float | None = None, extra: dict | None = None) -> dict:
        wall = wall_seconds if wall_seconds is not None else time.time() - self.started
        actors = self.actor_rows()
        ev = self.eval_rows()
        steps = self.actor_steps()
        target = self.config.target_return
        to_target = None
        if target is not None:
            hits = [r for r in ev if r["eval_return"] >= target]
            if hits:
                to_target = float(hits[0]["time"]) - self.started
        breakdown = {}
        for comp in BREAKDOWN_COMPONENTS:
            per_actor = [
                (_last(rows, f"{comp}_s", 0) or 0) / max(_last(rows, "step", 0) or 0, 1)
                for rows in actors.values()
                if rows
            ]
            breakdown[comp] = mean(per_actor) if per_actor else 0.0
        learner = self.rows("learner")
        quantizer = self.rows("quantizer")
        summary = {
            "algorithm": self.config.algorithm,
            "task": f"{self.config.env.suite}:{self.config.env.task}",
            "precision": self.config.actor.precision,
            "comm_bits": self.config.comm_bits,
            "actors": self.config.actor.num_actors,
            "policy_layers": list(self.config.network.policy_layers),
            "seed": self.config.seed,
            "wall_seconds": round(wall, 2),
            "actor_steps": steps,
            "learner_steps": int(_last(learner, "step", 0) or 0),
            "best_eval_return": max((r["eval_return"] for r in ev), default=None),
            "final_eval_return": ev[-1]["eval_return"] if ev else None,
            "evaluations": len(ev),
            "target_return": target,
            "seconds_to_target": None if to_target is None else round(to_target, 2),
            "actor_steps_per_second": round(steps / wall, 2) if wall > 0 else 0.0,
            "min_broadcasts_received": int(
                min((_last(r, "broadcasts_received", 0) or 0 for r in actors.values()), default=0)
            ),
            "rejected_messages": int(sum(_last(r, "rejected_messages", 0) or 0 for r in actors.values())),
            "message_bytes": int(_last(quantizer, "message_bytes", 0) or 0),
            "breakdown": breakdown,
            **self.kernel_summary(),
            "restarts": dict(self.restarts),
            "exit": exit_reason,
        }
        summary.update(extra or {})
        return json_safe(summary)

    def write_summary(
        self, exit_reason: str, wall_seconds: float | None = None, extra: dict | None = None
    ) -> dict:
        summary = self.summary(exit_reason, wall_seconds, extra)
        (self.run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
        return summary


def _fmt(value) -> str:
    return "     -" if value is None else f"{value:8.1f}"


def format_summary(summary: dict) -> str:
    """The end-of-run summary as aligned ``key: value`` lines."""
    width = max(len(k) for k in summary)
    lines = []
    for key, value in summary.items():
        if isinstance(value, dict):
            value = ", ".join(
                f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in value.items()
            )
        lines.append(f"{key:<{width}} : {value}")
    return "\n".join(lines)
