"""``actorq plan``'s measurements: kernels verified, then learner and actors timed beside each other per split.

For each split of the cores (:func:`actorq.plan.model.make_splits`) this process pins itself to the
learner's cores, starts a Reverb server there (pre-filled with real transitions, no rate limiter), the learner
bench's worker (:func:`actorq.measure.learner_worker.start_worker`; it inherits the learner's cores before TensorFlow
sizes its thread pools) and the actor bench's :class:`~actorq.measure.actors_worker.WorkerPool` (its server also on
the learner's cores, as a run's replay; its workers, one torch thread each, then moved to the actors' cores). Each
block then runs the actors (one precision, one number of environments per actor) and the learner at once: the
actors' env steps/s are measured while the learner steps on its cores, and the learner's samples/s while the actors
step on theirs (on a 2-core box a learner on the other core made the actors' inference 2.4-3.1x slower than alone,
issue 34). Blocks interleave precisions in a rotating order, as the other benches do. After them the evaluator's
and the quantizer's work is timed on the learner's cores beside the actors (:mod:`actorq.plan.side_loads`): in a run
they share the learner's cores, and the learner's capacity is taken beside them.

With a learner rate given (``--learner-steps-per-s``) no learner runs: the actors are timed alone, one per core.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from actorq.config import ExperimentConfig, save_config
from actorq.measure.actors_worker import Variant, WorkerPool, reference_state
from actorq.measure.actors_worker import bench_config as actor_bench_config
from actorq.measure.common import interleave
from actorq.measure.learner_variants import bench_config as learner_bench_config
from actorq.measure.learner_worker import START_TIMEOUT_S, STOP_TIMEOUT_S, prefill, start_worker
from actorq.plan.model import Measurement, Split
from actorq.plan.side_loads import SideLoadBench, SideLoads

log = logging.getLogger(__name__)

MARGIN_S = 0.5
"""The actors step this much longer than the learner: enough to cover the learner's start and its last step and
breakdown, little enough that hardly any of the actors' window runs without the learner beside them (``actorq bench
learner``'s 2 s would leave 40% of a quick plan's 5 s window without it)."""
SIDE_BLOCKS = 3
"""The side loads are timed beside one actor block this many blocks long."""
BREAKDOWN_STEPS = 1
"""The learner worker times its step's parts after each block; the plan needs none of them, so the fewest."""
SIDE_SOURCE = (
    "measured beside the actors, less the evaluator's and the quantizer's shares of the learner's cores"
)
"""How a split's C was found (the plan's JSON and tables say it)."""


@dataclass(frozen=True)
class Timing:
    """How long a plan measures: seconds per block and interleaved repeats."""

    seconds: float
    repeats: int


def policy_spec(config: ExperimentConfig):
    """The config's actor network as a :class:`actorq.actors.kernels.PolicySpec` (its task's sizes)."""
    from actorq.actors.kernels import PolicySpec
    from actorq.envs import environment_spec
    from actorq.roles.torso import run_torso

    spec_env = environment_spec(config.env)
    return PolicySpec.build(
        config.algorithm,
        spec_env.obs_dim,
        spec_env.num_actions,
        tuple(config.network.policy_layers),
        spec_env.action_low,
        spec_env.action_high,
        torso=run_torso(config, spec_env),
    )


def verify_kernels(config: ExperimentConfig, precisions: list[str], envs: list[int], budget_s: float):
    """Verify every kernel of each precision at each batch (environments per actor) for the config's policy.

    Returns:
        ``({precision: {envs: Selection.to_json()}}, {precision: why it has no kernel})``; a precision without a
        verified kernel on this CPU is left out of the plan with its reason.
    """
    from actorq.actors.kernels import KernelVerificationError, select_kernel

    spec = policy_spec(config)
    chosen: dict[str, dict[int, Any]] = {}
    failed: dict[str, str] = {}
    for precision in precisions:
        for n in envs:
            try:
                _, selection = select_kernel(spec, precision, batch=n, use_cache=False, budget_s=budget_s)
            except KernelVerificationError as exc:
                failed[precision] = str(exc)
                chosen.pop(precision, None)
                break
            chosen.setdefault(precision, {})[n] = selection.to_json()  # select_kernel logs the choice
    return chosen, failed


