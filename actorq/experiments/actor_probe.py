"""``actorq bench actor-probe RECORDS --minutes M``: what a cell's actors act with, per precision and envs per actor:
how stale their weights are, how much they explore, and how often int8 would act otherwise than fp32.

Issue 91 asks why int8 actors lost reward per env step at 8 envs per actor on the Zen 3 (Acrobot, -67.9 [-100.9,
-32.0]) and not at 1. Three candidates, each measured here:

* **Staleness**: how many learner steps behind the learner the actors' weights were while they acted, from each
  committed record's own measurement (``aggregates.staleness``: the median over the actor's metric rows of the
  learner's step at that time minus the step of the weights it held), also in weight versions (the learner publishes
  every ``learner.publish_period`` steps) and in env steps (``batch / spi`` env steps per learner step).
* **Exploration noise**: each env stream's epsilon (:func:`actorq.algorithms.dqn.exploration_epsilon`: one stream at
  ``epsilon_max`` with one env, 8 streams spread log-uniformly from ``epsilon_max`` to ``epsilon_min`` with 8), the
  streams' mean, and the share of random actions that makes (epsilon x (1 - 1/actions)).
* **Action agreement**: with ``--minutes M > 0``, one short run of the cell's own config (int8 actors, its envs per
  actor, its kernel pinned to the one the records name) with ``evaluator.evaluate_quantized`` and as many evaluation
  episodes as the actor has envs (so the quantized forward runs at the actor's batch): on the states the fp32 greedy
  episodes visit, the share where the int8 policy of the same weights picks the same action
  (:mod:`actorq.roles.agreement`); 1 - agreement is the extra exploration quantization adds. Start it alone on the
  machine (it trains).

Prints a table and writes ``--json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from actorq.algorithms.dqn import exploration_epsilon
from actorq.experiments.orchestration import PlannedRun, train_args, train_command
from actorq.report.measure import measure_run
from actorq.report.records import load_records
from actorq.report.runs import RunData, load_run

log = logging.getLogger(__name__)


def _cell(run: RunData) -> tuple[str, int]:
    return run.precision, int(run.cfg("actor", "envs_per_actor", 1))


def epsilons(config: dict[str, Any]) -> list[float]:
    """The per-stream epsilons of one actor process (its envs), as the DQN actor sets them."""
    envs = int((config.get("actor") or {}).get("envs_per_actor", 1))
    actors = int((config.get("actor") or {}).get("num_actors", 1))
    dqn = config.get("dqn") or {}
    streams = envs * actors
    return [exploration_epsilon(i, streams, dqn["epsilon_min"], dqn["epsilon_max"]) for i in range(streams)]


def from_records(runs: list[RunData], actions: int) -> list[dict[str, Any]]:
    """Per (precision, envs per actor): staleness over runs, the streams' epsilons, the kernels the actors used."""
    cells: dict[tuple[str, int], list[RunData]] = {}
    for run in runs:
        cells.setdefault(_cell(run), []).append(run)
    rows = []
    for (precision, envs), members in sorted(cells.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        lags = [float(s) for r in members if (s := (r.aggregates or {}).get("staleness")) is not None]
        cfg = members[0].config
        period = float((cfg.get("learner") or {}).get("publish_period", 1) or 1)
        batch = float((cfg.get("learner") or {}).get("batch_size", 1))
        spi = float((cfg.get("replay") or {}).get("samples_per_insert", 1))
        eps = epsilons(cfg)
        median = statistics.median(lags) if lags else None
        rows.append({
            "precision": precision, "envs_per_actor": envs, "runs": len(members),
            "staleness_learner_steps": median, "staleness_range": [min(lags), max(lags)] if lags else None,
            "staleness_versions": None if median is None else median / period,
            "staleness_env_steps": None if median is None else median * batch / spi,
            "epsilons": eps, "epsilon_mean": float(np.mean(eps)),
            "random_action_share": float(np.mean(eps)) * (1 - 1 / actions),
            "kernels": sorted({str(r.summary.get("kernel")) for r in members}),
        })  # fmt: skip
    return rows


def probe_run(record: RunData, minutes: float, out: Path) -> dict[str, Any]:
    """One short run of ``record``'s config (int8 actors, its envs per actor and kernel) with the evaluator measuring
    int8-vs-fp32 action agreement at the actor's batch; returns its figures."""
    config = dict(record.config)
    envs = int(config["actor"]["envs_per_actor"])
    kernel = str(record.summary.get("kernel") or "auto").split("/", 1)[-1]  # "int8/ort-s8r" -> "ort-s8r"
    config["actor"] = {**config["actor"], "kernel": kernel}
    config["evaluator"] = {**config["evaluator"], "evaluate_quantized": True, "episodes": envs}
    config.pop("target_return", None)  # probe for the whole budget
    out.mkdir(parents=True, exist_ok=True)
    path = out / "probe-config.yaml"
    path.write_text(yaml.safe_dump(config))
    run_dir = out / "probe-run"
    args = train_args(
        path, [], PlannedRun("int8", record.seed), run_dir, max_minutes=minutes, max_actor_steps=0
    )
    done = subprocess.run(train_command(args), check=False, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the probe run failed (status {done.returncode}): {done.stderr[-2000:]}")
    run = load_run(run_dir)
    m = measure_run(run, None, 3, "mean")
    agree = run.eval_quantized.get("quantized_agreement")
    trained = agree[(run.eval_learner_steps > 0) & np.isfinite(agree)] if agree is not None else np.array([])
    return {
        "minutes": minutes, "envs_per_actor": envs, "kernel": run.summary.get("kernel"),
        "learner_steps": run.summary.get("learner_steps"), "staleness_learner_steps": m.staleness,
        "agreement_median": float(np.median(trained)) if trained.size else None,
        "agreement_min": float(trained.min()) if trained.size else None, "evaluations": int(trained.size),
        "evaluation_returns": [float(x) for x in run.eval_return[run.eval_learner_steps > 0]],
    }  # fmt: skip


def _fmt(x: Any, digits: int = 1) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| precision | envs/actor | runs | staleness, learner steps (median [range]) | weight versions | env steps | "
        "epsilons (mean) | random actions | kernels |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        span = r["staleness_range"]
        lines.append(
            f"| {r['precision']} | {r['envs_per_actor']} | {r['runs']} | {_fmt(r['staleness_learner_steps'])} "
            f"[{_fmt(span[0]) if span else '-'}, {_fmt(span[1]) if span else '-'}] | {_fmt(r['staleness_versions'], 2)} | "
            f"{_fmt(r['staleness_env_steps'], 0)} | {r['epsilons'][0]:.3f}..{r['epsilons'][-1]:.3f} "
            f"({r['epsilon_mean']:.3f}) | {r['random_action_share']:.1%} | {', '.join(r['kernels'])} |"
        )
    return "\n".join(lines)


def _main(args: argparse.Namespace) -> int:
    runs, skipped = load_records(args.records)
    if not runs:
        sys.stderr.write(f"error: no run records under {', '.join(args.records)}\n")
        return 2
    if args.minutes < 0:
        sys.stderr.write("error: --minutes must be >= 0\n")
        return 2
    rows = from_records(runs, args.actions)
    result: dict[str, Any] = {"records": rows, "skipped": [str(p) for p, _ in skipped]}
    sys.stdout.write(table(rows) + "\n")
    if args.minutes > 0:
        chosen = [r for r in runs if _cell(r) == ("int8", args.envs)]
        if not chosen:
            sys.stderr.write(f"error: no int8 record at {args.envs} envs per actor to take the config from\n")
            return 2
        with tempfile.TemporaryDirectory(prefix="actor-probe-") as tmp:
            probe = probe_run(sorted(chosen, key=lambda r: r.seed)[0], args.minutes, Path(args.out or tmp))
        result["probe"] = probe
        sys.stdout.write(
            f"probe run ({probe['minutes']:g} min, int8, {probe['envs_per_actor']} envs, kernel {probe['kernel']}): "
            f"{probe['learner_steps']} learner steps, staleness {_fmt(probe['staleness_learner_steps'])} learner steps, "
            f"int8-vs-fp32 action agreement {_fmt(probe['agreement_median'], 3)} (median of {probe['evaluations']} "
            f"evaluations after learning began; lowest {_fmt(probe['agreement_min'], 3)})\n"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``actor-probe`` on the ``actorq bench`` subparsers."""
    parser = subparsers.add_parser(
        "actor-probe",
        help="staleness, exploration and int8-vs-fp32 action agreement of a cell's actors (records, and a short run)",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument(
        "records", nargs="+", help="records folders or files of the cell(s), e.g. .../dqn_acrobot/records"
    )
    parser.add_argument(
        "--minutes", type=float, default=0.0, help="length of the agreement run (0: records only)"
    )
    parser.add_argument(
        "--envs", type=int, default=8, help="envs per actor of the probed int8 cell (default 8)"
    )
    parser.add_argument("--actions", type=int, default=3, help="the task's discrete actions (Acrobot: 3)")
    parser.add_argument("--out", help="keep the probe run's directory here (default: a temporary one)")
    parser.add_argument("--json", help="write the figures as JSON")
    parser.set_defaults(func=_main)
    return parser
