"""What every ``actorq`` process shares: how it reports bad input, its exit statuses, log format and the
environment it gives the processes it starts.

Bad input is one ``error:`` line on stderr and exit status 2. The top-level ``actorq`` command and the entry points
launchers spawn by module name (``python -m actorq.roles``, ``python -m actorq.launchers.train``) share
:func:`run_command`, so a role or a run started by a launcher reports a bad config exactly as ``actorq`` does.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Mapping

from actorq.errors import REPORTED, ActorQError

LOG_FORMAT = "%(asctime)s %(levelname).1s [%(process)d %(name)s] %(message)s"
"""Every actorq process's log line: time, level, pid and logger (role logs of one run interleave by pid)."""
LOG_DATE_FORMAT = "%H:%M:%S"
NOISY_LOGGERS = ("absl", "tensorflow", "h5py", "matplotlib")
"""Libraries that are chatty at INFO; kept at WARNING so our own lines stay readable."""

CHILD_ENV: Mapping[str, str] = {
    "TF_CPP_MIN_LOG_LEVEL": "2",
    "PYTHONUNBUFFERED": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
"""What a process ActorQ starts (a role, a bench worker, a run) gets unless the user's environment says otherwise:
quiet TensorFlow start-up, unbuffered output (its log file is current), and one math-library thread (each process
is one of several on a small machine; a process that wants more threads sets its own pools)."""


def child_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with :data:`CHILD_ENV` filled in where it is unset."""
    env = dict(os.environ if base is None else base)
    for name, value in CHILD_ENV.items():
        env.setdefault(name, value)
    return env


def setup_logging(level: str = "INFO", handler: logging.Handler | None = None) -> None:
    """:data:`LOG_FORMAT` at ``level`` on stderr (or on ``handler``, added to the root logger), noisy libraries at
    WARNING."""
    root = logging.getLogger()
    if handler is not None:
        handler.setFormatter(logging.Formatter(LOG_FORMAT, datefmt=LOG_DATE_FORMAT))
        root.addHandler(handler)
    else:  # a no-op when the root logger has handlers already (e.g. run_command's): the level below still applies
        logging.basicConfig(format=LOG_FORMAT, datefmt=LOG_DATE_FORMAT)
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
    for noisy in NOISY_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.WARNING)


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


def run_command(parser: argparse.ArgumentParser, argv: list[str] | None) -> int:
    """Parse ``argv`` with ``parser``, run the chosen ``func`` and return its exit status.

    ``key=value`` overrides may come after options too (argparse stops filling positionals at the first option).
    An :class:`~actorq.errors.ActorQError` the user can act on (bad input, an unreachable peer) is printed as one
    ``error:`` line and ends the command with its exit status (2 or 3; :mod:`actorq.errors`).
    """
    args, extra = parser.parse_known_args(argv)
    if extra:
        if hasattr(args, "overrides") and all("=" in e and not e.startswith("-") for e in extra):
            args.overrides = list(args.overrides or []) + extra
        else:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if not logging.getLogger().handlers:
        setup_logging()
    try:
        return int(args.func(args) or 0)
    except ActorQError as exc:
        if exc.exit_code not in REPORTED:
            raise
        sys.stderr.write(f"error: {exc}\n")
        return int(exc.exit_code)


def module_main(
    add_arguments: Callable[[argparse.ArgumentParser], argparse.ArgumentParser],
    prog: str,
    description: str,
    argv: list[str] | None,
) -> int:
    """``python -m MODULE``: one command's arguments on a parser of its own, run as :func:`run_command` does."""
    return run_command(add_arguments(argparse.ArgumentParser(prog=prog, description=description)), argv)