@contextlib.contextmanager
def pinned(cpus: tuple[int, ...]) -> Iterator[None]:
    """This thread (and every thread or process it starts meanwhile) on ``cpus``; restored afterwards."""
    before = os.sched_getaffinity(0)
    if cpus:
        os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def pin_process(pid: int, cpus: tuple[int, ...]) -> None:
    """Move every thread of process ``pid`` to ``cpus`` (threads it starts later inherit them)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError, FileNotFoundError):
            os.sched_setaffinity(int(tid), cpus)


def _variants(config: ExperimentConfig, precisions: list[str], envs: list[int]) -> list[Variant]:
    from actorq.config import AUTO_COMM_BITS

    return [Variant(p, AUTO_COMM_BITS[p], config.actor.update_period, n) for n in envs for p in precisions]


def _actor_record(acted: list[dict[str, Any]]) -> dict[str, Any]:
    """The block's actors together: env steps/s summed, per-step inference and loop time (ms), kernel."""
    steps = max(sum(a["steps"] for a in acted), 1)
    return {
        "supply": float(sum(a["steps_per_s"] for a in acted)),
        "inference_ms": 1e3 * sum(a["components"].get("inference", 0.0) for a in acted) / steps,
        "step_ms": 1e3 * sum(a["seconds"] for a in acted) / steps,
        "kernel": acted[0].get("kernel", ""),
    }


def time_split(
    config: ExperimentConfig,
    split: Split,
    precisions: list[str],
    envs: list[int],
    timing: Timing,
    prefill_size: int,
    eval_steps: int,
) -> tuple[list[dict[str, Any]], SideLoads]:
    """Learner and actors beside each other on ``split``'s cores: one record per block (see the module docstring),
    then the evaluator's and the quantizer's work on the learner's cores beside the actors (evaluations taken to
    last ``eval_steps``)."""
    from actorq.envs import make_environment
    from actorq.replay import make_server
    from actorq.replay.tables import environment_spec_for

    variants = _variants(config, precisions, envs)
    records: list[dict[str, Any]] = []
    workdir = Path(tempfile.mkdtemp(prefix="actorq-plan-"))
    stack = contextlib.ExitStack()
    ok = False
    try:
        stack.enter_context(pinned(split.learner_cpus))
        base = learner_bench_config(config)
        env = make_environment(base.env)
        server = make_server(base, environment_spec_for(env), port=None)
        env.close()
        stack.callback(server.stop)
        filled = prefill(server.localhost_client(), base, prefill_size)
        log.info("%s: replay pre-filled with %d transitions", split.name, filled)
        path = workdir / "learner.yaml"
        save_config(base, path)
        learner = start_worker(0, "plan", path, f"localhost:{server.port}", workdir)
        stack.callback(learner.stop, STOP_TIMEOUT_S)
        pool = stack.enter_context(
            WorkerPool(actor_bench_config(config, variants[0], split.actors), split.actors)
        )
        for worker in pool.workers:
            pin_process(worker.proc.pid, split.actor_cpus)
        learner.send({"cmd": "prepare"})
        json.loads(learner.expect("ready", START_TIMEOUT_S))
        # Built before any block (its kernel verified and timed) and timed after them; its messages go to the
        # learner's server, whose policy table no actor reads.
        side_bench = stack.enter_context(
            SideLoadBench(config, precisions, server.localhost_client(), pool.key, eval_steps)
        )
        state = reference_state(config)
        order = interleave(variants, timing.repeats)
        for i, (repeat, variant) in enumerate(order):
            cfg = actor_bench_config(config, variant, split.actors)
            pool.publish_policy(state, cfg)  # signed, at the block's precision and wire bits
            pool.start_block(cfg, timing.seconds + MARGIN_S, fresh=False)
            learner.send({"cmd": "go", "seconds": timing.seconds, "breakdown_steps": BREAKDOWN_STEPS})
            learned = json.loads(learner.expect("result", timing.seconds * 4 + 600))
            record = _actor_record(pool.finish_block(timing.seconds + MARGIN_S))
            record.update(
                split=split.name, precision=variant.precision, envs=variant.envs, repeat=repeat,
                capacity=float(learned["samples_per_s"]), learner_steps_per_s=float(learned["steps_per_s"]),
                load=os.getloadavg()[0],
            )  # fmt: skip
            records.append(record)
            log.info(
                "[%s %d/%d] %s n%d: actors %.0f env steps/s, learner %.2f steps/s",
                split.name, i + 1, len(order), variant.precision, variant.envs, record["supply"],
                record["learner_steps_per_s"],
            )  # fmt: skip
        # The side loads beside actors stepping (the first variant's) and the learner idle: the learner's share
        # of its cores is what they take (SideLoads.capacity). The quantizer's passes take a few seconds with a
        # 3x2048 policy; the evaluator's steps fill the rest of the window.
        window = SIDE_BLOCKS * timing.seconds
        poll = side_bench.idle_poll()  # while the actors' server is idle: it is in this process too
        first = actor_bench_config(config, variants[0], split.actors)
        pool.publish_policy(state, first)
        pool.start_block(first, window + MARGIN_S, fresh=False)
        side = side_bench.measure(len(split.learner_cpus), until=time.monotonic() + window, poll_cpu_s=poll)
        pool.finish_block(window + MARGIN_S)
        log.info(
            "%s: evaluator %.2f ms CPU per step (%d steps every %gs: %.0f%% of a core); quantizer %s, idle polls "
            "%.2f ms (%.0f%% of a core)",
            split.name, 1e3 * side.eval_step_cpu_s, side.eval_steps, side.eval_period_s, 100 * side.evaluator_cores,
            ", ".join(f"{p} {1e3 * t:.0f} ms" for p, t in side.publish_cpu_s.items()), 1e3 * side.poll_cpu_s,
            100 * side.poll_cores,
        )  # fmt: skip
        ok = True
    finally:
        stack.close()
        if ok:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            log.warning("plan worker logs kept in %s", workdir)
    return records, side


