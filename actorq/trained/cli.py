"""``actorq evaluate`` and ``actorq export``: their arguments, registered without importing TensorFlow or torch
(the commands load them when they run)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from actorq.config import PRECISIONS
from actorq.trained import FORMATS
from actorq.usage import positive_int

DEFAULT_SEED = 1000
"""Episode ``j`` of ``actorq evaluate`` plays the environment seeded ``SEED + j``."""


def cmd_evaluate(args: argparse.Namespace) -> int:
    from actorq.envs.render import enable_rendering
    from actorq.trained.video import check_video_path
    from actorq.trained.weights import open_run

    video = check_video_path(args.video) if args.video else None
    config = open_run(
        args.run_dir
    )  # a missing or wrong RUN_DIR is one error line before anything heavy loads
    if video is not None:
        enable_rendering(config.env)  # before dm_control loads (checking the config's task loads it)
    from actorq.trained.evaluate import describe, evaluate
    from actorq.trained.weights import load_weights

    weights = load_weights(args.run_dir, args.checkpoint)
    result = evaluate(weights, args.precision, args.episodes, args.seed, video)
    _write_json(args.json, result)
    if args.json != "-":
        sys.stdout.write(describe(result))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from actorq.trained.weights import open_run

    open_run(args.run_dir)
    from actorq.trained.export import export
    from actorq.trained.weights import load_weights

    meta = export(load_weights(args.run_dir, args.checkpoint), args.precision, args.format, args.out)
    fidelity = meta["fidelity"]
    sys.stdout.write(
        f"{args.out}: {meta['precision']} {args.format} policy of {meta['algorithm']} "
        f"{meta['task']['suite']}:{meta['task']['task']} (learner step {meta['learner_step']}, kernel "
        f"{meta['kernel']}); against the learner's fp32 policy on {fidelity['probes']} probes: {fidelity['detail']}\n"
    )
    return 0


def _write_json(path: str | None, result: dict[str, Any]) -> None:
    if not path:
        return
    text = json.dumps(result, indent=1)
    if path == "-":
        sys.stdout.write(text + "\n")
    else:
        Path(path).write_text(text)


def _run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR", help="an `actorq train` run directory")
    parser.add_argument(
        "--checkpoint",
        type=int,
        metavar="N",
        help="the learner checkpoint ckpt-N under RUN_DIR/checkpoints/learner (default: the newest, the run's "
        "final weights)",
    )


def add_evaluate_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    _run_arguments(parser)
    parser.add_argument(
        "--precision",
        choices=(*PRECISIONS, "auto"),
        default="int8",
        help="the actors' precision to play at (auto: the fastest that verifies here; default int8)",
    )
    parser.add_argument("--episodes", type=positive_int, default=10, help="greedy episodes (default 10)")
    parser.add_argument(
        "--seed",
        type=int,
        default=DEFAULT_SEED,
        help=f"episode j's environment seed is SEED + j ({DEFAULT_SEED})",
    )
    parser.add_argument(
        "--video",
        metavar="PATH",
        help="record the first episode as an H.264 MP4 (headless; needs actorq[video])",
    )
    parser.add_argument(
        "--json", metavar="PATH", help="also write the figures as JSON (-: to stdout, instead)"
    )
    parser.set_defaults(func=cmd_evaluate)
    return parser


def add_export_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    _run_arguments(parser)
    parser.add_argument(
        "--precision", choices=PRECISIONS, default="int8", help="weights' precision (default int8)"
    )
    parser.add_argument("--format", choices=FORMATS, default="onnx", help="file format (default onnx)")
    parser.add_argument("--out", required=True, metavar="PATH", help="the file to write")
    parser.set_defaults(func=cmd_export)
    return parser


def add_subcommands(subparsers: Any) -> None:
    """Register ``evaluate`` and ``export`` on the top-level ``actorq`` subparsers."""
    add_evaluate_arguments(
        subparsers.add_parser(
            "evaluate",
            help="play a trained run's policy at a precision: return with its interval, agreement with fp32, video",
        )
    )
    add_export_arguments(
        subparsers.add_parser(
            "export",
            help="write a trained run's policy (fp32/fp16/int8) as ONNX, TorchScript or a state dict",
        )
    )
