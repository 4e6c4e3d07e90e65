"""``actorq train`` (also ``python -m actorq.launchers.train``): resolve a run's config and start its launcher.

The config comes from a YAML file (or a resumed run's ``RUN_DIR/config.yaml``), then ``section.key=value``
overrides, then flags; it is validated before any process starts. The run directory must be new or empty (or the
resumed run's own). ``actorq experiment`` and ``actorq acme-baseline`` start each run as
``python -m actorq.launchers.train ...``, the same command as ``actorq train ...``.
"""

from __future__ import annotations

import argparse
import faulthandler
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from actorq.config import (
    COMM_BITS,
    LAUNCHERS,
    PRECISIONS,
    TRACKERS,
    ExperimentConfig,
    load_config,
    replace,
    save_config,
)
from actorq.config.flags import ConfigFlag, add_config_flags, flag_overrides
from actorq.errors import UsageError
from actorq.launchers.tracking import check_tracker
from actorq.usage import module_main

log = logging.getLogger(__name__)

RUN_EXIT_DEADLINE_S = 110.0
"""How long an ``actorq train`` process may take to end after its first SIGTERM or Ctrl-C before it dumps every
thread's stack to its log and exits (status 1), however stuck its main thread is
(:func:`actorq.roles.signals.exit_after_stop_signal`). Longer than the slowest orderly stop (in-process: 90 s),
shorter than an experiment's grace for a run it stops (``actorq.experiments.orchestration.RUN_STOP_GRACE_S``), so a
wedged run ends itself, with the stacks that say where, before it is
SIGKILLed (a SIGKILL leaves no trace of why)."""


TRAIN_FLAGS = (
    ConfigFlag("--precision", "actor.precision", choices=(*PRECISIONS, "auto")),
    ConfigFlag("--comm-bits", "quantizer.comm_bits", choices=(*COMM_BITS, 0)),  # 0: the precision's width
    ConfigFlag("--actors", "actor.num_actors"),
    ConfigFlag("--launcher", "launcher", choices=LAUNCHERS),
    ConfigFlag("--max-minutes", "max_minutes"),
    ConfigFlag("--max-actor-steps", "max_actor_steps"),
    ConfigFlag("--target-return", "target_return"),
    ConfigFlag("--seed", "seed"),
    ConfigFlag("--ray-address", "ray.address"),
    ConfigFlag("--ray-bind", "ray.bind"),
    ConfigFlag("--ray-connect-timeout-s", "ray.connect_timeout_s"),
    ConfigFlag("--track", "tracking.backend", choices=TRACKERS),
)
"""``actorq train``'s convenience flags: each sets one config key; type and help come from the config field."""


def check_new_run_dir(run_dir: Path) -> None:
    """Refuse a run directory that already holds files: a new run would mix its metrics and checkpoints
    with another run's (and the learner would silently restore that run's checkpoint)."""
    try:
        entries = sorted(p.name for p in run_dir.iterdir()) if run_dir.is_dir() else []
    except (OSError, ValueError) as exc:
        raise UsageError(f"--run-dir {run_dir} cannot be read ({exc}): pick another --run-dir") from None
    if run_dir.exists() and not run_dir.is_dir():
        raise UsageError(f"--run-dir {run_dir} is a file, not a directory: pick a new --run-dir")
    if entries:
        shown = ", ".join(entries[:4]) + (", ..." if len(entries) > 4 else "")
        raise UsageError(
            f"--run-dir {run_dir} is not empty (holds {shown}): continue that run with "
            f"'actorq train --resume {run_dir}', or pick a new or empty --run-dir (leave it out for a dated one)"
        )


