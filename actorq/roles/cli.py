"""``actorq role NAME`` (also ``python -m actorq.roles NAME``): run one role process.

This is how every launcher, Docker image and other host starts a role: the local launcher spawns
``python -m actorq.roles NAME --config ... --run-dir ... --replay-address HOST:PORT``, which is the same command
as ``actorq role NAME ...``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

from actorq.config import load_config
from actorq.config.shards import split_addresses
from actorq.errors import UsageError
from actorq.status import ROLE_NAMES
from actorq.usage import module_main, setup_logging


def cmd_role(args: argparse.Namespace) -> int:
    """Run the role until it is told to stop; ends the process with the role's exit status."""
    setup_logging(args.log_level)
    if args.role == "learner":  # before anything imports TensorFlow: its GPU libraries from the cu11 wheels
        from actorq.gpu import preload

        preload()
    from actorq.roles import main as role_main

    config = load_config(args.config, args.overrides)
    if args.role != "replay" and not args.replay_address:
        raise UsageError(f"role {args.role} needs --replay-address HOST:PORT (the replay role's address)")
    # A missing or bad weights key raises WeightsKeyError (a UsageError: an ``error:`` line, exit 2).
    code = role_main(
        args.role,
        config,
        args.run_dir,
        address=args.replay_address,
        index=args.index,
        port=args.port,
        connect_timeout_s=args.connect_timeout,
        key_file=args.weights_key_file,
        insecure_weights=args.insecure_weights,
        parent_pid=args.stop_with_parent,
    )
    # Everything the role owns is flushed by now. Skip interpreter teardown: Reverb/TF native threads can block
    # it (e.g. a writer still waiting on a rate limiter), and a role must exit promptly when asked to stop.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _replay_address(text: str) -> str:
    """``--replay-address`` checked before the role starts (argparse prints the reason and exits 2)."""
    try:
        split_addresses(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The role command's arguments (shared by ``actorq role`` and ``python -m actorq.roles``)."""
    parser.add_argument("role", choices=ROLE_NAMES, help="which process to run")
    parser.add_argument("--config", required=True, help="the run's YAML config (RUN_DIR/config.yaml)")
    parser.add_argument("--run-dir", required=True, help="the run's directory (metrics, checkpoints, key)")
    parser.add_argument(
        "--replay-address",
        type=_replay_address,
        help="HOST:PORT of the replay role (with replay.shards > 1: every shard's, comma-separated)",
    )
    parser.add_argument("--port", type=int, help="replay: port to serve on (default: config or a free one)")
    parser.add_argument(
        "--index",
        type=int,
        default=0,
        help="actor: its index (sets exploration, seed and replay shard); replay: its shard",
    )
    parser.add_argument(
        "--connect-timeout", type=float, default=60.0, help="seconds to retry reaching replay"
    )
    parser.add_argument(
        "--weights-key-file",
        metavar="PATH",
        help="the run's weights key (RUN_DIR/secrets/weights.key, or a Docker secret); default: "
        "$ACTORQ_WEIGHTS_KEY_FILE, else RUN_DIR/secrets/weights.key (actorq.weights_key.find_key_file)",
    )
    parser.add_argument(
        "--insecure-weights",
        action="store_true",
        help="run without a key: sign nothing, accept unsigned weights (only on a network only you can reach)",
    )
    parser.add_argument(
        "--stop-with-parent",
        type=int,
        metavar="PID",
        help="stop (as on SIGTERM) once process PID is no longer this role's parent; launchers pass their own "
        "pid, so a launcher killed with -9 leaves no role running",
    )
    parser.add_argument("--log-level", default="INFO", help="logging level (DEBUG, INFO, WARNING, ...)")
    parser.add_argument("overrides", nargs="*", help="section.key=value overrides of the config")
    parser.set_defaults(func=cmd_role)
    return parser


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``role`` on the top-level ``actorq`` subparsers."""
    return add_arguments(
        subparsers.add_parser(
            "role", help="run one role process (how launchers, Docker and other hosts start roles)"
        )
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m actorq.roles NAME ...``: the same command as ``actorq role NAME ...``."""
    return module_main(add_arguments, "python -m actorq.roles", __doc__.split("\n")[0], argv)
