"""The ``actorq`` command: train, role, bench and the QuaRL study subcommands.

Every subcommand validates its input before starting any process, and reports problems as one ``error:`` line
that says what is wrong and how to fix it (exit status 2).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

from actorq.config import COMM_BITS, LAUNCHERS, PRECISIONS, ConfigError, load_config, replace, save_config

log = logging.getLogger("actorq")

EXIT_USAGE = 2


class CliError(Exception):
    """A user error: printed as ``error: ...`` with exit status 2."""


# -- train --------------------------------------------------------------------------------------------------------
def _train_overrides(args: argparse.Namespace) -> dict:
    changes = {}
    if args.precision:
        changes["actor.precision"] = args.precision
    if args.comm_bits is not None:
        changes["quantizer.comm_bits"] = args.comm_bits
    if args.actors is not None:
        changes["actor.num_actors"] = args.actors
    if args.launcher:
        changes["launcher"] = args.launcher
    if args.max_minutes is not None:
        changes["max_minutes"] = args.max_minutes
    if args.max_actor_steps is not None:
        changes["max_actor_steps"] = args.max_actor_steps
    if args.target_return is not None:
        changes["target_return"] = args.target_return
    if args.seed is not None:
        changes["seed"] = args.seed
    return changes


def check_new_run_dir(run_dir: Path) -> None:
    """Refuse a run directory that already holds files: a new run would mix its metrics and checkpoints
    with another run's (and the learner would silently restore that run's checkpoint)."""
    try:
        entries = sorted(p.name for p in run_dir.iterdir()) if run_dir.is_dir() else []
    except (OSError, ValueError) as exc:
        raise CliError(f"--run-dir {run_dir} cannot be read ({exc}): pick another --run-dir") from None
    if run_dir.exists() and not run_dir.is_dir():
        raise CliError(f"--run-dir {run_dir} is a file, not a directory: pick a new --run-dir")
    if entries:
        shown = ", ".join(entries[:4]) + (", ..." if len(entries) > 4 else "")
        raise CliError(
            f"--run-dir {run_dir} is not empty (holds {shown}): continue that run with "
            f"'actorq train --resume {run_dir}', or pick a new or empty --run-dir (leave it out for a dated one)"
        )


def resolve_train_config(args: argparse.Namespace):
    """The config a train command means: file (or a resumed run's), ``key=value`` overrides, then flags."""
    from actorq.envs import validate_task

    if args.resume:
        run_dir = Path(args.resume)
        if args.run_dir and os.path.abspath(args.run_dir) != os.path.abspath(run_dir):
            raise CliError(
                f"--resume {run_dir} continues that run in its own directory, but --run-dir {args.run_dir} "
                f"names another: drop --run-dir, or pass --run-dir {run_dir}"
            )
        path = run_dir / "config.yaml"
        if not path.is_file():
            raise CliError(
                f"--resume {run_dir}: no config.yaml there; pass the RUN_DIR of an earlier actorq train"
            )
    else:
        if not args.config:
            raise CliError(
                "train needs a CONFIG file (e.g. configs/dqn/gym_cartpole.yaml) or --resume RUN_DIR"
            )
        path = Path(args.config)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        run_dir = Path(args.run_dir) if args.run_dir else Path("runs") / f"{path.stem}-{stamp}"
        check_new_run_dir(run_dir)
    config = load_config(path, args.overrides)
    config = replace(config, **_train_overrides(args))
    validate_task(config.env)
    return config, run_dir


def cmd_train(args: argparse.Namespace) -> int:
    config, run_dir = resolve_train_config(args)
    if config.launcher == "launchpad" and config.learner.jit_optimizer:
        # In Launchpad's node processes TF 2.8 cannot run an XLA-compiled function nested in the learner's step
        # ("Can't find a function ... _XlaMustCompile"); the local launcher runs the same roles without this.
        log.warning(
            "launchpad launcher: learner.jit_optimizer turned off (XLA nested in tf.function fails there)"
        )
        config = replace(config, **{"learner.jit_optimizer": False})
    run_dir.mkdir(parents=True, exist_ok=True)
    config_path = run_dir / "config.yaml"
    save_config(config, config_path)
    sys.stdout.write(f"run directory: {run_dir}\n")
    insecure = args.insecure_weights
    if config.launcher == "local":
        from launch.local import LocalLauncher

        return LocalLauncher(config, run_dir, config_path, quiet=args.quiet, insecure_weights=insecure).run()
    if config.launcher == "launchpad":
        from launch.launchpad_launcher import LaunchpadLauncher

        return LaunchpadLauncher(
            config, run_dir, config_path, quiet=args.quiet, insecure_weights=insecure
        ).run()
    from launch.inprocess import run_inprocess

    return run_inprocess(config, run_dir, quiet=args.quiet, insecure_weights=insecure)


# -- role ---------------------------------------------------------------------------------------------------------
def cmd_role(args: argparse.Namespace) -> int:
    from actorq.roles import main as role_main
    from actorq.roles.common import setup_logging
    from actorq.roles.weights_key import KEY_ROLES, WeightsKeyError, resolve_weights_key

    setup_logging(args.log_level)
    config = load_config(args.config, args.overrides)
    if args.role != "replay" and not args.replay_address:
        raise CliError(f"role {args.role} needs --replay-address HOST:PORT (the replay role's address)")
    key = None
    if args.role in KEY_ROLES:
        try:
            key = resolve_weights_key(args.run_dir, args.weights_key_file, args.insecure_weights)
        except WeightsKeyError as exc:
            raise CliError(str(exc)) from None
    code = role_main(
        args.role,
        config,
        args.run_dir,
        address=args.replay_address,
        index=args.index,
        port=args.port,
        connect_timeout_s=args.connect_timeout,
        weights_key=key,
        insecure_weights=args.insecure_weights,
    )
    # Everything the role owns is flushed by now. Skip interpreter teardown: Reverb/TF native threads can block
    # it (e.g. a writer still waiting on a rate limiter), and a role must exit promptly when asked to stop.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def cmd_tasks(_args: argparse.Namespace) -> int:
    from actorq.envs import GYM_TASKS, dmc_tasks

    sys.stdout.write("dmc (algorithm d4pg):\n  " + "\n  ".join(dmc_tasks()) + "\n")
    sys.stdout.write("gym:\n  " + "\n  ".join(f"{t} ({k})" for t, k in GYM_TASKS.items()) + "\n")
    return 0


# -- parser -------------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="actorq", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    train = sub.add_parser(
        "train", help="train with quantized actors (learner, quantizer, actors, evaluator)"
    )
    train.add_argument("config", nargs="?", help="YAML config, e.g. configs/d4pg/dmc_cartpole_balance.yaml")
    train.add_argument(
        "overrides", nargs="*", help="section.key=value overrides, e.g. learner.batch_size=128"
    )
    train.add_argument(
        "--precision",
        choices=(*PRECISIONS, "auto"),
        help="actor inference precision (auto: the fastest that verifies against fp32 on this machine)",
    )
    train.add_argument("--comm-bits", type=int, choices=COMM_BITS)
    train.add_argument("--actors", type=int)
    train.add_argument("--launcher", choices=LAUNCHERS)
    train.add_argument(
        "--run-dir", help="new or empty directory for the run (default runs/<config>-<date>-<time>)"
    )
    train.add_argument("--max-minutes", type=float)
    train.add_argument("--max-actor-steps", type=int)
    train.add_argument("--target-return", type=float)
    train.add_argument("--seed", type=int)
    train.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its last checkpoint")
    train.add_argument("--quiet", action="store_true", help="no live progress view")
    train.add_argument(
        "--insecure-weights",
        action="store_true",
        help="no weights key: unsigned weight messages, which anyone who reaches the replay port can forge",
    )
    train.set_defaults(func=cmd_train)

    role = sub.add_parser(
        "role", help="run one role process (how launchers, Docker and other hosts start roles)"
    )
    role.add_argument("role", choices=("replay", "learner", "quantizer", "actor", "evaluator"))
    role.add_argument("--config", required=True)
    role.add_argument("--run-dir", required=True)
    role.add_argument("--replay-address", help="HOST:PORT of the replay role")
    role.add_argument("--port", type=int, help="replay: port to serve on (default: config or a free one)")
    role.add_argument("--index", type=int, default=0, help="actor: its index (sets exploration and seed)")
    role.add_argument("--connect-timeout", type=float, default=60.0, help="seconds to retry reaching replay")
    role.add_argument(
        "--weights-key-file",
        metavar="PATH",
        help="the run's weights key (RUN_DIR/secrets/weights.key, or a Docker secret); default: "
        "$ACTORQ_WEIGHTS_KEY_FILE, else RUN_DIR/secrets/weights.key",
    )
    role.add_argument(
        "--insecure-weights",
        action="store_true",
        help="run without a key: sign nothing, accept unsigned weights (only on a network only you can reach)",
    )
    role.add_argument("--log-level", default="INFO")
    role.add_argument("overrides", nargs="*")
    role.set_defaults(func=cmd_role)

    tasks = sub.add_parser("tasks", help="list the tasks ActorQ can train on")
    tasks.set_defaults(func=cmd_tasks)

    bench = sub.add_parser("bench", help="benchmarks")
    bench_sub = bench.add_subparsers(dest="bench", required=True)
    _add_optional(bench_sub, "actorq.bench.policy", "add_parser")
    _add_optional(bench_sub, "actorq.bench.signing", "add_parser")
    _add_optional(bench_sub, "actorq.bench.actors", "add_parser")
    _add_optional(bench_sub, "actorq.bench.learner", "add_parser")
    _add_optional(bench_sub, "actorq.bench.ablation", "add_parser")
    _add_optional(bench_sub, "actorq.bench.acme_baseline", "add_parser")
    _add_optional(bench_sub, "actorq.studies.cli", "add_bench_parser")
    _add_optional(sub, "actorq.studies.cli", "add_subcommands")
    _add_optional(sub, "actorq.report.cli", "add_subcommands")
    _add_optional(sub, "launch.experiment", "add_parser")
    return parser


def _add_optional(subparsers, module: str, function: str) -> None:
    """Register subcommands a module provides (modules import their heavy dependencies lazily)."""
    import importlib

    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] in ("actorq", "launch"):
            return
        raise
    getattr(mod, function)(subparsers)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    # key=value overrides may come after options too (argparse stops filling positionals at the first option).
    args, extra = parser.parse_known_args(argv)
    if extra:
        if hasattr(args, "overrides") and all("=" in e and not e.startswith("-") for e in extra):
            args.overrides = list(args.overrides or []) + extra
        else:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s %(levelname).1s %(name)s: %(message)s", datefmt="%H:%M:%S"
        )
    from actorq.envs import UnknownTaskError
    from actorq.roles.weights_key import WeightsKeyError

    try:
        return int(args.func(args) or 0)
    except (ConfigError, UnknownTaskError, CliError, WeightsKeyError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
