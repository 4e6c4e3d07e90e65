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
import json
import logging
import os
import sys
import time
from typing import Any

import numpy as np

from actorq.bench.floors import batching_notes
from actorq.bench.pool import Variant, WorkerPool, machine_info
from actorq.config import (
    AUTO_COMM_BITS,
    COMM_BITS,
    PRECISIONS,
    ConfigError,
    ExperimentConfig,
    load_config,
    replace,
)
from actorq.timers import BREAKDOWN_COMPONENTS

log = logging.getLogger(__name__)

BENCH_MAX_SIZE = 200_000
"""Experience table capacity in the bench: FIFO eviction never blocks inserts; this only bounds memory."""


def reference_state(config: ExperimentConfig, seed: int = 0) -> dict[str, np.ndarray]:
    """The torch twin's initial weights for the config's task and policy (keys are the wire's torch names)."""
    import torch

    from actorq.envs import environment_spec
    from actorq.networks.torch_nets import D4PGPolicy, QNetwork

    spec = environment_spec(config.env)
    torch.manual_seed(seed)
    layers = tuple(config.network.policy_layers)
    if config.algorithm == "d4pg":
        model = D4PGPolicy(spec.obs_dim, spec.num_actions, layers, spec.action_low, spec.action_high)
    else:
        model = QNetwork(spec.obs_dim, spec.num_actions, layers)
    return {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}


def bench_config(config: ExperimentConfig, variant: Variant, actors: int) -> ExperimentConfig:
    """The experiment's config for one bench block: the variant's precision, bits and period, no rate limiter."""
    return replace(
        config,
        **{
            "actor.precision": variant.precision,
            "quantizer.comm_bits": variant.comm_bits,
            "actor.update_period": variant.update_period,
            "actor.num_actors": actors,
            "actor.envs_per_actor": variant.envs,
            "replay.samples_per_insert": 0.0,
            "replay.max_size": BENCH_MAX_SIZE,
            "replay.min_size": min(config.replay.min_size, BENCH_MAX_SIZE),
            "learner.checkpoint_period_s": 0.0,
        },
    )


def block_order(variants: list[Variant], repeats: int) -> list[tuple[int, Variant]]:
    """(repeat, variant) in run order: all variants each repeat, the order rotated by one every repeat."""
    order = []
    for r in range(repeats):
        shift = r % len(variants)
        order += [(r, v) for v in variants[shift:] + variants[:shift]]
    return order


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
    from actorq.quantize.codec import encode_message

    state = reference_state(config, seed)
    records: list[dict[str, Any]] = []
    with WorkerPool(bench_config(config, variants[0], actors), actors) as pool:
        order = block_order(variants, repeats)
        for i, (repeat, variant) in enumerate(order):
            cfg = bench_config(config, variant, actors)
            message = encode_message(
                state,
                version=1,
                learner_step=0,
                precision=variant.precision,
                comm_bits=variant.comm_bits,
                compress=cfg.quantizer.compress,
                per_channel=cfg.quantizer.per_channel,
                key=pool.key,
            )
            pool.publish(message)
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


