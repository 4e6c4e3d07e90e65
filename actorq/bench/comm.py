"""``actorq bench comm``: what quantized weight messages buy on a limited link between the learner's host and the
actors' host, per ``--comm-bits``.

Two hosts: on the server's host a publisher process runs the Reverb server with the experiment's tables and the
real publishing path (the learner's fp32 message of the config's policy, signed, handed to the quantizer role,
which verifies, converts, encodes at the block's wire bits, signs and inserts it into the policy table), publishing
one new version every ``learner.publish_period / --learner-rate`` seconds (the learner's rate). On the actors'
host ``--actors`` processes run the real :class:`~actorq.roles.actor.ActorRole` against that server over the
link: env steps as fast as they go, experience written across the link, a weight pull every
``actor.update_period`` env steps. Measured per block: the message's bytes; the time from a version's policy-table
insert until an actor runs it (fetched over the link, verified, decoded, applied); how many versions behind the
publisher each actor runs, sampled every 50 ms; the actors' env steps/s.

``--netns`` builds the two hosts itself (:class:`actorq.bench.netns.NamespaceHosts`: network namespaces with
their own addresses on one bridge, needs root) and limits both hosts' links to each ``--rate`` in turn (a ``tbf``
token bucket, both directions; ``none`` for no limit), then removes them (processes, namespaces, links), also on a
failure. Without it both ends run on this machine, and the actors dial the server at ``--replay-address``.

Blocks interleave every (rate, bits) pair in an order rotated each repeat; the summary gives medians over the
repeats, with ranges, and the CPU model. The hosts share this machine's clock (namespaces) and its CPU: the figures
are the link's effect where the machine has cores to spare, which the load average recorded per block tells.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from actorq.bench.comm_summary import block_record, format_table, notes, summarize
from actorq.bench.comm_worker import start_worker
from actorq.bench.netns import NamespaceHosts, check_rate, rate_bits_per_s, unavailable_reason
from actorq.config import COMM_BITS, ConfigError, ExperimentConfig, load_config, replace, save_config
from actorq.measure.actors_worker import BENCH_MAX_SIZE
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
    write_json,
)
from actorq.measure.protocol import BenchWorker

log = logging.getLogger(__name__)

PREPARE_TIMEOUT_S = 900.0
"""A block's preparation includes every actor's first download over the link (34 MB at 5 Mbit/s: a minute each)."""
NO_LIMIT = "none"
"""``--rate`` value for a link without a limit."""


@dataclass(frozen=True)
class CommPlan:
    """What one ``actorq bench comm`` measures, checked before any process starts."""

    comm_bits: tuple[int, ...]
    """Wire bits, one kind of block each (per rate)."""
    rates: tuple[str | None, ...]
    """Link limits in ``tc`` units (None: no limit), one kind of block each (per bits)."""
    actors: int
    """Actor processes on the actors' host."""
    seconds: float
    """Measured seconds per block."""
    repeats: int
    """Interleaved repeats of every (rate, bits) block."""
    period_s: float
    """Seconds between two publishes (``learner.publish_period`` / the learner's steps/s)."""
    netns: bool
    """Build two namespace hosts (else both ends run on this machine)."""
    replay_address: str
    """Without ``netns``: the address the actors dial the server at."""
    key_file: Path | None = None
    """The run's weights key (made in the bench's scratch directory when it starts)."""


def bench_config(config: ExperimentConfig, comm_bits: int, actors: int) -> ExperimentConfig:
    """The experiment's config for one block: its wire bits and actors, no rate limiter, no checkpoints."""
    return replace(
        config,
        **{
            "quantizer.comm_bits": comm_bits,
            "actor.num_actors": actors,
            "replay.samples_per_insert": 0.0,
            "replay.max_size": BENCH_MAX_SIZE,
            "replay.min_size": min(config.replay.min_size, BENCH_MAX_SIZE),
            "learner.checkpoint_period_s": 0.0,
        },
    )


def parse_rates(text: str | None, netns: bool) -> list[str | None]:
    """``--rate``'s list (``none`` -> None); without ``--netns`` only the unlimited link (None)."""
    if not netns:
        if text is not None:
            raise ConfigError(
                "--rate limits the namespace hosts' link: add --netns (between real hosts, limit the link with "
                "tc yourself and leave --rate out)"
            )
        return [None]
    rates = parse_list(text or NO_LIMIT, (), "--rate")
    try:
        return [None if r == NO_LIMIT else check_rate(r) for r in rates]
    except ValueError as exc:
        raise ConfigError(f"--rate: {exc} (or {NO_LIMIT})") from None


def _json(worker: BenchWorker, tag: str, timeout_s: float) -> dict[str, Any]:
    return json.loads(worker.expect(tag, timeout_s))


