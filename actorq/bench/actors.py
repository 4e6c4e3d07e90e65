"""``actorq bench actors``: env steps/s of real actors at each precision, against a fixed published policy.

No learner and no quantizer process: this process starts a Reverb server with the experiment's tables but no
rate limiter (``samples_per_insert=0``; FIFO eviction, so inserts never block), encodes one weight message per
variant (the torch twin's initial weights through ``actorq.quantize.codec.encode_message`` at the variant's
precision and wire bits) and publishes it. ``--actors N`` worker processes (one torch thread each) then run the
real :class:`~actorq.roles.actor.ActorRole` step (policy, exploration noise, n-step writer into Reverb,
weight pulls every ``update_period`` env steps) for ``--seconds`` per block, all N measured over the same
window. ``--envs-per-actor 1,8`` runs every precision with each number of environments per actor process
(``actor.envs_per_actor``: one batched forward per step of all of them); rates count env steps over all of an
actor's environments, per second and per CPU second of the actor's process (its Reverb threads included). Blocks interleave variants in a rotating order with ``--repeats`` (fp32, int8, fp32, int8, ... shifted
each repeat) so drift of this shared machine hits every variant alike; the load average is recorded per block.

By default every pull is a *new broadcast* (``--fresh``): after each pull the actor forgets the version it
applied, so the next pull decodes and applies the message again, as when the learner publishes faster than
actors pull (the paper's setting). Without it, pulls after the first only fetch the message and skip it.

Workers are reused across blocks (TensorFlow/torch/dm_control imports are paid once); every block builds a
fresh ActorRole (env, policy, adder, Reverb client). Records: per block and actor; summary: per variant, the
median over repeats of the per-actor env steps/s, min-max, ratio to the fp32 variant with as many environments
(and the range of per-repeat paired ratios), ratio to the same precision with one environment (``x n1``), env
steps per CPU second, ms per env step per component (``other`` = loop time outside the timed components).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from typing import Any

import numpy as np

from actorq.bench.actors_summary import amdahl_notes, format_table, summarize
from actorq.bench.floors import batching_notes
from actorq.config import (
    AUTO_COMM_BITS,
    COMM_BITS,
    PRECISIONS,
    ConfigError,
    ExperimentConfig,
    load_config,
)
from actorq.measure.actors_worker import Variant, WorkerPool, bench_config, reference_state
from actorq.measure.common import (
    blocks_document,
    config_meta,
    cpu_line,
    interleave,
    machine_info,
    parse_list,
    write_json,
)

log = logging.getLogger(__name__)


def run_bench(
    config: ExperimentConfig,
    variants: list[Variant],
    actors: int,
    seconds: float,
    repeats: int,
    fresh: bool = True,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Run every variant ``repeats`` times (interleaved); return one record per block and actor."""
    state = reference_state(config, seed)
    records: list[dict[str, Any]] = []
    with WorkerPool(bench_config(config, variants[0], actors), actors) as pool:
        order = interleave(variants, repeats)
        for i, (repeat, variant) in enumerate(order):
            cfg = bench_config(config, variant, actors)
            message = pool.publish_policy(state, cfg)
            load_before = os.getloadavg()[0]
            results = pool.run_block(cfg, seconds, fresh)
            for r in results:
                r.update(
                    variant=variant.name,
                    precision=variant.precision,
                    comm_bits=variant.comm_bits,
                    update_period=variant.update_period,
                    envs=variant.envs,
                    repeat=repeat,
                    block=i,
                    message_bytes=int(message.nbytes),
                    load_before=load_before,
                    load_after=os.getloadavg()[0],
                )
            records += results
            rate = np.mean([r["steps_per_s"] for r in results])
            log.info(
                "[%d/%d] %s K=%d N=%d: %.1f env steps/s per actor",
                i + 1,
                len(order),
                variant.name,
                variant.update_period,
                variant.envs,
                rate,
            )
    return records