def time_actors_alone(
    config: ExperimentConfig, cores: list[int], precisions: list[str], envs: list[int], timing: Timing
) -> list[dict[str, Any]]:
    """The actors alone, one per core of ``cores`` (the learner runs elsewhere): one record per block."""
    variants = _variants(config, precisions, envs)
    records = []
    with WorkerPool(actor_bench_config(config, variants[0], len(cores)), len(cores)) as pool:
        for worker, cpu in zip(pool.workers, cores, strict=True):
            pin_process(worker.proc.pid, (cpu,))
        state = reference_state(config)
        for repeat, variant in interleave(variants, timing.repeats):
            cfg = actor_bench_config(config, variant, len(cores))
            pool.publish_policy(state, cfg)  # signed, at the block's precision and wire bits
            record = _actor_record(pool.run_block(cfg, timing.seconds, fresh=False))
            record.update(
                precision=variant.precision, envs=variant.envs, repeat=repeat, load=os.getloadavg()[0]
            )
            records.append(record)
    return records


def measurements(
    records: list[dict[str, Any]], splits: dict[str, Split], side: dict[str, SideLoads], batch: int
) -> list[Measurement]:
    """Median over repeats per (split, precision, environments) of records from :func:`time_split`, the learner's
    capacity taken beside the split's side loads (``side``, by split name)."""
    cells: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for r in records:
        cells.setdefault((r["split"], r["precision"], r["envs"]), []).append(r)
    out = []
    for (split, precision, n), rs in cells.items():
        alone = float(np.median([r["capacity"] for r in rs]))
        capacity, evaluator, quantizer = side[split].capacity(alone, precision, batch)
        out.append(
            Measurement(
                splits[split],
                precision,
                n,
                supply=float(np.median([r["supply"] for r in rs])),
                capacity=capacity,
                capacity_source=SIDE_SOURCE,
                kernel=rs[0]["kernel"],
                inference_ms=float(np.median([r["inference_ms"] for r in rs])),
                step_ms=float(np.median([r["step_ms"] for r in rs])),
                capacity_alone=alone,
                evaluator_share=evaluator,
                quantizer_share=quantizer,
            )  # fmt: skip
        )
    return out


def given_learner_measurements(
    records: list[dict[str, Any]], cores: int, actor_cores: int, learner_steps_per_s: float, batch: int
) -> list[Measurement]:
    """Records of :func:`time_actors_alone` on ``cores`` cores scaled to ``actor_cores`` actor cores beside a learner
    at ``learner_steps_per_s`` (C = rate x batch)."""
    split = Split(
        f"learner elsewhere ({learner_steps_per_s:g} steps/s) + {actor_cores} actor cores",
        (), tuple(range(actor_cores)), actor_cores, learner_elsewhere=True,
    )  # fmt: skip
    cells: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in records:
        cells.setdefault((r["precision"], r["envs"]), []).append(r)
    return [
        Measurement(
            split,
            precision,
            n,
            supply=float(np.median([r["supply"] for r in rs])) / cores * actor_cores,
            capacity=learner_steps_per_s * batch,
            capacity_source=f"given: {learner_steps_per_s:g} steps/s x batch {batch}",
            kernel=rs[0]["kernel"],
            inference_ms=float(np.median([r["inference_ms"] for r in rs])),
            step_ms=float(np.median([r["step_ms"] for r in rs])),
        )  # fmt: skip
        for (precision, n), rs in cells.items()
    ]
