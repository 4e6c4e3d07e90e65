"""``actorq bench replay --shards 1,2,4``: inserts/s and samples/s against N replay shards at the config's
samples-per-insert, and the servers' CPU per item.

Unlike the one-server blocks (:mod:`actorq.bench.replay`, limiter off), every shard here is its own server process
with the config's tables, its samples-per-insert limiter included, so the rates are what the run's limiter lets
through. ``max(--shards)`` server processes start once; a block for N shards uses the first N: ``K`` writer
processes (``max(--writers)``, at least N) write to shard ``w % N`` (the actors' rule,
:func:`actorq.config.shards.actor_shard`) and one sampler process reads all N through the learner's sharded dataset
(:func:`actorq.replay.shards.make_sharded_dataset`, the config's batch size, prefetch and parallelism per shard).
After a block's end the sampler keeps sampling, uncounted, until the writers have flushed past the limiter.

Each server's CPU seconds are read from its process (``psutil``) around the block; ``server_cpu_s_per_1000_items``
divides their sum by the inserts and samples the N servers completed, ``server_cpu_s_per_1000_inserts`` by the
inserts alone (each insert with its ~spi samples: what a replay core pays per actor env step). Block kinds (one per
shard count) interleave in an order rotated each repeat (:func:`actorq.measure.common.interleave`); the table gives
medians over blocks.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from actorq.bench.replay_worker import SETTLE_S, SETTLE_TIMEOUT_S, start_worker
from actorq.config import ExperimentConfig, replace, save_config
from actorq.config.shards import actor_shard
from actorq.measure.common import START_DELAY_S, START_TIMEOUT_S, close_workdir, interleave, wait_until
from actorq.measure.protocol import BenchWorker

log = logging.getLogger(__name__)

SAMPLER_TIMEOUT_MS = 2000
"""How long a shard's limiter may hold the sampler before its worker ends (the block is over by then)."""


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def settled(clients: list) -> list[dict[str, int]]:
    """Each shard's experience counts once they stop changing (the previous block's sampler has drained)."""
    from actorq.replay.shards import experience_counts

    counts = [experience_counts(c) for c in clients]
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while time.monotonic() < deadline:
        time.sleep(SETTLE_S)
        now = [experience_counts(c) for c in clients]
        if now == counts:
            break
        counts = now
    return counts


def run_shard_block(
    servers: list[BenchWorker],
    clients: list,
    writers: list[BenchWorker],
    sampler: BenchWorker,
    seconds: float,
    done: Path,
) -> dict[str, Any]:
    """One block against ``servers`` (N shards): writers and sampler start together and run ``seconds``; ``done``
    is created once every writer has flushed (the sampler samples until then, so none is held by its limiter)."""
    from actorq.replay.shards import experience_counts

    done.unlink(missing_ok=True)
    before = settled(clients)
    load_before = os.getloadavg()[0]
    start = time.time() + START_DELAY_S
    for worker in writers:
        worker.send({"cmd": "go", "start": start, "end": start + seconds})
    sampler.send({"cmd": "go", "start": start, "end": start + seconds, "done": str(done)})
    wait_until(start)
    cpu0 = [process_cpu_s(s.proc.pid) for s in servers]
    wr = [json.loads(w.expect("result", seconds + 120)) for w in writers]
    done.touch()
    sr = json.loads(sampler.expect("result", seconds + 120))
    cpu1 = [process_cpu_s(s.proc.pid) for s in servers]
    after = [experience_counts(c) for c in clients]
    window = time.time() - start
    inserts = [a["inserts"] - b["inserts"] for a, b in zip(after, before, strict=True)]
    samples = [a["samples"] - b["samples"] for a, b in zip(after, before, strict=True)]
    cpu = [c1 - c0 for c0, c1 in zip(cpu0, cpu1, strict=True)]
    writer_s = max(r["seconds"] for r in wr)
    items = sum(inserts) + sum(samples)
    return {
        "shards": len(servers),
        "writers": len(writers),
        "window_s": window,
        "inserts_server": sum(inserts),
        "inserts_writers": sum(r["items"] for r in wr),
        "inserts_per_s": sum(inserts) / writer_s if writer_s > 0 else 0.0,
        "samples_server": sum(samples),
        "samples_sampler": sr["items"],
        "samples_per_s": sr["items"] / sr["seconds"] if sr["seconds"] > 0 else 0.0,
        "server_cpu_s": sum(cpu),
        "server_cores": sum(cpu) / window,
        "server_cpu_s_per_1000_items": 1e3 * sum(cpu) / items if items else None,
        "server_cpu_s_per_1000_inserts": 1e3 * sum(cpu) / sum(inserts) if sum(inserts) else None,
        "per_shard": [
            {"inserts": i, "samples": s, "cpu_s": c} for i, s, c in zip(inserts, samples, cpu, strict=True)
        ],
        "sampler_cpu_s": sr["cpu_s"],
        "dataset_restarts": sr["dataset_restarts"],
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
    }


