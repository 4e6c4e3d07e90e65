"""``actorq bench learner``: learner steps/s and samples/s on a pre-filled replay, per learner setting.

This process starts a Reverb server with the experiment's tables but no samples-per-insert limiter (the learner
never waits for actors) and fills the experience table with real n-step transitions (uniformly random actions in
the task, through Acme's adder). Each *variant* (a set of ``learner.*`` settings, see
:mod:`actorq.measure.learner_variants`) runs in its own worker process, ``python -m actorq.measure.learner_worker``,
with its environment set before TensorFlow loads (``learner.onednn`` cannot change once it has). Workers build
the real :class:`~actorq.roles.learner.LearnerRole` (Acme learner, replay dataset, background weight publisher)
and take JSON-line commands on stdin. Blocks of ``--seconds`` interleave the variants in an order rotated each
repeat, so drift of this shared machine hits every variant alike; one variant runs at a time while the others
idle.

Per block: learner steps/s through ``LearnerRole.step()`` (sampling, update, publishing every
``publish_period`` steps, as in a run) and samples/s (steps x batch). Then a breakdown measured on its own:
dataset (``next()`` on the learner's iterator in a tight loop), update on a fixed batch (losses, gradients,
optimizer; as the variant compiles it), the online->target copy (per copy, and per step over
``target_update_period``) and publishing (variables to numpy + fp32 message encode, per publish and per step).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from actorq.bench.learner_summary import format_table, summarize
from actorq.config import ConfigError, ExperimentConfig, load_config, save_config
from actorq.measure.common import (
    close_workdir,
    config_meta,
    cpu_flags,
    interleave,
    machine_info,
    write_json,
)
from actorq.measure.learner_variants import LearnerVariant, bench_config, parse_variant
from actorq.measure.learner_worker import START_TIMEOUT_S, STOP_TIMEOUT_S, prefill, start_worker
from actorq.measure.protocol import BenchWorker

log = logging.getLogger(__name__)

ACTOR_MARGIN_S = 2.0
"""With ``--actors``: actors step this much longer than the learner, so they cover its whole measured window."""


def run_bench(
    config: ExperimentConfig,
    variants: list[LearnerVariant],
    seconds: float,
    repeats: int,
    prefill_size: int,
    breakdown_steps: int = 10,
    actors: int = 0,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run the variants' blocks interleaved; return one record per block and the prefill facts.

    With ``actors`` > 0, that many real actors (the config's precision, wire bits and pull period; one process and
    torch thread each, as in a run) step through every learner block, sharing the CPU with the learner as in a
    run; they write into their own replay, so the learner's replay stays as pre-filled.
    """
    from actorq.envs import make_environment
    from actorq.replay import make_server
    from actorq.replay.tables import environment_spec_for

    base = bench_config(config)
    env = make_environment(base.env)
    server = make_server(base, environment_spec_for(env), port=None)
    env.close()
    workdir = Path(tempfile.mkdtemp(prefix="actorq-bench-learner-"))
    workers: dict[str, BenchWorker] = {}
    records: list[dict[str, Any]] = []
    ok = False
    stack = contextlib.ExitStack()
    try:
        pool, actor_cfg = _start_actors(stack, config, actors) if actors else (None, None)
        started = time.perf_counter()
        filled = prefill(server.localhost_client(), base, prefill_size)
        fill = {"transitions": filled, "seconds": time.perf_counter() - started}
        log.info("replay pre-filled with %d transitions in %.1fs", filled, fill["seconds"])
        address = f"localhost:{server.port}"
        for i, variant in enumerate(variants):
            path = workdir / f"variant_{i}.yaml"
            save_config(bench_config(config, variant), path)
            workers[variant.name] = start_worker(i, variant.name, path, address, workdir)
        for name, worker in workers.items():  # one at a time: each traces (and maybe compiles) its step
            worker.send({"cmd": "prepare"})
            info = json.loads(worker.expect("ready", START_TIMEOUT_S))
            log.info("variant %s ready (first step %.1fs)", name, info["first_step_s"])
        order = interleave([v.name for v in variants], repeats)
        for i, (repeat, name) in enumerate(order):
            load_before = os.getloadavg()[0]
            if pool is not None:  # actors step from just before until just after the learner's stepping
                pool.start_block(actor_cfg, seconds + ACTOR_MARGIN_S, fresh=False)
            workers[name].send({"cmd": "go", "seconds": seconds, "breakdown_steps": breakdown_steps})
            record = json.loads(workers[name].expect("result", seconds * 4 + 600))
            if pool is not None:
                acted = pool.finish_block(seconds + ACTOR_MARGIN_S)
                record["actor_steps_per_s"] = float(sum(a["steps_per_s"] for a in acted))
            record.update(variant=name, repeat=repeat, block=i, load_before=load_before, actors=actors)
            record["load_after"] = os.getloadavg()[0]
            records.append(record)
            log.info("[%d/%d] %s: %.2f learner steps/s", i + 1, len(order), name, record["steps_per_s"])
        ok = True
    finally:
        for worker in workers.values():
            worker.stop(STOP_TIMEOUT_S)
        stack.close()
        server.stop()
        close_workdir(workdir, ok, "learner bench worker")
    return records, fill


