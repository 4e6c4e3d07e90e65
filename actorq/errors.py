"""The one error root and the one table of exit statuses every ``actorq`` process ends with.

Every error ActorQ raises on purpose derives from :class:`ActorQError`, and its class says how a command ends on
it (:attr:`ActorQError.exit_code`): a user's mistake (bad config, unknown task, missing key or input file) is one
``error:`` line and :attr:`ExitCode.USAGE`, before any process starts; a peer that never answered (replay server,
Ray cluster) is one ``error:`` line and :attr:`ExitCode.UNREACHABLE`; anything else is a failure
(:attr:`ExitCode.FAILED`) with its traceback in the log. Each error also keeps the builtin base its callers catch
(``ValueError``, ``ConnectionError``, ...).
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """How an ``actorq`` command, a role process or a run ends (docs/failures.md has the table)."""

    OK = 0
    """Finished: the run reached its target or budget, the role was stopped, the command did its work."""
    FAILED = 1
    """A role or run failed (a crash, restarts used up, a stop deadline missed); the log has the traceback."""
    USAGE = 2
    """Bad input (config, flag, task, key, input file): one ``error:`` line; nothing was started."""
    UNREACHABLE = 3
    """A peer never answered within its deadline (the replay server, a Ray cluster): one ``error:`` line."""
    INTERRUPTED = 130
    """Stopped by Ctrl-C or SIGTERM (the shell's 128 + SIGINT)."""


class ActorQError(Exception):
    """The root of every error ActorQ raises on purpose; :attr:`exit_code` says how a command ends on it."""

    exit_code: ExitCode = ExitCode.FAILED


class UsageError(ActorQError, ValueError):
    """The user's input is wrong (config, flag, task, key, input path): printed as ``error: ...``, exit 2.

    The message says what is wrong and how to fix it.
    """

    exit_code = ExitCode.USAGE


class UnreachableError(ActorQError, ConnectionError):
    """A peer (replay server, Ray cluster) did not answer within its deadline: ``error: ...``, exit 3."""

    exit_code = ExitCode.UNREACHABLE


REPORTED = (ExitCode.USAGE, ExitCode.UNREACHABLE)
"""Exit statuses whose errors a command prints as one ``error:`` line (no traceback): the user can act on them."""