def resolve_train_config(args: argparse.Namespace):
    """The config a train command means: file (or a resumed run's), ``key=value`` overrides, then flags."""
    from actorq.envs import check_task
    from actorq.roles.torso import run_torso

    if args.resume:
        run_dir = Path(args.resume)
        if args.run_dir and os.path.abspath(args.run_dir) != os.path.abspath(run_dir):
            raise UsageError(
                f"--resume {run_dir} continues that run in its own directory, but --run-dir {args.run_dir} "
                f"names another: drop --run-dir, or pass --run-dir {run_dir}"
            )
        path = run_dir / "config.yaml"
        if not path.is_file():
            raise UsageError(
                f"--resume {run_dir}: no config.yaml there; pass the RUN_DIR of an earlier actorq train"
            )
    else:
        if not args.config:
            raise UsageError(
                "train needs a CONFIG file (e.g. configs/dqn/gym_cartpole.yaml) or --resume RUN_DIR"
            )
        path = Path(args.config)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        run_dir = Path(args.run_dir) if args.run_dir else Path("runs") / f"{path.stem}-{stamp}"
        check_new_run_dir(run_dir)
    config = for_launcher(replace(load_config(path, args.overrides), **flag_overrides(args, TRAIN_FLAGS)))
    # The task's spaces, then network.torso on its observations: exit 2 before any process starts.
    run_torso(config, check_task(config))
    return config, run_dir


def for_launcher(config: ExperimentConfig) -> ExperimentConfig:
    """The config as its launcher can run it (what ``RUN_DIR/config.yaml`` holds)."""
    if config.launcher == "launchpad" and config.learner.jit_optimizer:
        # In Launchpad's node processes TF 2.8 cannot run an XLA-compiled function nested in the learner's step
        # ("Can't find a function ... _XlaMustCompile"); the local launcher runs the same roles without this.
        log.warning(
            "launchpad launcher: learner.jit_optimizer turned off (XLA nested in tf.function fails there)"
        )
        config = replace(config, **{"learner.jit_optimizer": False})
    return config


def planned_config(argv: list[str]) -> ExperimentConfig:
    """The config ``actorq train ARGV`` (a new run, not ``--resume``) would run and save, touching no run directory
    (``actorq experiment`` compares it with the configs of runs it would otherwise skip as finished)."""
    args = add_arguments(argparse.ArgumentParser()).parse_args(argv)
    return for_launcher(
        replace(load_config(args.config, args.overrides), **flag_overrides(args, TRAIN_FLAGS))
    )


def cmd_train(args: argparse.Namespace) -> int:
    """Resolve and save the config, then run the configured launcher; returns its exit status."""
    config, run_dir = resolve_train_config(args)
    check_cluster(config)
    check_tracker(config)
    run_dir.mkdir(parents=True, exist_ok=True)
    config_path = run_dir / "config.yaml"
    save_config(config, config_path)
    sys.stdout.write(f"run directory: {run_dir}\n")
    if args.weights_key_file and args.insecure_weights:
        raise UsageError("--weights-key-file and --insecure-weights contradict each other: pass one of them")
    from actorq.roles.signals import exit_after_stop_signal, stop_with_parent

    # A run asked to stop ends within the deadline even if it is stuck where no Python handler runs; and
    # `kill -USR1 <pid>` prints every thread's stack to its log (a C handler: works in a stuck process too).
    exit_after_stop_signal(RUN_EXIT_DEADLINE_S)
    # The process's own stderr (fd 2), not sys.stderr: a caller may have replaced that with an object with no fd
    # (pytest's capture when a test calls the CLI in-process), and faulthandler's C handler needs one.
    faulthandler.register(signal.SIGUSR1, file=sys.__stderr__, all_threads=True)
    if args.stop_with_parent is not None:
        stop_with_parent(args.stop_with_parent, parent="parent process", this="run")
    return launch(
        config,
        run_dir,
        config_path,
        quiet=args.quiet,
        insecure_weights=args.insecure_weights,
        weights_key_file=args.weights_key_file,
    )


def check_cluster(config: ExperimentConfig) -> None:
    """A Ray cluster the run would join answers within ``ray.connect_timeout_s``, before anything is made or
    started (else an ``error:`` line naming the cause, exit 2); nothing to check for the other launchers."""
    if config.launcher != "ray":
        return
    from actorq.launchers.ray_connect import import_ray, join_address, probe_cluster

    address = join_address(config.ray.address)
    if address:  # RayLauncherError is a UsageError: the user's address or install
        import_ray()
        probe_cluster(address, config.ray.connect_timeout_s)