def _start_actors(stack: contextlib.ExitStack, config: ExperimentConfig, n: int):
    """``n`` actor worker processes with the config's actor settings and a published policy (own replay)."""
    from actorq.measure.actors_worker import Variant, WorkerPool, bench_config, reference_state

    variant = Variant(config.actor.precision, config.comm_bits, config.actor.update_period)
    cfg = bench_config(config, variant, n)
    pool = stack.enter_context(WorkerPool(cfg, n))
    pool.publish_policy(reference_state(config), cfg)
    return pool, cfg


def _main(args: argparse.Namespace) -> int:
    config = load_config(args.config, args.overrides)
    if (
        args.seconds <= 0
        or args.repeats < 1
        or args.prefill < 1
        or args.breakdown_steps < 1
        or args.actors < 0
    ):
        raise ConfigError(
            "--seconds, --repeats, --prefill and --breakdown-steps must be positive, --actors >= 0"
        )
    variants = [parse_variant(v) for v in args.variants.split(",") if v.strip()]
    if not variants or len({v.name for v in variants}) != len(variants):
        raise ConfigError(f"--variants {args.variants!r}: name each variant once (comma-separated)")
    for v in variants:  # validate every variant's settings before any process starts
        bench_config(config, v)
    if args.prefill < config.replay.min_size:
        raise ConfigError(f"--prefill {args.prefill} is below replay.min_size={config.replay.min_size}")
    meta = {
        **config_meta(args, config),
        "batch_size": config.learner.batch_size,
        "seconds": args.seconds,
        "repeats": args.repeats,
        "actors": args.actors,
        "machine": machine_info(),
        "cpu_flags": cpu_flags(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    records, fill = run_bench(
        config, variants, args.seconds, args.repeats, args.prefill, args.breakdown_steps, args.actors
    )
    rows = summarize(records, baseline=variants[0].name)
    meta["prefill"] = fill
    sys.stdout.write(format_table(rows) + "\n")
    if args.json_path:
        write_json(args.json_path, {"kind": "learner", "meta": meta, "records": records, "summary": rows})
    return 0


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``learner`` on the ``actorq bench`` subparsers."""
    parser = subparsers.add_parser(
        "learner",
        help="learner steps/s and samples/s on a pre-filled replay, per learner setting",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("config", help="YAML config, e.g. configs/d4pg/dmc_cartpole_balance.yaml")
    parser.add_argument(
        "overrides", nargs="*", help="section.key=value overrides (e.g. learner.batch_size=128)"
    )
    parser.add_argument(
        "--variants",
        default="plain,config",
        help="comma-separated; first is the baseline. 'config' = the config's learner settings, 'plain' = "
        "TensorFlow defaults (as before), then +-joined onednn, xla, xopt, einsum, intra=N, inter=N, prefetch=N, parallel=N "
        "(default plain,config)",
    )
    parser.add_argument("--seconds", type=float, default=30.0, help="measured seconds per block (default 30)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats (default 3)")
    parser.add_argument("--prefill", type=int, default=10_000, help="transitions in replay (default 10000)")
    parser.add_argument(
        "--breakdown-steps",
        type=int,
        default=10,
        help="calls timed per breakdown part per block (default 10)",
    )
    parser.add_argument(
        "--actors",
        type=int,
        default=0,
        help="real actors stepping during every learner block (the config's precision; default 0: learner alone)",
    )
    parser.add_argument("--json", dest="json_path", metavar="PATH", help="write records and summary as JSON")
    parser.set_defaults(func=_main)
    return parser