def common_meta(args: argparse.Namespace, config: ExperimentConfig) -> dict[str, Any]:
    """The JSON ``meta`` of ``actors`` and ``ablation``: the config, the block settings and the machine."""
    return {
        **config_meta(args, config),
        "actors": args.actors,
        "seconds": args.seconds,
        "repeats": args.repeats,
        "fresh": args.fresh,
        "machine": machine_info(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def _main(args: argparse.Namespace) -> int:
    config = load_config(args.config, args.overrides)
    from actorq.envs import check_task

    check_task(config)  # its spaces against the algorithm, before any process starts
    precisions = parse_list(args.precisions, PRECISIONS, "--precisions")
    if args.actors < 1 or args.seconds <= 0 or args.repeats < 1 or args.update_period < 1:
        raise ConfigError("--actors, --seconds, --repeats and --update-period must be positive")
    if args.comm_bits is not None and args.comm_bits not in COMM_BITS:
        raise ConfigError(f"--comm-bits {args.comm_bits}: choose from {', '.join(map(str, COMM_BITS))}")
    envs = parse_list(args.envs_per_actor, (), "--envs-per-actor", int)
    if min(envs) < 1:
        raise ConfigError(f"--envs-per-actor {args.envs_per_actor!r}: every value must be >= 1")
    variants = [
        Variant(p, args.comm_bits or AUTO_COMM_BITS[p], args.update_period, n)
        for n in envs
        for p in precisions
    ]
    records = run_bench(config, variants, args.actors, args.seconds, args.repeats, args.fresh)
    rows = summarize(records)
    notes = amdahl_notes(rows)
    from actorq.roles.torso import run_torso

    conv_macs = sum(run_torso(config).multiply_adds())
    notes += batching_notes(rows, reference_state(config), max(config.network.policy_layers), conv_macs)
    meta = {**common_meta(args, config), "envs_per_actor": envs}
    sys.stdout.write(format_table(rows) + "\n" + "\n".join(notes) + "\n" + cpu_line(meta["machine"]) + "\n")
    if args.json_path:
        write_json(args.json_path, blocks_document("actors", meta, records, rows, notes=notes))
    return 0


def add_common_arguments(parser: argparse.ArgumentParser, seconds: float, repeats: int) -> None:
    parser.add_argument("config", help="YAML config, e.g. configs/d4pg/dmc_cartpole_balance.yaml")
    parser.add_argument(
        "overrides", nargs="*", help="section.key=value overrides (e.g. network.policy_layers=[256,256])"
    )
    parser.add_argument("--actors", type=int, default=1, help="actor processes per block (default 1)")
    parser.add_argument(
        "--seconds", type=float, default=seconds, help=f"measured seconds per block (default {seconds:g})"
    )
    parser.add_argument(
        "--repeats", type=int, default=repeats, help=f"interleaved repeats (default {repeats})"
    )
    parser.add_argument(
        "--no-fresh",
        dest="fresh",
        action="store_false",
        help="pulls after the first skip an unchanged message (default: every pull is a new broadcast)",
    )
    parser.add_argument("--json", dest="json_path", metavar="PATH", help="write records and summary as JSON")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``actors`` on the ``actorq bench`` subparsers."""
    parser = subparsers.add_parser(
        "actors",
        help="env steps/s of real actors per precision (no learner)",
        description=__doc__.split("\n\n")[0],
    )
    add_common_arguments(parser, seconds=30.0, repeats=3)
    parser.add_argument(
        "--precisions", default="fp32,fp16,int8", help="comma-separated (default fp32,fp16,int8)"
    )
    parser.add_argument(
        "--update-period", type=int, default=1000, help="env steps between pulls (default 1000)"
    )
    parser.add_argument(
        "--comm-bits", type=int, help="wire bits for every variant (default: each precision's own)"
    )
    parser.add_argument(
        "--envs-per-actor",
        default="1",
        help="comma-separated environments per actor process, each run at every precision (default 1; e.g. 1,8)",
    )
    parser.set_defaults(func=_main)
    return parser