def summarize(records: list[dict[str, Any]], learner_rate: float | None = None) -> list[dict[str, Any]]:
    """Per (variant, update period): median over repeats of the per-actor steps/s, ratios, breakdown."""
    keys = list(dict.fromkeys((r["variant"], r["update_period"]) for r in records))
    per_block: dict[tuple[str, int], dict[int, dict[str, Any]]] = {}
    for r in records:
        per_block.setdefault((r["variant"], r["update_period"]), {}).setdefault(r["repeat"], []).append(r)
    rows = []
    for key in keys:
        blocks = per_block[key]
        rates = {rep: float(np.mean([a["steps_per_s"] for a in acts])) for rep, acts in blocks.items()}
        all_actors = [a for acts in blocks.values() for a in acts]
        steps = sum(a["steps"] for a in all_actors)
        comps = {c: sum(a["components"].get(c, 0.0) for a in all_actors) for c in BREAKDOWN_COMPONENTS}
        wall = sum(a["seconds"] for a in all_actors)
        cpu = sum(a.get("cpu_s", 0.0) for a in all_actors)
        applied = sum(a["applied"] for a in all_actors)
        ms = {c: 1e3 * comps[c] / max(steps, 1) for c in BREAKDOWN_COMPONENTS}
        ms["other"] = 1e3 * max(0.0, wall - sum(comps.values())) / max(steps, 1)
        median = float(np.median(list(rates.values())))
        first = all_actors[0]
        row = {
            "variant": key[0],
            "precision": first["precision"],
            "kernel": first.get("kernel"),
            "kernel_us": first.get("kernel_us"),
            "comm_bits": first["comm_bits"],
            "update_period": key[1],
            "envs": int(first.get("envs", 1)),
            "actors": len(blocks[next(iter(blocks))]),
            "repeats": len(rates),
            "rates_by_repeat": rates,
            "steps_per_s": median,
            "steps_per_s_min": min(rates.values()),
            "steps_per_s_max": max(rates.values()),
            "steps_per_cpu_s": steps / cpu if cpu > 0 else None,
            "ms_per_step": ms,
            "message_bytes": first["message_bytes"],
            "pulls_per_s": sum(a["pulls"] for a in all_actors) / max(wall, 1e-9),
            "broadcasts_applied": applied,
            "ms_per_broadcast": (
                1e3 * (comps["pull"] + comps["decode"] + comps["apply"]) / applied if applied else None
            ),
            "weight_age_s": key[1] / (2.0 * median) if median > 0 else None,
            "load_avg": float(np.mean([a["load_before"] for a in all_actors])),
        }
        if learner_rate and row["weight_age_s"] is not None:
            row["weight_age_learner_steps"] = row["weight_age_s"] * learner_rate
        rows.append(row)
    for row in rows:  # ratios to fp32/32-bit at the same period and envs (else the first such variant listed)
        same = [r for r in rows if (r["update_period"], r["envs"]) == (row["update_period"], row["envs"])]
        set_speedup(
            row, next((r for r in same if r["precision"] == "fp32" and r["comm_bits"] == 32), same[0])
        )
        one = next(
            (
                r
                for r in rows
                if r["envs"] == 1
                and (r["precision"], r["comm_bits"], r["update_period"])
                == (row["precision"], row["comm_bits"], row["update_period"])
            ),
            None,
        )
        row["vs_one_env"] = (
            row["steps_per_s"] / one["steps_per_s"] if one and one["steps_per_s"] > 0 else None
        )
        row["inference_vs_one_env"] = (
            row["ms_per_step"]["inference"] / one["ms_per_step"]["inference"]
            if one and one["ms_per_step"]["inference"] > 0
            else None
        )
    return rows


def set_speedup(row: dict[str, Any], base: dict[str, Any]) -> None:
    """``row``'s steps/s against ``base``'s: ``speedup`` (ratio of medians) and the range of the paired
    per-repeat ratios (``speedup_min``/``speedup_max``: repeats ran interleaved, so each pair shared the machine)."""
    row["baseline"] = base["variant"]
    row["speedup"] = row["steps_per_s"] / base["steps_per_s"] if base["steps_per_s"] > 0 else None
    paired = [
        row["rates_by_repeat"][rep] / base["rates_by_repeat"][rep]
        for rep in row["rates_by_repeat"]
        if base["rates_by_repeat"].get(rep)
    ]
    row["speedup_min"], row["speedup_max"] = (min(paired), max(paired)) if paired else (None, None)


def amdahl_notes(rows: list[dict[str, Any]]) -> list[str]:
    """Where the time goes: inference speed-up vs env-steps/s speed-up, and the bound the other parts impose."""
    notes = []
    for row in rows:
        base = next(
            (
                r
                for r in rows
                if r["variant"] == row["baseline"] and r["update_period"] == row["update_period"]
            ),
            None,
        )
        if base is None or row is base or not row["ms_per_step"]["inference"] or row["speedup"] is None:
            continue
        total = sum(base["ms_per_step"].values())
        fwd = base["ms_per_step"]["inference"] / row["ms_per_step"]["inference"]
        bound = total / max(total - base["ms_per_step"]["inference"], 1e-9)
        notes.append(
            f"{row['variant']} K={row['update_period']}: inference runs at {fwd:.2f}x the speed of "
            f"{row['baseline']}'s ({row['ms_per_step']['inference']:.3f} vs {base['ms_per_step']['inference']:.3f} "
            f"ms/step); env steps/s {row['speedup']:.2f}x. Inference is {base['ms_per_step']['inference'] / total:.0%} "
            f"of {row['baseline']}'s step, so even free inference would give at most {bound:.2f}x (Amdahl)."
        )
    return notes


