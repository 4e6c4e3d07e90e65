"""The ``actorq`` command: train, evaluate, export, role, bench and the QuaRL study subcommands.

Every subcommand validates its input before starting any process, and reports problems as one ``error:`` line
that says what is wrong and how to fix it (exit status 2).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

import actorq
from actorq.launchers import train
from actorq.launchers.train import cmd_train, resolve_train_config
from actorq.plan import cli as plan_cli
from actorq.roles import cli as role_cli
from actorq.roles.cli import cmd_role
from actorq.trained import cli as trained_cli
from actorq.usage import run_command

log = logging.getLogger("actorq")

__all__ = ["build_parser", "cmd_role", "cmd_train", "main", "resolve_train_config"]


# -- tasks --------------------------------------------------------------------------------------------------------
def cmd_tasks(_args: argparse.Namespace) -> int:
    """Every task installed: dm_control's suite and Gymnasium's registry (with the ids plugins register)."""
    from actorq.envs import algorithms_taking, dmc_tasks, gym_ids
    from actorq.envs.wrappers import describe

    ids, notes = gym_ids()
    out = [
        f"dmc: env.suite=dmc env.task=DOMAIN:TASK ({len(dmc_tasks())} tasks of dm_control's suite; Box actions: "
        f"{', '.join(algorithms_taking('continuous'))})"
    ]
    out += [f"  {t}" for t in dmc_tasks()]
    takers = f"Discrete actions: {', '.join(algorithms_taking('discrete'))}; Box actions: " + ", ".join(
        algorithms_taking("continuous")
    )
    out.append(
        f"gym: env.suite=gym env.task=ID ({len(ids)} ids in Gymnasium's registry), or module:Class for your own "
        f"environment; its spaces decide the algorithms ({takers})"
    )
    out += [f"  {t}" for t in ids]
    out += [f"  (not listed: {note})" for note in notes]
    out.append("env.wrappers (gym):")
    out += [f"  {line}" for line in describe()]
    sys.stdout.write("\n".join(out) + "\n")
    return 0


# -- config -------------------------------------------------------------------------------------------------------
def cmd_config(args: argparse.Namespace) -> int:
    """Print a config as a run resolves it (every default filled in), or the defaults alone (``--defaults``)."""
    from pathlib import Path

    import yaml

    from actorq.config import config_from_dict, load_config, schema_defaults, to_dict
    from actorq.errors import UsageError

    overrides = list(args.overrides or [])
    if args.config and "=" in args.config and not Path(args.config).exists():
        overrides.insert(
            0, args.config
        )  # `actorq config --defaults algorithm=dqn`: no CONFIG, only overrides
        args.config = None
    if args.defaults:
        if args.config:
            algorithm = load_config(_config_path(args.config)).algorithm
        else:
            algorithm = config_from_dict({}, [o for o in overrides if o.startswith("algorithm=")]).algorithm
        data = schema_defaults(algorithm)
    elif args.config:
        data = to_dict(load_config(_config_path(args.config), overrides))
    else:
        raise UsageError("config needs a CONFIG file or RUN_DIR (or --defaults [algorithm=NAME])")
    sys.stdout.write(yaml.safe_dump(data, sort_keys=False))
    return 0


def _config_path(path: str):
    """A config file, or a run directory's config.yaml (``actorq config RUN_DIR``)."""
    from pathlib import Path

    from actorq.errors import UsageError

    p = Path(path)
    if p.is_dir():
        if not (p / "config.yaml").is_file():
            raise UsageError(f"{p} is a directory without config.yaml: pass a config file or a run directory")
        return p / "config.yaml"
    return p


# -- parser -------------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="actorq", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"actorq {actorq.__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    train.add_parser(sub)
    role_cli.add_parser(sub)
    trained_cli.add_subcommands(sub)

    tasks = sub.add_parser(
        "tasks",
        help="list the installed tasks: dm_control's suite and Gymnasium's registry (with plugins' ids)",
    )
    tasks.set_defaults(func=cmd_tasks)

    config = sub.add_parser(
        "config",
        help="print a config resolved as a run would get it (every key, defaults filled in); docs/config.md lists "
        "the keys",
    )
    config.add_argument("config", nargs="?", help="YAML config or a run directory (its config.yaml)")
    config.add_argument("overrides", nargs="*", help="section.key=value overrides")
    config.add_argument(
        "--defaults",
        action="store_true",
        help="print the defaults alone (of CONFIG's algorithm, or algorithm=NAME given as an override)",
    )
    config.set_defaults(func=cmd_config)

    bench = sub.add_parser("bench", help="benchmarks")
    bench_sub = bench.add_subparsers(dest="bench", required=True)
    _add_optional(bench, bench_sub, "actorq.bench.policy", "add_parser")
    _add_optional(bench, bench_sub, "actorq.bench.signing", "add_parser")
    _add_optional(bench, bench_sub, "actorq.bench.actors", "add_parser")
    _add_optional(bench, bench_sub, "actorq.bench.learner", "add_parser")
    _add_optional(bench, bench_sub, "actorq.bench.replay", "add_parser")
    _add_optional(bench, bench_sub, "actorq.bench.comm", "add_parser")
    _add_optional(bench, bench_sub, "actorq.experiments.actor_probe", "add_parser")
    _add_optional(bench, bench_sub, "actorq.studies.cli", "add_bench_parser")
    _add_optional(parser, sub, "actorq.studies.cli", "add_subcommands")
    _add_optional(parser, sub, "actorq.report.cli", "add_subcommands")
    plan_cli.add_parser(sub)
    # The lab's commands (experiments of many runs, reports, studies): registered when the lab is installed.
    _add_optional(parser, sub, "actorq.experiments.experiment", "add_parser")
    _add_optional(parser, sub, "actorq.experiments.grid", "add_parser")
    _add_optional(parser, sub, "actorq.experiments.ablation", "add_parser")
    _add_optional(parser, sub, "actorq.experiments.acme_baseline", "add_parser")
    return parser


def _add_optional(owner: argparse.ArgumentParser, subparsers, module: str, function: str) -> None:
    """Register the subcommands ``module`` provides, unless a third-party package it needs is not installed.

    Such commands are left out with the reason at the end of ``owner``'s help (``actorq --help``, ``actorq bench
    --help``). A missing *internal* module (``actorq...``) is a bug and raises: it must never make a subcommand
    silently vanish.
    """
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if not missing or missing.split(".")[0] == "actorq":
            raise
        note = (
            f"unavailable: the subcommands of {module} need the package {missing!r}, which is not installed"
        )
        owner.epilog = f"{owner.epilog}; {note}" if owner.epilog else note
        return
    getattr(mod, function)(subparsers)


def main(argv: list[str] | None = None) -> int:
    """The ``actorq`` command; returns its exit status (2 and one ``error:`` line for bad input)."""
    return run_command(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
