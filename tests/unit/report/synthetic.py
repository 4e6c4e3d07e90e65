"""Synthetic run directories laid out exactly as ``actorq train`` writes them (summary.json, config.yaml,
``<role>/metrics.csv``), with known curves, so report numbers can be checked against hand-computed values."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import yaml

from actorq.metrics import MetricsWriter

START = 1_700_000_000.0
EVAL_PERIOD = 10.0
BYTES = {"fp32": 34_000_000, "fp16": 17_000_000, "int8": 8_600_000}
BITS = {"fp32": 32, "fp16": 16, "int8": 8}
MIN_SIZE = 100
ERROR_BUFFER = 800.0


def limit_high(spi: float) -> float:
    """The limiter's upper bound on ``spi * inserts - samples``; actors insert only below it."""
    return spi * MIN_SIZE + ERROR_BUFFER


def ramp_returns(
    n: int, t_full: float, peak: float = 1000.0, noise: float = 10.0, seed: int = 0
) -> np.ndarray:
    """Evaluations at t = 10, 20, ...: a linear ramp to ``peak`` at ``t_full`` then a plateau, plus +-noise."""
    t = EVAL_PERIOD * np.arange(1, n + 1)
    rng = np.random.default_rng(seed)
    return np.minimum(t / t_full, 1.0) * peak + rng.uniform(-noise, noise, n)


def _write(directory: Path, rows: list[dict]) -> None:
    writer = MetricsWriter(directory, tensorboard=False)
    for row in rows:
        writer.write(row)
    writer.close()


