"""``actorq bench replay``: inserts/s and samples/s one Reverb replay server sustains, and its CPU per item.

This process is the replay server and nothing else while a block runs: it starts Reverb with the experiment's
tables (the config's table: its size, FIFO eviction, prioritized or uniform sampler, the transition signature of
the task's observation and action spec) but the samples-per-insert limiter disabled (``MinSize(min_size)``), so
neither side waits for the other and each goes as fast as it can. Its process CPU seconds over a block are the
server's. ``K`` writer processes (``--writers 1,2,4,8``) each run the actors' experience path
(:func:`actorq.replay.experience.make_adders`: n-step adder, ``StructuredWriter`` in bursts) on recorded real
timesteps of the task with no env or policy time; optionally one sampler process runs the learner's dataset
(Acme's Reverb dataset at the config's batch size, prefetch and parallelism) as fast as it can. Every block
starts all its processes at one wall-clock time, runs ``--seconds`` and ends when every writer has flushed.

Counts are the server's (the rate limiter's completed inserts and samples) and the clients' (items written and
confirmed, items of the batches taken); the inserts must agree exactly. Blocks (K writers with and without the
sampler, and the sampler alone) interleave in an order rotated each repeat; the load average and the fraction of
all cores busy are recorded per block. From the server's CPU seconds per 1000 inserts and per 1000 sampled items
the notes project what one server core takes where the writers run elsewhere (on a 2-core machine the writers
themselves use the cores the server would need).
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

import numpy as np

from actorq.bench.replay_summary import format_table, notes, projection, summarize
from actorq.bench.replay_worker import SETTLE_S, SETTLE_TIMEOUT_S, start_worker
from actorq.config import ConfigError, ExperimentConfig, load_config, replace, save_config
from actorq.measure.common import (
    START_DELAY_S,
    START_TIMEOUT_S,
    blocks_document,
    close_workdir,
    config_meta,
    cpu_line,
    interleave,
    machine_info,
    parse_list,
    wait_until,
    write_json,
)
from actorq.measure.protocol import BenchWorker

log = logging.getLogger(__name__)

FILL_BATCHES = 20
"""The table is filled with at least this many of the learner's batches (and ``replay.min_size``) first."""


def bench_config(config: ExperimentConfig) -> ExperimentConfig:
    """The experiment's config with the samples-per-insert limiter off (``MinSize``) and no checkpoints."""
    return replace(config, **{"replay.samples_per_insert": 0.0, "learner.checkpoint_period_s": 0.0})


def block_kinds(writers: list[int], sampler: str) -> list[tuple[int, bool]]:
    """(writers, sampler on) per kind of block: each K without and/or with the sampler, then the sampler alone."""
    kinds = [(k, s) for k in writers for s in ((False, True) if sampler == "both" else (sampler == "on",))]
    if sampler != "off":
        kinds.append((0, True))
    return kinds


def _cpu_busy_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of all cores from /proc/stat (zeros where it does not exist)."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def transition_bytes(environment_spec) -> int:
    """Bytes of one n-step transition's data: observation, action, reward, discount, next observation."""
    obs = (
        int(np.prod(environment_spec.observations.shape))
        * np.dtype(environment_spec.observations.dtype).itemsize
    )
    act = int(np.prod(environment_spec.actions.shape)) * np.dtype(environment_spec.actions.dtype).itemsize
    return 2 * obs + act + 2 * np.dtype(np.float32).itemsize


def run_block(server, writers: list[BenchWorker], sampler: BenchWorker | None, seconds: float) -> dict:
    """One block: the given processes start together, run ``seconds``; counts, rates and CPU of all of them."""
    from actorq.replay import experience_inserts

    client = server.localhost_client()
    inserts0, samples0 = settled_counts(client)
    load_before = os.getloadavg()[0]
    start = time.time() + START_DELAY_S
    active = writers + ([sampler] if sampler else [])
    for worker in active:
        worker.send({"cmd": "go", "start": start, "end": start + seconds})
    wait_until(start)
    cpu0, (busy0, total0) = time.process_time(), _cpu_busy_jiffies()
    results = [json_result(w, seconds) for w in active]
    window = time.time() - start
    cpu1, (busy1, total1) = time.process_time(), _cpu_busy_jiffies()
    inserts1, samples1 = experience_inserts(client)
    wr = results[: len(writers)]
    sr = results[len(writers)] if sampler else None
    inserts, samples = inserts1 - inserts0, samples1 - samples0
    writer_s = max((r["seconds"] for r in wr), default=0.0)
    server_cpu = cpu1 - cpu0
    return {
        "writers": len(writers),
        "sampler": sampler is not None,
        "window_s": window,
        "inserts_server": inserts,
        "inserts_writers": sum(r["items"] for r in wr),
        "env_steps": sum(r["env_steps"] for r in wr),
        "inserts_per_s": inserts / writer_s if writer_s > 0 else 0.0,
        "samples_server": samples,
        "samples_sampler": sr["items"] if sr else 0,
        "batches": sr["batches"] if sr else 0,
        "samples_per_s": sr["items"] / sr["seconds"] if sr else 0.0,
        "server_cpu_s": server_cpu,
        "server_cores": server_cpu / window,
        "server_cpu_s_per_1000_inserts": 1e3 * server_cpu / inserts if inserts and not sr else None,
        "server_cpu_s_per_1000_samples": 1e3 * server_cpu / samples if samples and not wr else None,
        "writer_cpu_s": sum(r["cpu_s"] for r in wr),
        "writer_cpu_s_per_1000_inserts": 1e3 * sum(r["cpu_s"] for r in wr) / inserts if inserts else None,
        "sampler_cpu_s": sr["cpu_s"] if sr else 0.0,
        "machine_busy": (busy1 - busy0) / (total1 - total0) if total1 > total0 else None,
        "per_writer": wr,
        "sampler_result": sr,
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
    }


