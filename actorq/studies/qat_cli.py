"""``actorq qat`` (the quick QAT vs PTQ comparison) and ``actorq qat-study`` (the resumable grid, with pretrained
zoo agents by ``--zoo``); registered by :func:`actorq.studies.cli.add_subcommands`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from actorq.studies.cli_args import ALGO_CHOICES, bit_width, check_env, fail, names, threads
from actorq.usage import non_negative_int, positive_int

DEFAULT_PAIRS = "ppo_CartPole-v1,a2c_CartPole-v1,ddpg_Pendulum-v1"
"""The pairs ``qat-study`` runs when neither ``--pairs`` nor ``--zoo`` is given."""


def cmd_qat(a: argparse.Namespace) -> int:
    from actorq.studies import qat

    try:
        bits = [bit_width(b) for b in str(a.bits).split(",")]
    except argparse.ArgumentTypeError as e:
        raise fail(f"--bits {a.bits!r}: each {e} (QAT quantizes to integers: e.g. 8,6,4)") from None
    if a.quant_delay is not None and a.quant_delay >= a.steps:
        raise fail(
            f"--quant-delay {a.quant_delay} must be below --steps {a.steps}, or nothing is trained quantized"
        )
    check_env(a.env)
    finetune = None
    if a.schedule == "from-scratch" and a.quant_delay is None:
        raise fail("--schedule from-scratch needs --quant-delay (the step at which fake quantization starts)")
    if a.schedule == "finetune":
        if a.quant_delay is not None:
            raise fail(
                "--quant-delay applies to --schedule from-scratch only (the fine-tune is quantized throughout)"
            )
        import dataclasses

        from actorq.studies import qat_finetune

        recipe = qat_finetune.QatRecipe()
        if a.finetune_steps is not None:
            recipe = dataclasses.replace(recipe, finetune_steps=a.finetune_steps)

        def finetune(base: Any, bits: int, seed: int) -> Any:
            return qat_finetune.finetune_from(base, a.algo, a.env, bits, seed, a.steps, recipe)

    threads(a.threads)
    res = qat.compare(
        a.algo, a.env, bits, a.steps, a.quant_delay, seeds=a.seeds, episodes=a.episodes, out=a.out,
        finetune=finetune,
    )  # fmt: skip
    print(qat.table_markdown(res))
    return 0


def _zoo_agents(value: str) -> list:
    """The ``--zoo`` agents, each read (nothing unpickled) before any cell runs; an ``error:`` otherwise."""
    from actorq.studies import qat_zoo, safe_pickle, sb3_zip, zoo_env

    agents = []
    for path in (p.strip() for p in value.split(",") if p.strip()):
        if not Path(path).exists():
            raise fail(f"--zoo {path}: no such agent directory; give RL Baselines3 Zoo agent directories")
        try:
            agents.append(qat_zoo.agent(path))
        except (
            FileNotFoundError, ValueError, sb3_zip.ZipLoadError, zoo_env.ZooConfigError,
            safe_pickle.UnsafePickleError,
        ) as e:  # fmt: skip
            raise fail(f"--zoo {path}: {e}") from None
    keys = [ag.key for ag in agents]
    if not agents or len(set(keys)) != len(keys):
        raise fail(f"--zoo {value!r}: give one directory per agent, each once (got {keys or 'none'})")
    return agents


def cmd_qat_study(a: argparse.Namespace) -> int:
    from actorq.studies import qat_study

    bits = [bit_width(b) for b in names(a.bits, [str(b) for b in qat_study.BITS], "--bits")]
    i, _, n = a.shard.partition("/")
    if not (i.isdigit() and n.isdigit() and int(i) < int(n)):
        raise fail(f"--shard {a.shard!r}: give i/n with 0 <= i < n, e.g. 0/2")
    schedule = a.schedule.replace("-", "_")
    if a.zoo and schedule != "finetune":
        raise fail("--zoo: a pretrained agent can only be fine-tuned; drop --schedule from-scratch")
    agents = _zoo_agents(a.zoo) if a.zoo else []
    pairs = (
        names(a.pairs or DEFAULT_PAIRS, tuple(qat_study.PAIRS), "--pairs") if a.pairs or not agents else []
    )
    threads(a.threads)
    shard = (int(i), int(n))
    written = []
    if pairs:
        written = qat_study.run_grid(a.out, pairs, bits, a.seeds, a.episodes, shard=shard, schedule=schedule)
    if agents:
        from actorq.studies import qat_zoo

        written += qat_zoo.run_zoo_grid(a.out, agents, bits, a.seeds, a.episodes, shard=shard)
    # The report (rliable intervals, Holm) lives in actorq.report, which studies may not import (README layers).
    print(f"wrote {len(written)} records under {a.out}/records; render them with `actorq qat-report {a.out}`")
    return 0


def _schedule_arg(parser: argparse.ArgumentParser, from_scratch: str) -> None:
    """``--schedule finetune|from-scratch`` (default finetune, the recipe); ``from_scratch`` says what the other does."""
    parser.add_argument(
        "--schedule", choices=["finetune", "from-scratch"], default="finetune",
        help="QAT schedule: fine-tune each seed's fp32 policy with fake quantization (the recipe, default), or "
        + from_scratch,
    )  # fmt: skip


def cmd_qat_report(a: argparse.Namespace) -> int:
    from actorq.studies import qat_md

    if not Path(a.dir).is_dir():
        raise fail(f"{a.dir}: no such study directory; give the --out of an `actorq qat-study`")
    pairs = [p for p in (a.pairs or "").split(",") if p] or None
    try:
        path = qat_md.render(a.dir, pairs, a.seeds)
    except ValueError as e:
        raise fail(e) from None
    print(f"report: {path}")
    return 0


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    """Register ``qat`` and ``qat-study``."""
    q = subparsers.add_parser("qat", help="quantization-aware training, compared with PTQ and fp32")
    q.add_argument("--algo", choices=ALGO_CHOICES, required=True, help="stable-baselines3 algorithm")
    q.add_argument("--env", required=True, help="gymnasium id to train on, e.g. CartPole-v1")
    q.add_argument("--bits", default="8", help="integer bit width or comma list, e.g. 8,6,4")
    _schedule_arg(q, "train from scratch with fake quantization from --quant-delay on")
    q.add_argument(
        "--quant-delay", type=non_negative_int, default=None,
        help="with --schedule from-scratch (required there): step at which fake quantization starts",
    )  # fmt: skip
    q.add_argument(
        "--finetune-steps", type=positive_int, default=None,
        help="with --schedule finetune: environment steps of the fake-quantized fine-tune (default: the "
        "recipe's, QatRecipe.finetune_steps)",
    )  # fmt: skip
    q.add_argument("--steps", type=positive_int, required=True, help="environment steps per training run")
    q.add_argument("--seeds", type=positive_int, default=3, help="independently trained policies per variant")
    q.add_argument("--episodes", type=positive_int, default=20, help="evaluation episodes per policy")
    q.add_argument("--threads", type=positive_int, default=1, help="torch threads")
    q.add_argument("--out", required=True, help="directory for the models, table and JSON")
    q.set_defaults(func=cmd_qat)

    qs = subparsers.add_parser(
        "qat-study", help="fp32 vs PTQ vs QAT to convergence (resumable grid; `actorq qat-report` renders it)"
    )
    qs.add_argument("--out", default="reports/studies/qat_convergence", help="records/ and report.md go here")
    qs.add_argument(
        "--pairs", default=None,
        help=f"comma list (default {DEFAULT_PAIRS}; with --zoo and no --pairs, only the zoo agents run)",
    )  # fmt: skip
    qs.add_argument(
        "--zoo", default=None, metavar="PATH[,PATH...]",
        help="pretrained RL Baselines3 Zoo agent directories to fine-tune with QAT (records/zoo_<algo>_<env>/; "
        "their fp32/PTQ seeds are evaluation replicates of the one policy, their QAT seeds training seeds)",
    )  # fmt: skip
    qs.add_argument("--bits", default="4,2,8,6,5,3", help="QAT/PTQ bit widths, in the order they are run")
    qs.add_argument("--seeds", type=positive_int, default=3, help="training seeds per cell")
    qs.add_argument("--episodes", type=positive_int, default=30, help="evaluation episodes per policy")
    qs.add_argument("--shard", default="0/1", help="i/n: run every n-th missing cell from the i-th")
    _schedule_arg(
        qs,
        "train from scratch with quant delay = half the steps (how reports/studies/qat_convergence was made)",
    )
    qs.add_argument("--threads", type=positive_int, default=1, help="torch threads")
    qs.set_defaults(func=cmd_qat_study)

    qat = subparsers.add_parser(
        "qat-report", help="QAT vs PTQ vs fp32 tables, claims and plots from an `actorq qat-study` directory"
    )
    qat.add_argument("dir", help="the study directory (records/ inside; report.md, summary.json go there)")
    qat.add_argument(
        "--pairs",
        default=None,
        help="comma list of pairs, in report order; listed pairs without records are left out "
        "(default: every pair with a record, sorted)",
    )
    qat.add_argument(
        "--seeds", type=int, default=None, help="seeds asked per cell (default: the most recorded)"
    )
    qat.set_defaults(func=cmd_qat_report)
