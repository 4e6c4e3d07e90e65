"""How every ``actorq`` command line reports bad input: one ``error:`` line on stderr and exit status 2.

The top-level ``actorq`` command and the entry points launchers spawn by module name (``python -m actorq.roles``,
``python -m actorq.launchers.train``) share :func:`run_command`, so a role or a run started by a launcher reports
a bad config exactly as ``actorq`` does.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable

EXIT_USAGE = 2


def _int_at_least(text: str, low: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if value < low:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (argparse reports anything else as one ``error:`` line, exit 2)."""
    return _int_at_least(text, 1, "a positive integer")


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    return _int_at_least(text, 0, "an integer >= 0")


class CliError(Exception):
    """A user error: printed as ``error: ...`` with exit status 2."""


def run_command(
    parser: argparse.ArgumentParser, argv: list[str] | None, user_errors: tuple[type[BaseException], ...]
) -> int:
    """Parse ``argv`` with ``parser``, run the chosen ``func`` and return its exit status.

    ``key=value`` overrides may come after options too (argparse stops filling positionals at the first option).
    ``user_errors`` (and :class:`CliError`) are the user's mistakes: printed as one ``error:`` line, exit 2.
    """
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
    try:
        return int(args.func(args) or 0)
    except (CliError, *user_errors) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_USAGE


def module_main(
    add_arguments: Callable[[argparse.ArgumentParser], argparse.ArgumentParser],
    prog: str,
    description: str,
    argv: list[str] | None,
    user_errors: tuple[type[BaseException], ...],
) -> int:
    """``python -m MODULE``: one command's arguments on a parser of its own, run as :func:`run_command` does."""
    return run_command(
        add_arguments(argparse.ArgumentParser(prog=prog, description=description)), argv, user_errors
    )