def make_run(
    root: Path,
    precision: str,
    seed: int,
    returns: np.ndarray,
    steps_per_s: float = 100.0,
    exit_reason: str = "max_minutes",
    adder_wait: float = 0.0,
    learner_rate: float = 4.0,
    spi: float = 16.0,
    batch: int = 256,
    label: str | None = None,
    cpu_per_s: float = 1.8,
    untrained_evals: int = 0,
    max_actor_steps: int | None = None,
    actor_cpu_per_step: float | None = None,
    config_extra: dict | None = None,
    hardware: dict | None = None,
) -> Path:
    """One finished run: ``len(returns)`` evaluations every 10 s, one actor at ``steps_per_s``.

    The actor's per-step cost is 1/steps_per_s: inference 40%, env 30%, adder 10% + ``adder_wait`` s/step of
    rate-limiter wait from the 3rd metrics row on (the first rows are unthrottled), pull/decode/apply the rest.
    The first ``untrained_evals`` evaluations are made at learner step 0 (before the learner's first update).
    ``actor_cpu_per_step``: the actor also records its CPU seconds (``cpu_s``: 2 s of start-up + this per step).
    ``config_extra``: config sections merged over the defaults (section by section); ``hardware``: the summary's
    ``hardware`` record (the CPU the run ran on).
    The replay server's snapshots agree with the wait: with ``adder_wait`` the limiter sits at the actors' bound
    (the actors blocked, the learner never starved), without it at the learner's (the learner starved).
    """
    path = root / f"{label or precision}-s{seed}"
    path.mkdir(parents=True)
    n = len(returns)
    wall = EVAL_PERIOD * n + 5.0
    step_cost = 1.0 / steps_per_s
    times = EVAL_PERIOD * np.arange(1, n + 1)
    actor_steps = times * steps_per_s
    _write(
        path / "evaluator",
        [
            {
                "step": 0 if i < untrained_evals else int(t * learner_rate),
                "elapsed": t - 3,
                "actor_steps": s,
                "eval_return": r,
                "time": START + t,
            }
            for i, (t, s, r) in enumerate(zip(times, actor_steps, returns, strict=True))
        ],
    )
    rows, adder_total, step = [], 0.0, 0
    for i, t in enumerate(np.arange(5.0, wall + 1e-9, 5.0)):
        new = int(5.0 * steps_per_s)
        wait = adder_wait if i >= 2 else 0.0
        adder_total += new * (0.1 * step_cost + wait)
        step += new
        rows.append(
            {
                "step": step,
                "elapsed": t,
                "steps_per_s": steps_per_s,
                "weights_version": i,
                "weights_learner_step": max(0, int((t - 10) * learner_rate)),
                "broadcasts_received": i + 1,
                "inference_s": step * 0.4 * step_cost,
                "env_s": step * 0.3 * step_cost,
                "pull_s": step * 0.1 * step_cost,
                "decode_s": step * 0.05 * step_cost,
                "apply_s": step * 0.05 * step_cost,
                "adder_s": adder_total,
                "time": START + t,
            }
        )
        if actor_cpu_per_step is not None:
            rows[-1]["cpu_s"] = 2.0 + step * actor_cpu_per_step
    _write(path / "actor_0", rows)
    _write(
        path / "learner",
        [
            {"step": int(t * learner_rate), "elapsed": t, "steps_per_s": learner_rate, "time": START + t}
            for t in np.arange(5.0, wall + 1e-9, 5.0)
        ],
    )
    _write(
        path / "replay",
        [{"step": 0, "elapsed": 1.0, "inserts": 0, "samples": 0, "time": START + 1.0}]
        + [
            {
                "step": int(t * steps_per_s),
                "elapsed": t,
                "inserts": int(t * steps_per_s),
                "samples": int(t * steps_per_s * spi - (limit_high(spi) - 1 if adder_wait else 0)),
                "time": START + t,
            }
            for t in np.arange(6.0, wall + 1e-9, 5.0)
        ],
    )
    _write(
        path / "quantizer", [{"step": 0, "version": 1, "message_bytes": BYTES[precision], "time": START + 2}]
    )
    _write(
        path / "energy",
        [
            {"step": i, "elapsed": t, "cpu_seconds": cpu_per_s * t, "time": START + t}
            for i, t in enumerate(times)
        ],
    )
    config = {
        "algorithm": "d4pg",
        "env": {"suite": "dmc", "task": "cartpole:balance"},
        "replay": {"samples_per_insert": spi, "min_size": MIN_SIZE, "error_buffer": ERROR_BUFFER},
        "learner": {"batch_size": batch},
        "actor": {"precision": precision, "num_actors": 1},
        "seed": seed,
        "max_actor_steps": max_actor_steps,
    }
    for section, values in (config_extra or {}).items():
        config[section] = {**config.get(section, {}), **values} if isinstance(values, dict) else values
    (path / "config.yaml").write_text(yaml.safe_dump(config))
    summary = {
        "algorithm": "d4pg",
        "task": "dmc:cartpole:balance",
        "precision": precision,
        "comm_bits": BITS[precision],
        "actors": 1,
        "seed": seed,
        "wall_seconds": wall,
        "actor_steps": int(wall * steps_per_s),
        "learner_steps": int(wall * learner_rate),
        "message_bytes": BYTES[precision],
        "exit": exit_reason,
        "energy": {
            "started_at": START,
            "cpu_seconds": cpu_per_s * wall,
            "hardware_counters": False,
            "codecarbon": {"status": "unavailable", "reason": "test"},
        },
    }
    if label:
        summary["label"] = label
    if hardware is not None:
        summary["hardware"] = hardware
    (path / "summary.json").write_text(json.dumps(summary))
    return path


def edit_evaluator_rows(path: Path, edit: Callable[[int, dict], None]) -> None:
    """Rewrite a run's ``evaluator/metrics.csv`` in place: ``edit(i, row)`` changes row ``i`` (a dict of its
    columns; new keys become new columns), as an evaluator with other settings would have written it."""
    metrics = path / "evaluator" / "metrics.csv"
    with metrics.open() as fh:
        rows = list(csv.DictReader(fh))
    for i, row in enumerate(rows):
        edit(i, row)
    with metrics.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