def settled_counts(client) -> tuple[int, int]:
    """The experience table's (inserts, samples) once they stop changing: after a block with the sampler, its
    dataset refills its prefetch buffers, and those samples must not be counted in (nor cost CPU during) the next
    block."""
    from actorq.replay import experience_inserts

    counts = experience_inserts(client)
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while time.monotonic() < deadline:
        time.sleep(SETTLE_S)
        now = experience_inserts(client)
        if now == counts:
            break
        counts = now
    return counts


def json_result(worker: BenchWorker, seconds: float) -> dict[str, Any]:
    """The ``@@result`` of a worker's block (it ends ``seconds`` after the start, plus its flush)."""
    return json.loads(worker.expect("result", seconds + 120))


def run_bench(
    config: ExperimentConfig,
    writers: list[int],
    sampler: str,
    seconds: float,
    repeats: int,
    episode_steps: int,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run every kind of block ``repeats`` times (interleaved); return the block records and the table's facts."""
    from actorq.envs import make_environment
    from actorq.replay import make_server
    from actorq.replay.tables import environment_spec_for

    cfg = bench_config(config)
    env = make_environment(cfg.env)
    spec = environment_spec_for(env)
    env.close()
    workdir = Path(tempfile.mkdtemp(prefix="actorq-bench-replay-"))
    config_path = workdir / "config.yaml"
    save_config(cfg, config_path)
    server = make_server(cfg, spec, port=None)
    address = f"localhost:{server.port}"
    n_writers = max(writers)
    procs: list[BenchWorker] = []
    ok = False
    try:
        procs = [start_worker(i, address, workdir) for i in range(n_writers + (sampler != "off"))]
        for w in procs:
            w.expect("hello", START_TIMEOUT_S)
        for i, w in enumerate(procs[:n_writers]):
            prepare = {"cmd": "prepare", "role": "writer", "config": str(config_path), "seed": i}
            w.send({**prepare, "episode_steps": episode_steps})
        for w in procs[:n_writers]:
            w.expect("ready", START_TIMEOUT_S)
        fill = max(cfg.replay.min_size, FILL_BATCHES * cfg.learner.batch_size)
        procs[0].send({"cmd": "fill", "items": fill})
        procs[0].expect("filled", START_TIMEOUT_S)
        sampler_proc = procs[n_writers] if sampler != "off" else None
        if sampler_proc:
            sampler_proc.send({"cmd": "prepare", "role": "sampler", "config": str(config_path)})
            sampler_proc.expect("ready", START_TIMEOUT_S)
        kinds = block_kinds(writers, sampler)
        order = interleave(kinds, repeats)
        records = []
        for i, (repeat, (k, with_sampler)) in enumerate(order):
            record = run_block(server, procs[:k], sampler_proc if with_sampler else None, seconds)
            record.update(repeat=repeat, block=i)
            records.append(record)
            log.info(
                "[%d/%d] K=%d%s: %.0f inserts/s, %.0f samples/s, server %.2f cores",
                i + 1,
                len(order),
                k,
                " + sampler" if with_sampler else "",
                record["inserts_per_s"],
                record["samples_per_s"],
                record["server_cores"],
            )
        ok = True
    finally:
        for w in procs:
            w.stop()
        server.stop()
        close_workdir(workdir, ok, "replay bench worker")
    table = {
        "table_size": cfg.replay.max_size,
        "min_size": cfg.replay.min_size,
        "rate_limiter": f"MinSize({cfg.replay.min_size}): the config's samples_per_insert limiter disabled",
        "config_samples_per_insert": config.replay.samples_per_insert,
        "sampler": "prioritized" if cfg.replay.prioritized else "uniform",
        "remover": "fifo",
        "n_step": cfg.replay.n_step,
        "episode_steps": episode_steps,
        "transition_bytes": transition_bytes(spec),
        "observation_shape": list(spec.observations.shape),
        "action_shape": list(spec.actions.shape),
        "batch_size": cfg.learner.batch_size,
        "prefetch_size": cfg.learner.prefetch_size,
        "sample_parallelism": cfg.learner.sample_parallelism,
        "prefilled_items": fill,
    }
    return records, table


def _main(args: argparse.Namespace) -> int:
    config = load_config(args.config, args.overrides)
    writers = parse_list(args.writers, (), "--writers", int)
    if min(writers) < 1:
        raise ConfigError(
            f"--writers {args.writers!r}: every value must be >= 1 (the sampler-alone block is added)"
        )
    if args.seconds <= 0 or args.repeats < 1 or args.episode_steps < 1:
        raise ConfigError("--seconds, --repeats and --episode-steps must be positive")
    if args.actor_rate is not None and args.actor_rate <= 0:
        raise ConfigError(f"--actor-rate {args.actor_rate}: env steps/s of one actor, a positive number")
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    if args.shards:
        return _shards_main(args, config, writers, started)
    records, table = run_bench(config, writers, args.sampler, args.seconds, args.repeats, args.episode_steps)
    rows = summarize(records)
    proj = projection(records, table, args.actor_rate)
    machine = machine_info()
    text = notes(rows, proj, machine["cpus"])
    sys.stdout.write(format_table(rows) + "\n" + "\n".join(text) + "\n" + cpu_line(machine) + "\n")
    if args.json_path:
        meta = {
            **config_meta(args, config),
            "writers": writers,
            "sampler": args.sampler,
            "seconds": args.seconds,
            "repeats": args.repeats,
            "table": table,
            "projection": proj,
            "machine": machine,
            "started": started,
            "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
        }
        with contextlib.suppress(OSError):
            meta["loadavg_text"] = Path("/proc/loadavg").read_text().strip()
        write_json(args.json_path, blocks_document("replay", meta, records, rows, notes=text))
    return 0


def _shards_main(args: argparse.Namespace, config: ExperimentConfig, writers: list[int], started: str) -> int:
    """``--shards``: the shard-count blocks of :mod:`actorq.bench.replay_shards`."""
    from actorq.bench.replay_shards import format_shard_table, run_shard_bench, summarize_shards

    shard_counts = parse_list(args.shards, (), "--shards", int)
    if min(shard_counts) < 1:
        raise ConfigError(f"--shards {args.shards!r}: every value must be >= 1")
    records, table = run_shard_bench(
        config, shard_counts, max(writers), args.seconds, args.repeats, args.episode_steps
    )
    rows = summarize_shards(records)
    machine = machine_info()
    sys.stdout.write(format_shard_table(rows) + "\n" + cpu_line(machine) + "\n")
    if args.json_path:
        meta = {
            **config_meta(args, config),
            "shards": shard_counts,
            "seconds": args.seconds,
            "repeats": args.repeats,
            "table": table,
            "machine": machine,
            "started": started,
            "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
        }
        write_json(args.json_path, blocks_document("replay_shards", meta, records, rows))
    return 0


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``replay`` on the ``actorq bench`` subparsers."""
    parser = subparsers.add_parser(
        "replay",
        help="inserts/s and samples/s of one Reverb server with K writer processes and the learner's sampling",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument(
        "config", help="YAML config whose table is measured, e.g. configs/dqn/gym_cartpole.yaml"
    )
    parser.add_argument("overrides", nargs="*", help="section.key=value overrides")
    parser.add_argument(
        "--writers", default="1,2,4,8", help="comma-separated writer processes (default 1,2,4,8)"
    )
    parser.add_argument(
        "--sampler",
        choices=("both", "on", "off"),
        default="both",
        help="blocks with the learner's sampler, without, or both (default); on/both add a sampler-alone block",
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds per block (default 10)")
    parser.add_argument("--repeats", type=int, default=2, help="interleaved repeats (default 2)")
    parser.add_argument(
        "--episode-steps", type=int, default=1000, help="env steps per written episode (default 1000)"
    )
    parser.add_argument(
        "--actor-rate",
        type=float,
        help="env steps/s of one actor (e.g. int8's from `actorq bench actors`): the notes say how many per core",
    )
    parser.add_argument(
        "--shards",
        metavar="N,N,...",
        help="instead: blocks against N replay server processes each (e.g. 1,2,4) at the config's "
        "samples-per-insert, max(--writers) writers (at least N) and one sampler; see actorq.bench.replay_shards",
    )
    parser.add_argument("--json", dest="json_path", metavar="PATH", help="write records and summary as JSON")
    parser.set_defaults(func=_main)
    return parser