def format_table(rows: list[dict[str, Any]]) -> str:
    """Aligned text table of :func:`summarize` rows."""
    comps = (*BREAKDOWN_COMPONENTS, "other")
    head = (
        f"{'variant':<13} {'kernel':<12} {'K':>5} {'n':>2} {'N':>2} {'steps/s':>8} {'/cpu-s':>7} {'min-max':>13} "
        f"{'x base':>6} {'paired':>11} {'x n1':>5} "
        + " ".join(f"{c[:6]:>7}" for c in comps)
        + f" {'ms/step':>8} {'MB/msg':>7} {'ms/bcast':>8} {'load':>5}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        ms = r["ms_per_step"]
        paired = f"{r['speedup_min']:.2f}-{r['speedup_max']:.2f}" if r["speedup_min"] is not None else "-"
        bcast = f"{r['ms_per_broadcast']:.1f}" if r["ms_per_broadcast"] is not None else "-"
        speed = f"{r['speedup']:.2f}" if r["speedup"] is not None else "-"
        per_cpu = f"{r['steps_per_cpu_s']:.1f}" if r.get("steps_per_cpu_s") else "-"
        vs_one = f"{r['vs_one_env']:.2f}" if r.get("vs_one_env") else "-"
        lines.append(
            f"{r['variant']:<13} {str(r.get('kernel') or '-'):<12} {r['update_period']:>5} {r['actors']:>2} "
            f"{r.get('envs', 1):>2} {r['steps_per_s']:>8.1f} {per_cpu:>7} "
            f"{r['steps_per_s_min']:>6.1f}-{r['steps_per_s_max']:<6.1f} {speed:>6} {paired:>11} {vs_one:>5} "
            + " ".join(f"{ms[c]:>7.3f}" for c in comps)
            + f" {sum(ms.values()):>8.3f} {r['message_bytes'] / 1e6:>7.2f} {bcast:>8} {r['load_avg']:>5.1f}"
        )
    lines.append(
        "(steps/s and /cpu-s: env steps over all N envs of one actor process; x base: vs fp32 at the same N; "
        "x n1: vs the same precision at N=1; ms columns: per env step; 'other' = loop time outside the timed "
        "components)"
    )
    return "\n".join(lines)


def parse_list(text: str, allowed: tuple, what: str, cast=str) -> list:
    try:
        out = [cast(p.strip()) for p in str(text).split(",") if p.strip()]
    except ValueError:
        raise ConfigError(f"{what} {text!r}: expected a comma-separated list") from None
    bad = [p for p in out if allowed and p not in allowed]
    if not out or bad:
        raise ConfigError(f"{what} {text!r}: choose from {', '.join(map(str, allowed))}")
    return out


def write_json(path: str, kind: str, meta: dict[str, Any], records, rows, sweep=None, notes=None) -> None:
    doc = {
        "kind": kind,
        "meta": meta,
        "records": records,
        "summary": rows,
        "sweep": sweep or [],
        "notes": notes or [],
    }
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, default=float)


def common_meta(args: argparse.Namespace, config: ExperimentConfig) -> dict[str, Any]:
    return {
        "config": args.config,
        "overrides": list(args.overrides),
        "task": f"{config.env.suite}:{config.env.task}",
        "policy_layers": list(config.network.policy_layers),
        "actors": args.actors,
        "seconds": args.seconds,
        "repeats": args.repeats,
        "fresh": args.fresh,
        "machine": machine_info(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def _main(args: argparse.Namespace) -> int:
    config = load_config(args.config, args.overrides)
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
    notes += batching_notes(rows, reference_state(config), max(config.network.policy_layers))
    meta = {**common_meta(args, config), "envs_per_actor": envs}
    cpu = meta["machine"]
    sys.stdout.write(
        format_table(rows)
        + "\n"
        + "\n".join(notes)
        + f"\nCPU: {cpu['cpu']} ({cpu['cpus']} cores; {', '.join(cpu['isa']) or 'no vector flags recorded'})\n"
    )
    if args.json_path:
        write_json(args.json_path, "actors", meta, records, rows, notes=notes)
        sys.stdout.write(f"wrote {args.json_path}\n")
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