def run_shard_bench(
    config: ExperimentConfig,
    shard_counts: list[int],
    n_writers: int,
    seconds: float,
    repeats: int,
    episode_steps: int,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every shard count ``repeats`` times, interleaved; the block records and the table's facts."""
    from actorq.replay.client import wait_for_server

    cfg = replace(config, **{"learner.checkpoint_period_s": 0.0})
    n_servers = max(shard_counts)
    n_writers = max(
        n_writers, n_servers
    )  # every shard needs a writer, as every shard of a run needs an actor
    workdir = Path(tempfile.mkdtemp(prefix="actorq-bench-replay-shards-"))
    config_path = workdir / "config.yaml"
    save_config(cfg, config_path)
    servers: list[BenchWorker] = []
    procs: list[BenchWorker] = []
    ok = False
    records: list[dict[str, Any]] = []
    try:
        servers = [start_worker(100 + k, "none", workdir) for k in range(n_servers)]
        for s in servers:
            s.expect("hello", START_TIMEOUT_S)
            s.send({"cmd": "prepare", "role": "server", "config": str(config_path)})
        ports = [json.loads(s.expect("ready", START_TIMEOUT_S))["port"] for s in servers]
        addresses = [f"localhost:{port}" for port in ports]
        clients = [wait_for_server(a, timeout_s=30) for a in addresses]
        procs = [start_worker(i, addresses[0], workdir) for i in range(n_writers + 1)]
        writers, sampler = procs[:n_writers], procs[n_writers]
        for w in procs:
            w.expect("hello", START_TIMEOUT_S)

        def prepare_writers(shards: int) -> None:
            for i, w in enumerate(writers):
                address = addresses[actor_shard(i, shards)]
                w.send(
                    {"cmd": "prepare", "role": "writer", "config": str(config_path), "seed": i}
                    | {"episode_steps": episode_steps, "address": address}
                )
            for w in writers:
                w.expect("ready", START_TIMEOUT_S)

        prepare_writers(n_servers)  # each shard filled to min_size (its limiter lets the sampler start there)
        for w in writers[:n_servers]:
            w.send({"cmd": "fill", "items": cfg.replay.min_size})
        for w in writers[:n_servers]:
            w.expect("filled", START_TIMEOUT_S)
        order = interleave(list(shard_counts), repeats)
        for i, (repeat, shards) in enumerate(order):
            prepare_writers(shards)
            sampler.send(
                {"cmd": "prepare", "role": "shard_sampler", "config": str(config_path)}
                | {"addresses": addresses[:shards], "timeout_ms": SAMPLER_TIMEOUT_MS}
            )
            sampler.expect("ready", START_TIMEOUT_S)
            record = run_shard_block(
                servers[:shards], clients[:shards], writers, sampler, seconds, workdir / "writers_done"
            )
            record.update(repeat=repeat, block=i)
            records.append(record)
            log.info(
                "[%d/%d] %d shard(s): %.0f inserts/s, %.0f samples/s, servers %.2f cores",
                i + 1,
                len(order),
                shards,
                record["inserts_per_s"],
                record["samples_per_s"],
                record["server_cores"],
            )
        ok = True
    finally:
        for w in [*procs, *servers]:
            with contextlib.suppress(Exception):
                w.stop()
        close_workdir(workdir, ok, "replay bench worker")
    table = {
        "samples_per_insert": cfg.replay.samples_per_insert,
        "rate_limiter": "the config's (SampleToInsertRatio)"
        if cfg.replay.samples_per_insert > 0
        else "MinSize",
        "sampler": "prioritized" if cfg.replay.prioritized else "uniform",
        "max_size": cfg.replay.max_size,
        "min_size": cfg.replay.min_size,
        "batch_size": cfg.learner.batch_size,
        "prefetch_size": cfg.learner.prefetch_size,
        "sample_parallelism": cfg.learner.sample_parallelism,
        "writers": n_writers,
        "episode_steps": episode_steps,
    }
    return records, table


def summarize_shards(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per shard count: medians over its blocks (and the insert rate's range)."""
    rows = []
    for shards in dict.fromkeys(r["shards"] for r in records):
        rs = [r for r in records if r["shards"] == shards]

        def med(key: str, rs=rs) -> float | None:
            vals = [r[key] for r in rs if r[key] is not None]
            return float(np.median(vals)) if vals else None

        rows.append(
            {
                "shards": shards,
                "blocks": len(rs),
                "inserts_per_s": med("inserts_per_s"),
                "inserts_per_s_range": [
                    min(r["inserts_per_s"] for r in rs),
                    max(r["inserts_per_s"] for r in rs),
                ],
                "samples_per_s": med("samples_per_s"),
                "server_cores": med("server_cores"),
                "server_cpu_s_per_1000_items": med("server_cpu_s_per_1000_items"),
                "server_cpu_s_per_1000_inserts": med("server_cpu_s_per_1000_inserts"),
                "load_avg": float(np.mean([r["load_before"] for r in rs])),
            }
        )
    return rows


def format_shard_table(rows: list[dict[str, Any]]) -> str:
    """The text table ``actorq bench replay --shards`` prints."""

    def fmt(value: float | None, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    lines = [
        "shards  blocks  inserts/s (range)        samples/s  server cores  CPU s/1000 items  CPU s/1000 inserts  load",
    ]
    for r in rows:
        low, high = r["inserts_per_s_range"]
        lines.append(
            f"{r['shards']:>6}  {r['blocks']:>6}  {fmt(r['inserts_per_s'], '9.0f')} ({low:.0f}-{high:.0f})"
            f"  {fmt(r['samples_per_s'], '9.0f')}  {fmt(r['server_cores'], '12.2f')}"
            f"  {fmt(r['server_cpu_s_per_1000_items'], '16.3f')}  {fmt(r['server_cpu_s_per_1000_inserts'], '18.3f')}"
            f"  {r['load_avg']:4.1f}"
        )
    return "\n".join(lines)
