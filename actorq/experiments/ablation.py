"""``actorq ablation``: quantizing communication vs computation (the paper's Fig. 4a/4b) and pull frequency.

Grid: actor precision q in {32, 8} (fp32 / int8) x wire bits q_c in {32, 8} x update period K in a
communication-heavy (default 30) and a computation-heavy (default 1000) setting. Speedups are relative to
q=32, q_c=32 at the same K: ``fp32/c8`` isolates communication, ``int8/c32`` computation (the actor quantizes
the fp32 message itself), ``int8/c8`` both (the paper's q=8, which implies q_c=8).

Sweep: env steps/s over update periods (default 10 ... 3000) for fp32 and int8, with the mean age of the weights
an actor acts with (K / (2 x steps/s) seconds, and in learner steps at ``--learner-rate``): speed vs staleness.

Everything runs through the ``actorq bench actors`` machinery (real ActorRole, no learner, every pull a new
broadcast), all blocks of grid and sweep interleaved in one rotating order.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from actorq.bench.actors import add_common_arguments, common_meta, run_bench
from actorq.bench.actors_summary import format_table, summarize
from actorq.config import AUTO_COMM_BITS, PRECISIONS, ConfigError, load_config
from actorq.measure.actors_worker import Variant
from actorq.measure.common import blocks_document, parse_list, write_json

GRID_PRECISIONS = ("fp32", "int8")
GRID_BITS = (32, 8)


def plan(
    periods: list[int], sweep_periods: list[int], sweep_precisions: list[str]
) -> tuple[list[Variant], list[Variant], list[Variant]]:
    """The bench's variants.

    Args:
        periods: Pull periods K of the communication-vs-computation grid.
        sweep_periods: Pull periods of the sweep.
        sweep_precisions: Actor precisions of the sweep (each with its automatic wire width).

    Returns:
        (grid, sweep, measured): the grid's and the sweep's variants, and every distinct variant to measure in
        grid-then-sweep order; a sweep cell that is also a grid cell is measured once and reported in both.
    """
    grid = [Variant(p, b, k) for k in periods for p in GRID_PRECISIONS for b in GRID_BITS]
    sweep = [Variant(p, AUTO_COMM_BITS[p], k) for p in sweep_precisions for k in sweep_periods]
    return grid, sweep, list(dict.fromkeys(grid + sweep))


def gains(rows: list[dict[str, Any]]) -> list[str]:
    """Communication, computation and combined gains per period, as sentences."""
    notes = []
    for k in sorted({r["update_period"] for r in rows}):
        at = {r["variant"]: r for r in rows if r["update_period"] == k}
        base = at.get("fp32/c32")
        if not base:
            continue

        def gain(name: str, at: dict[str, dict[str, Any]] = at, base: dict[str, Any] = base) -> str:
            row = at.get(name)
            return f"{row['steps_per_s'] / base['steps_per_s']:.2f}x" if row else "-"

        share = {
            c: base["ms_per_step"][c] / max(sum(base["ms_per_step"].values()), 1e-9)
            for c in ("inference", "pull", "decode", "apply")
        }
        notes.append(
            f"K={k}: quantizing communication (fp32/c8) {gain('fp32/c8')}, computation (int8/c32) "
            f"{gain('int8/c32')}, both (int8/c8) {gain('int8/c8')} vs fp32/c32 ({base['steps_per_s']:.1f} steps/s); "
            f"fp32/c32 spends {share['inference']:.0%} of its step in inference and "
            f"{share['pull'] + share['decode'] + share['apply']:.0%} in pull+decode+apply."
        )
    return notes


def _main(args: argparse.Namespace) -> int:
    config = load_config(args.config, args.overrides)
    periods = parse_list(args.periods, (), "--periods", int)
    sweep_periods = parse_list(args.sweep_periods, (), "--sweep-periods", int) if args.sweep_periods else []
    sweep_precisions = parse_list(args.sweep_precisions, PRECISIONS, "--sweep-precisions")
    if min(periods + sweep_periods) < 1 or args.actors < 1 or args.seconds <= 0 or args.repeats < 1:
        raise ConfigError("periods, --actors, --seconds and --repeats must be positive")
    grid, sweep, variants = plan(periods, sweep_periods, sweep_precisions)
    records = run_bench(config, variants, args.actors, args.seconds, args.repeats, args.fresh)
    rows = summarize(records, learner_rate=args.learner_rate)
    key = {(v.name, v.update_period) for v in grid}
    grid_rows = [r for r in rows if (r["variant"], r["update_period"]) in key]
    sweep_key = {(v.name, v.update_period) for v in sweep}
    sweep_rows = sorted(
        (r for r in rows if (r["variant"], r["update_period"]) in sweep_key),
        key=lambda r: (r["variant"], r["update_period"]),
    )
    notes = gains(grid_rows)
    sys.stdout.write("communication vs computation (ratios to fp32/c32 at the same K)\n")
    sys.stdout.write(format_table(grid_rows) + "\n" + "\n".join(notes) + "\n")
    if sweep_rows:
        sys.stdout.write("\npull-period sweep\n")
        sys.stdout.write(
            f"{'variant':<10} {'K':>5} {'steps/s':>8} {'pulls/s':>8} {'age s':>7} {'age (learner steps)':>20}\n"
        )
        for r in sweep_rows:
            sys.stdout.write(
                f"{r['variant']:<10} {r['update_period']:>5} {r['steps_per_s']:>8.1f} {r['pulls_per_s']:>8.2f} "
                f"{r['weight_age_s']:>7.2f} {r.get('weight_age_learner_steps', float('nan')):>20.1f}\n"
            )
    if args.json_path:
        meta = common_meta(args, config)
        meta.update(periods=periods, sweep_periods=sweep_periods, learner_rate=args.learner_rate)
        doc = blocks_document("ablation", meta, records, grid_rows, sweep=sweep_rows, notes=notes)
        write_json(args.json_path, doc)
    return 0


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``ablation`` on the top-level ``actorq`` subparsers."""
    parser = subparsers.add_parser(
        "ablation",
        help="quantized communication vs computation at two pull periods, and a pull-period sweep",
        description=__doc__.split("\n\n")[0],
    )
    add_common_arguments(parser, seconds=20.0, repeats=2)
    parser.add_argument(
        "--periods", default="30,1000", help="communication- and computation-heavy K (default 30,1000)"
    )
    parser.add_argument(
        "--sweep-periods",
        default="10,30,100,300,1000,3000",
        help="pull periods to sweep ('' to skip the sweep)",
    )
    parser.add_argument(
        "--sweep-precisions", default="fp32,int8", help="precisions in the sweep (default fp32,int8)"
    )
    parser.add_argument(
        "--learner-rate",
        type=float,
        default=4.0,
        help="learner steps/s to express weight age in (default 4: the D4PG 3x2048 learner on this 2-core CPU)",
    )
    parser.set_defaults(func=_main)
    return parser