PLACEMENTS = {
    "local": ("actorq.launchers.local", "LocalPlacement"),
    "launchpad": ("actorq.launchers.launchpad_launcher", "LaunchpadPlacement"),
    "inprocess": ("actorq.launchers.inprocess", "InProcessPlacement"),
    "ray": ("actorq.launchers.ray_placement", "RayPlacement"),
}
"""Where each ``config.launcher`` runs the roles: module and Placement class (imported only when used)."""


def launch(
    config: ExperimentConfig,
    run_dir: Path,
    config_path: Path | None = None,
    *,
    quiet: bool = False,
    insecure_weights: bool = False,
    weights_key_file: str | Path | None = None,
    poll_s: float | None = None,
) -> int:
    """Run the experiment with the supervisor on the config's placement; returns the exit status.

    The one way into a run (``actorq train``, ``run_inprocess``): the config is made runnable by its launcher
    (:func:`for_launcher`) and its task checked here too (made once, its spaces against the algorithm), and saved to ``RUN_DIR/config.yaml`` when ``config_path``
    is None (the roles load it).
    """
    import importlib

    from actorq.envs import check_task
    from actorq.launchers.supervisor import Supervisor, run_context
    from actorq.roles.torso import run_torso

    config = for_launcher(config)
    run_torso(config, check_task(config))  # made once per process: free after resolve_train_config's
    run_dir = Path(run_dir)
    if config_path is None:
        run_dir.mkdir(parents=True, exist_ok=True)
        config_path = run_dir / "config.yaml"
        save_config(config, config_path)
    module, cls = PLACEMENTS[config.launcher]
    placement = getattr(importlib.import_module(module), cls)
    ctx = run_context(
        config,
        run_dir,
        config_path,
        quiet=quiet,
        insecure_weights=insecure_weights,
        weights_key_file=weights_key_file,
    )
    supervisor = Supervisor(placement(ctx)) if poll_s is None else Supervisor(placement(ctx), poll_s=poll_s)
    return supervisor.run()


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The train command's arguments (shared by ``actorq train`` and ``python -m actorq.launchers.train``)."""
    parser.add_argument("config", nargs="?", help="YAML config, e.g. configs/d4pg/dmc_cartpole_balance.yaml")
    parser.add_argument(
        "overrides", nargs="*", help="section.key=value overrides, e.g. learner.batch_size=128"
    )
    add_config_flags(parser, TRAIN_FLAGS)
    parser.add_argument(
        "--run-dir", help="new or empty directory for the run (default runs/<config>-<date>-<time>)"
    )
    parser.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its last checkpoint")
    parser.add_argument("--quiet", action="store_true", help="no live progress view")
    parser.add_argument(
        "--weights-key-file",
        metavar="PATH",
        help="sign weights with this existing key (e.g. a mounted Kubernetes Secret) instead of creating "
        "RUN_DIR/secrets/weights.key; every role must read the same key",
    )
    parser.add_argument(
        "--insecure-weights",
        action="store_true",
        help="no weights key: unsigned weight messages, which anyone who reaches the replay port can forge",
    )
    parser.add_argument(
        "--stop-with-parent",
        type=int,
        metavar="PID",
        help="stop the run (as on SIGTERM) once process PID is no longer this one's parent; `actorq experiment` "
        "passes its own pid, so an experiment killed with -9 leaves no run going on",
    )
    parser.set_defaults(func=cmd_train)
    return parser


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``train`` on the top-level ``actorq`` subparsers."""
    return add_arguments(
        subparsers.add_parser(
            "train", help="train with quantized actors (learner, quantizer, actors, evaluator)"
        )
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m actorq.launchers.train ...``: the same command as ``actorq train ...``."""
    return module_main(add_arguments, "python -m actorq.launchers.train", __doc__.split("\n")[0], argv)


if __name__ == "__main__":
    sys.exit(main())
