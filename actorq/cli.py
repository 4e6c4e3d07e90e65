"""The ``actorq`` command: train, role, bench and the QuaRL study subcommands.

Every subcommand validates its input before starting any process, and reports problems as one ``error:`` line
that says what is wrong and how to fix it (exit status 2).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from actorq.launchers import train
from actorq.launchers.train import cmd_train, resolve_train_config
from actorq.plan import cli as plan_cli
from actorq.roles import cli as role_cli
from actorq.roles.cli import cmd_role
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


# -- parser -------------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="actorq", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    train.add_parser(sub)
    role_cli.add_parser(sub)

    tasks = sub.add_parser(
        "tasks",
        help="list the installed tasks: dm_control's suite and Gymnasium's registry (with plugins' ids)",
    )
    tasks.set_defaults(func=cmd_tasks)

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
