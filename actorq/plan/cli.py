"""``actorq plan CONFIG``: on this machine, where would quantized actors reach a reward sooner, and which setting?

Verifies the actor kernels for the config's policy, then times the learner (samples/s = learner steps/s x batch,
on a pre-filled replay, never starved) and the actors (env steps/s per precision, the config's network and
``envs_per_actor``) on the cores each would get and beside each other, for each split of this machine's cores
between learner and actors (:mod:`actorq.plan.measure`), and the evaluator's and the quantizer's work on
the learner's cores, whose share of them the learner loses in a run (:mod:`actorq.plan.side_loads`). From those it
predicts, for a range of samples-per-insert ratios, each setting's env steps/s and the time-to-reward speed-up of
fp16 and int8 over fp32 (:mod:`actorq.plan.model`, through the regime model of :mod:`actorq.plan.regime`),
names the best setting as config overrides, the best setting of each precision ("best against best"), and says
plainly where quantized actors will not help and why. With ``--learner-steps-per-s R --actor-cores N`` the learner is not timed (e.g. a
GPU learner measured elsewhere): the actors are timed alone on this machine, one per core, and scaled to N cores.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from actorq.config import BYTES_PER_WEIGHT, PRECISIONS, ConfigError, load_config, to_dict
from actorq.hardware import bandwidth_record
from actorq.measure.common import blocks_document, config_meta, machine_info, parse_list, write_json
from actorq.plan import measure as plan_measure
from actorq.plan.measure import Timing
from actorq.plan.model import (
    BASE,
    DEFAULT_SPIS,
    HELPS,
    NEAR_BEST,
    Prediction,
    Recommendation,
    capacity_notes,
    make_splits,
    network_sizes,
    predict,
    recommend,
    spi_grid,
)
from actorq.plan.side_loads import step_limit

log = logging.getLogger(__name__)

QUICK = Timing(seconds=3.0, repeats=1)
"""``--quick``: about two minutes on a 2-core box (the config's environments per actor only)."""
FULL = Timing(seconds=6.0, repeats=2)
"""The default: within ten minutes on a 2-core box with two splits, three precisions and two env counts."""
MORE_ENVS = 8
"""Besides the config's ``envs_per_actor``, a full plan tries this many (batched inference changes the picture)."""
KERNEL_BUDGET_S = {True: 0.1, False: 0.3}
"""Seconds spent timing the verified kernels per precision and batch (quick, full)."""


def _check(args: argparse.Namespace):
    """Everything the plan needs, validated before any process starts."""
    config = load_config(args.config, args.overrides)
    from actorq.envs import check_task

    check_task(config)  # its spaces against the algorithm, before any process starts
    precisions = parse_list(args.precisions, PRECISIONS, "--precisions")
    if BASE not in precisions:
        raise ConfigError(
            f"--precisions {args.precisions!r}: include fp32 (every speed-up is relative to it)"
        )
    envs = parse_list(args.envs_per_actor, (), "--envs-per-actor", int) if args.envs_per_actor else None
    if envs is None:
        envs = [config.actor.envs_per_actor] + ([] if args.quick else [MORE_ENVS])
    envs = list(dict.fromkeys(envs))
    if min(envs) < 1:
        raise ConfigError(f"--envs-per-actor {args.envs_per_actor!r}: every value must be >= 1")
    spis = parse_list(args.spi, (), "--spi", float) if args.spi else list(DEFAULT_SPIS)
    if min(spis) <= 0:
        raise ConfigError(f"--spi {args.spi!r}: every ratio must be > 0")
    if (args.learner_steps_per_s is None) != (args.actor_cores is None):
        raise ConfigError(
            "--learner-steps-per-s and --actor-cores go together (a learner rate and its actor cores)"
        )
    if args.learner_steps_per_s is not None and (args.learner_steps_per_s <= 0 or args.actor_cores < 1):
        raise ConfigError("--learner-steps-per-s must be > 0 and --actor-cores >= 1")
    timing = QUICK if args.quick else FULL
    timing = Timing(args.seconds or timing.seconds, args.repeats or timing.repeats)
    if timing.seconds <= 0 or timing.repeats < 1:
        raise ConfigError("--seconds must be > 0 and --repeats >= 1")
    cores = sorted(os.sched_getaffinity(0))
    counts = parse_list(args.learner_cores, (), "--learner-cores", int) if args.learner_cores else None
    try:
        splits = make_splits(cores, counts)
    except ValueError as exc:
        raise ConfigError(f"--learner-cores: {exc}") from None
    return (
        config,
        precisions,
        envs,
        spi_grid(config.replay.samples_per_insert, tuple(spis)),
        timing,
        cores,
        splits,
    )


def _main(args: argparse.Namespace) -> int:
    config, precisions, envs, spis, timing, cores, splits = _check(args)
    if args.plot_path and importlib.util.find_spec("matplotlib") is None:
        raise ConfigError(
            "--plot needs matplotlib, which is not installed: pip install 'actorq[lab]' (or drop --plot)"
        )
    # Found before any timing: a task without a step limit cannot be planned beside an evaluator.
    eval_steps = step_limit(config) if args.learner_steps_per_s is None else 0
    started = time.perf_counter()
    # Before any timing, on the idle machine, as each run's actor measures it as it starts: the report compares the
    # two (fp32 actors whose weights exceed the L3 run at the memory's speed, which a cloud VM's neighbours change).
    memory = bandwidth_record(plan_measure.policy_spec(config).weight_count() * BYTES_PER_WEIGHT[BASE])
    kernels, failed = plan_measure.verify_kernels(config, precisions, envs, KERNEL_BUDGET_S[args.quick])
    if BASE in failed:
        raise ConfigError(f"no fp32 kernel verifies on this CPU, so nothing can be compared: {failed[BASE]}")
    precisions = [p for p in precisions if p not in failed]
    batch = config.learner.batch_size
    side: dict[str, Any] = {}
    if args.learner_steps_per_s is not None:
        records = plan_measure.time_actors_alone(config, cores, precisions, envs, timing)
        measured = plan_measure.given_learner_measurements(
            records, len(cores), args.actor_cores, args.learner_steps_per_s, batch
        )
        splits = [measured[0].split]
    else:
        prefill = max(config.replay.min_size, 2 * batch, 1000)
        records = []
        for split in splits:
            timed, side[split.name] = plan_measure.time_split(
                config, split, precisions, envs, timing, prefill, eval_steps
            )
            records += timed
        measured = plan_measure.measurements(records, {s.name: s for s in splits}, side, batch)
    predictions = predict(measured, spis)
    choice = recommend(predictions, config.replay.samples_per_insert)
    notes = [f"{p}: no verified kernel on this CPU, left out ({why})" for p, why in failed.items()]
    notes += capacity_notes(measured)
    text = "\n\n".join(
        [format_kernels(kernels), format_measured(measured), format_predictions(predictions),
         format_recommendation(choice, config.replay.samples_per_insert)]
    )  # fmt: skip
    cpu = {**machine_info(), **memory}
    sys.stdout.write(f"{text}\n" + "".join(n + "\n" for n in notes))
    sys.stdout.write(
        f"CPU: {cpu['cpu']} ({cpu['cpus']} cores; L3 {_mb(cpu.get('l3_bytes'))}); {memory_line(memory)}; "
        f"plan took {time.perf_counter() - started:.0f}s\n"
    )
    if args.json_path:
        meta = {
            **config_meta(args, config), "batch_size": batch,
            "layers": network_sizes(to_dict(config)),
            "config_spi": config.replay.samples_per_insert, "quick": args.quick, "seconds": timing.seconds,
            "repeats": timing.repeats, "cores": cores, "splits": [s.name for s in splits],
            "learner_steps_per_s_given": args.learner_steps_per_s, "actor_cores_given": args.actor_cores,
            "kernels": kernels, "kernels_failed": failed, "measurements": [m.as_dict() for m in measured],
            "side_loads": {name: loads.as_dict() for name, loads in side.items()},
            "recommendation": choice.as_dict(), "machine": cpu, "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        }  # fmt: skip
        rows = [p.as_dict() for p in predictions]
        write_json(args.json_path, blocks_document("plan", meta, records, rows, notes=notes + choice.reasons))
    if args.plot_path:
        plot(predictions, Path(args.plot_path), f"{config.env.task}, {cpu['cpu']}")
        sys.stdout.write(f"wrote {args.plot_path}\n")
    return 0


def _mb(nbytes: int | None) -> str:
    return f"{nbytes / 2**20:.2f} MiB" if nbytes else "? MiB"


def memory_line(memory: dict[str, Any]) -> str:
    """``read bandwidth: DRAM X GB/s, Y GB/s at the fp32 policy's N MiB``: what the plan's actors were timed at."""
    return (
        f"read bandwidth: DRAM {memory['dram_read_gbs']:.1f} GB/s, {memory['weights_read_gbs']:.1f} GB/s at the fp32 "
        f"policy's {_mb(memory['weights_read_bytes'])} (one core, before timing)"
    )


def format_kernels(kernels: dict[str, dict[int, Any]]) -> str:
    """One line per precision and batch: the verified kernel chosen, its error and time, what was rejected."""
    lines = [
        "kernels (verified against fp32 on this CPU; each actor selects again as it starts, the measured "
        "table names the one it used):"
    ]
    for precision, by_batch in kernels.items():
        for batch, s in by_batch.items():
            timed = f", {s['time_us']:.0f} us" if s.get("time_us") is not None else ""
            rejected = (
                "; rejected " + ", ".join(r["kernel"] for r in s["rejected"]) if s.get("rejected") else ""
            )
            lines.append(
                f"  {precision} batch {batch}: {s['kernel']} (error {s['error']:.3g}{timed}){rejected}"
            )
    return "\n".join(lines)


def format_measured(measured) -> str:
    """The timed cells: actors' env steps/s beside the learner, the learner's samples/s beside the actors."""
    width = max(len(m.split.name) for m in measured)
    head = (
        f"{'split':<{width}} {'prec':<5} {'envs':>4} {'kernel':<14} {'actor st/s':>10} {'learner smp/s':>13} "
    )
    head += f"{'infer ms':>8} {'step ms':>7} {'alone smp/s':>11} {'eval':>5} {'quant':>5}"
    title = (
        "measured (actors alone, one per core of this machine, scaled to the actor cores; the learner's rate given):"
        if measured[0].split.learner_elsewhere
        else "measured (learner and actors beside each other):"
    )
    lines = [title, head, "-" * len(head)]
    for m in measured:
        infer = f"{m.inference_ms:.3f}" if m.inference_ms is not None else "-"
        step = f"{m.step_ms:.3f}" if m.step_ms is not None else "-"
        alone = f"{m.capacity_alone:.0f}" if m.capacity_alone is not None else "-"
        shares = [f"{x:.0%}" if x is not None else "-" for x in (m.evaluator_share, m.quantizer_share)]
        lines.append(
            f"{m.split.name:<{width}} {m.precision:<5} {m.envs_per_actor:>4} {m.kernel or '-':<14} {m.supply:>10.0f} "
            f"{m.capacity:>13.0f} {infer:>8} {step:>7} {alone:>11} {shares[0]:>5} {shares[1]:>5}"
        )
    lines.append(f"(learner samples/s: {measured[0].capacity_source}; ms per env step of one actor)")
    if measured[0].capacity_alone is not None:
        lines.append(
            "(alone: the learner's samples/s without them; eval, quant: their shares of the learner's cores, the "
            "evaluator's at full-length episodes)"
        )
    return "\n".join(lines)


def format_predictions(predictions: list[Prediction]) -> str:
    """Per split, environments and spi: the learner's env steps/s (C/spi), each precision's predicted env steps/s,
    its speed-up over fp32 and its regime."""
    precisions = list(dict.fromkeys(p.measurement.precision for p in predictions))
    cells: dict[tuple, dict[str, Prediction]] = {}
    for p in predictions:
        cells.setdefault(p.key, {})[p.measurement.precision] = p
    width = max(len(k[0]) for k in cells)
    head = f"{'split':<{width}} {'envs':>4} {'spi':>6} " + " ".join(
        f"{q + ' st/s (x)':>18}" for q in precisions
    )
    head += "  regime (" + "/".join(precisions) + ")"
    lines = [
        "predicted env steps/s = min(actors' S, learner's C / spi); x = time-to-reward speed-up over fp32:"
    ]
    lines += [head, "-" * len(head)]
    for (split, envs, spi), by in cells.items():
        cols = []
        for q in precisions:
            p = by.get(q)
            x = f"({p.speedup:.2f}x)" if p is not None and p.speedup is not None else ""
            cols.append(f"{p.delivered:>9.0f} {x:>8}" if p is not None else f"{'-':>18}")
        labels = "/".join(by[q].label if q in by else "-" for q in precisions)
        lines.append(f"{split:<{width}} {envs:>4} {spi:>6g} " + " ".join(cols) + f"  {labels}")
    return "\n".join(lines)


def format_recommendation(choice: Recommendation, config_spi: float) -> str:
    """The named setting as overrides, each precision's best at its spi, and the verdict."""
    s = choice.setting
    lines = []
    if choice.helps:
        lines.append(
            f"best setting: {s.measurement.precision} at {s.speedup:.2f}x fp32 (predicted {s.delivered:.0f} "
            f"env steps/s, {s.label}; the spi nearest the config's {config_spi:g} within "
            f"{1 - NEAR_BEST:.0%} of the largest gain)"
        )
    else:
        lines.append(
            "quantized actors will not help on this machine for this config: no setting is predicted >= "
            f"{HELPS:g}x fp32. Fastest fp32 setting at spi {s.spi:g}: {s.delivered:.0f} env steps/s ({s.label})"
        )
    lines.append("  " + " ".join(s.overrides()))
    base = choice.best_per_precision.get(BASE)
    lines.append(f"best against best at spi {s.spi:g} (each precision at its own fastest split and envs):")
    for q, b in choice.best_per_precision.items():
        ratio = b.delivered / base.delivered if base is not None and base.delivered > 0 else float("nan")
        lines.append(
            f"  {q}: {b.delivered:.0f} env steps/s ({ratio:.2f}x fp32's best): " + " ".join(b.overrides())
        )
    if choice.reasons:
        lines.append("why not:" if not choice.helps else "where they do not help:")
        lines += [f"  - {r}" for r in choice.reasons]
    return "\n".join(lines)


def plot(predictions: list[Prediction], path: Path, title: str) -> Path:
    """One PNG: predicted env steps/s against spi (left) and the speed-up over fp32 (right), per setting."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"fp32": "C0", "fp16": "C2", "int8": "C3"}
    lines: dict[tuple, list[Prediction]] = {}
    for p in predictions:
        m = p.measurement
        lines.setdefault((m.precision, m.split.name, m.envs_per_actor), []).append(p)
    styles = {
        k: ["-", "--", ":", "-."][i % 4] for i, k in enumerate(dict.fromkeys((k[1], k[2]) for k in lines))
    }
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for (precision, split, envs), ps in lines.items():
        ps = sorted(ps, key=lambda p: p.spi)
        style = dict(color=colors.get(precision, "C7"), linestyle=styles[(split, envs)], marker=".")
        label = f"{precision}, {split}, {envs} env(s)"
        left.plot([p.spi for p in ps], [p.delivered for p in ps], label=label, **style)
        if precision != BASE:
            right.plot([p.spi for p in ps], [p.speedup or float("nan") for p in ps], label=label, **style)
    for ax, ylabel in ((left, "predicted env steps/s"), (right, "time-to-reward speed-up over fp32")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("samples per insert (spi)")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
    left.set_yscale("log")
    right.axhline(1.0, color="k", linewidth=0.8)
    left.legend(fontsize=7)
    fig.suptitle(f"actorq plan: {title}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``plan`` on the ``actorq`` subparsers."""
    parser = subparsers.add_parser(
        "plan",
        help="time learner and actors on this machine; predict where quantized actors reach a reward sooner",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("config", help="YAML config, e.g. configs/dqn/gym_cartpole.yaml")
    parser.add_argument(
        "overrides", nargs="*", help="section.key=value overrides (e.g. learner.batch_size=128)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="short blocks, one repeat, the config's envs only (~2 min)"
    )
    parser.add_argument(
        "--precisions", default="fp32,fp16,int8", help="comma-separated, with fp32 (default all)"
    )
    parser.add_argument(
        "--envs-per-actor", help=f"comma-separated (default: the config's, and {MORE_ENVS} unless --quick)"
    )
    parser.add_argument(
        "--spi",
        help="comma-separated samples-per-insert ratios (default 0.125..32 in powers of 2, plus the config's)",
    )
    parser.add_argument(
        "--learner-cores",
        help="comma-separated learner core counts to split at (default 1, half, all but one)",
    )
    parser.add_argument(
        "--seconds", type=float, help=f"seconds per block (default {FULL.seconds:g}, quick {QUICK.seconds:g})"
    )
    parser.add_argument(
        "--repeats", type=int, help=f"interleaved repeats (default {FULL.repeats}, quick {QUICK.repeats})"
    )
    parser.add_argument(
        "--learner-steps-per-s",
        type=float,
        help="a learner's steps/s measured elsewhere (e.g. a GPU); not timed here",
    )
    parser.add_argument(
        "--actor-cores", type=int, help="with --learner-steps-per-s: actor cores beside that learner"
    )
    parser.add_argument(
        "--json", dest="json_path", metavar="PATH", help="write measurements and predictions as JSON"
    )
    parser.add_argument("--plot", dest="plot_path", metavar="PATH", help="write one PNG of the predictions")
    parser.set_defaults(func=_main)
    return parser