def run_blocks(
    publisher: BenchWorker,
    actors: list[BenchWorker],
    config: ExperimentConfig,
    plan: CommPlan,
    workdir: Path,
    set_rate: Callable[[str | None], None],
) -> list[dict[str, Any]]:
    """Every (rate, bits) block ``plan.repeats`` times, interleaved; ``set_rate(rate)`` limits the link."""
    pairs = [(rate, bits) for rate in plan.rates for bits in plan.comm_bits]
    order = interleave(pairs, plan.repeats)
    records = []
    for i, (repeat, (rate, bits)) in enumerate(order):
        set_rate(rate)
        cfg = bench_config(config, bits, len(actors))
        path = workdir / f"block_{i}.yaml"
        save_config(cfg, path)
        common = {"cmd": "prepare", "config": str(path), "key_file": str(plan.key_file)}
        publisher.send({**common, "run_dir": str(workdir / f"block_{i}" / "server")})
        first = _json(publisher, "ready", PREPARE_TIMEOUT_S)
        for j, actor in enumerate(actors):
            actor.send({**common, "run_dir": str(workdir / f"block_{i}" / "actors"), "index": j})
        for actor in actors:
            actor.expect("ready", PREPARE_TIMEOUT_S)
        load_before = os.getloadavg()[0]
        start = time.time() + START_DELAY_S
        end = start + plan.seconds
        publisher.send({"cmd": "go", "start": start, "end": end, "period_s": plan.period_s})
        for actor in actors:
            actor.send({"cmd": "go", "start": start, "end": end})
        published = _json(publisher, "result", plan.seconds + PREPARE_TIMEOUT_S)
        results = [_json(a, "result", plan.seconds + PREPARE_TIMEOUT_S) for a in actors]
        record = block_record(published, results, start, end)
        record.update(
            rate=rate,
            rate_bits_per_s=rate_bits_per_s(rate) if rate else None,
            comm_bits=bits,
            repeat=repeat,
            block=i,
            first_version=first["version"],
            load_before=load_before,
            load_after=os.getloadavg()[0],
        )
        records.append(record)
        log.info(
            "[%d/%d] %s %d-bit: %.2f MB, reach %s s, staleness %s, %.0f env steps/s per actor",
            i + 1,
            len(order),
            rate or NO_LIMIT,
            bits,
            record["message_bytes"] / 1e6,
            "-" if record["reach_s"] is None else f"{record['reach_s']:.3f}",
            record["staleness"],
            record["steps_per_s"],
        )
    return records


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While entered, SIGTERM (``timeout``, ``kill``) raises KeyboardInterrupt as Ctrl-C does: the bench's
    ``finally`` blocks then stop its workers and delete its namespaces, which SIGTERM's default would leave."""

    def interrupt(signum: int, frame: Any) -> None:
        del frame
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@dataclass
class Placement:
    """Where the bench's two ends run and how it limits the link between them."""

    server_prefix: list[str]
    """Runs a command on the server's host (``ip netns exec NS``; empty: this machine)."""
    actor_prefix: list[str]
    """Runs a command on the actors' host."""
    server_ip: str
    """The address the actors dial the server at."""
    set_rate: Callable[[str | None], None]
    """Limits the link to a ``tc`` rate, or lifts the limit (None)."""
    where: dict[str, Any]
    """The hosts, for the JSON's meta."""


@contextlib.contextmanager
def placement(plan: CommPlan, workdir: Path) -> Iterator[Placement]:
    """With ``plan.netns``: two namespace hosts (server, actors) whose links take each rate in turn, removed on
    exit; else this machine, the actors dialing ``plan.replay_address``."""
    if not plan.netns:
        address = plan.replay_address
        yield Placement([], [], address, lambda rate: None, {"server": address, "actors": "this machine"})
        return
    with NamespaceHosts(2, workdir / "hosts", prefix=f"aqc{os.getpid() % 100000}") as hosts:

        def set_rate(rate: str | None) -> None:
            for i in range(len(hosts)):  # both links: the server's and the actors' (both directions each)
                hosts.set_rate(i, rate)

        where = {"server": hosts[0].address, "actors": hosts[1].address, "namespaces": list(hosts.namespaces)}
        yield Placement(hosts[0].command([]), hosts[1].command([]), hosts[0].address, set_rate, where)


def run_bench(config: ExperimentConfig, plan: CommPlan) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Start the hosts (``plan.netns``) and workers, run the blocks, remove everything; (records, hosts)."""
    from actorq.weights_key import ensure_run_key

    workdir = Path(tempfile.mkdtemp(prefix="actorq-bench-comm-"))
    plan = dataclasses.replace(plan, key_file=ensure_run_key(workdir))  # signed messages, as in training
    server_cfg = workdir / "server.yaml"
    save_config(bench_config(config, plan.comm_bits[0], plan.actors), server_cfg)
    workers: list[BenchWorker] = []
    ok = False
    try:
        with sigterm_as_interrupt(), placement(plan, workdir) as place:
            try:
                publisher = start_worker("publisher", ["publisher"], workdir, place.server_prefix)
                workers.append(publisher)
                publisher.expect("hello", START_TIMEOUT_S)
                publisher.send({"cmd": "serve", "config": str(server_cfg)})
                port = _json(publisher, "serving", START_TIMEOUT_S)["port"]
                argv = ["actor", "--address", f"{place.server_ip}:{port}"]
                for i in range(plan.actors):
                    workers.append(start_worker(f"actor {i}", argv, workdir, place.actor_prefix))
                for actor in workers[1:]:
                    actor.expect("hello", START_TIMEOUT_S)
                records = run_blocks(publisher, workers[1:], config, plan, workdir, place.set_rate)
                ok = True
            finally:  # before the hosts go
                for worker in workers:  # all asked first, so they exit in parallel
                    worker.request_exit()
                for worker in workers:
                    worker.wait(timeout_s=20)
    finally:  # after an interrupt too: the worker logs are kept and named
        close_workdir(workdir, ok, "comm bench worker")
    return records, place.where


def _main(args: argparse.Namespace) -> int:
    config = load_config(args.config, args.overrides)
    bits = parse_list(args.comm_bits, COMM_BITS, "--comm-bits", int)
    rates = parse_rates(args.rate, args.netns)
    if args.netns and (reason := unavailable_reason()):
        raise ConfigError(f"--netns: {reason}")
    actors = args.actors or config.actor.num_actors
    if args.seconds <= 0 or args.repeats < 1 or actors < 1 or args.learner_rate <= 0:
        raise ConfigError("--seconds, --repeats, --actors and --learner-rate must be positive")
    period_s = config.learner.publish_period / args.learner_rate
    plan = CommPlan(
        comm_bits=tuple(bits),
        rates=tuple(rates),
        actors=actors,
        seconds=args.seconds,
        repeats=args.repeats,
        period_s=period_s,
        netns=args.netns,
        replay_address=args.replay_address,
    )
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    records, where = run_bench(config, plan)
    rows = summarize(records)
    machine = machine_info()
    text = notes(rows, actors, period_s)
    sys.stdout.write(format_table(rows) + "\n" + "\n".join(text) + "\n" + cpu_line(machine) + "\n")
    if args.json_path:
        meta = {
            **config_meta(args, config),
            "precision": config.actor.precision,
            "update_period": config.actor.update_period,
            "learner_rate": args.learner_rate,
            "publish_period_s": period_s,
            **{k: getattr(plan, k) for k in ("comm_bits", "rates", "actors", "seconds", "repeats", "netns")},
            "hosts": where,
            "machine": machine,
            "started": started,
            "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
        }
        with contextlib.suppress(OSError):
            meta["loadavg_text"] = Path("/proc/loadavg").read_text().strip()
        write_json(args.json_path, blocks_document("comm", meta, records, rows, notes=text))
    return 0


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``comm`` on the ``actorq bench`` subparsers."""
    parser = subparsers.add_parser(
        "comm",
        help="weight messages over a limited link per --comm-bits: bytes, time to reach the actors, staleness",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument(
        "config", help="YAML config whose policy is published, e.g. configs/dqn/gym_cartpole.yaml"
    )
    parser.add_argument("overrides", nargs="*", help="section.key=value overrides")
    parser.add_argument(
        "--comm-bits", default="32,16,8,4", help="comma-separated wire bits (default 32,16,8,4)"
    )
    parser.add_argument(
        "--netns",
        action="store_true",
        help="build two network-namespace hosts (server, actors) on this machine and remove them after (root)",
    )
    parser.add_argument(
        "--rate",
        help=f"with --netns: comma-separated link limits in tc units, e.g. 100mbit,1gbit ({NO_LIMIT}: no limit)",
    )
    parser.add_argument(
        "--replay-address",
        default="127.0.0.1",
        help="without --netns: the address the actors dial the server at (default 127.0.0.1)",
    )
    parser.add_argument(
        "--actors", type=int, help="actor processes on the actors' host (default: the config's)"
    )
    parser.add_argument(
        "--learner-rate",
        type=float,
        default=17.0,
        help="learner steps/s: a version is published every learner.publish_period / this seconds (default 17, "
        "the CPU learner's on 3x2048, see docs/measured.md; `actorq bench learner` measures yours)",
    )
    parser.add_argument("--seconds", type=float, default=30.0, help="measured seconds per block (default 30)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats (default 3)")
    parser.add_argument("--json", dest="json_path", metavar="PATH", help="write records and summary as JSON")
    parser.set_defaults(func=_main)
    return parser
