"""The environment layer's errors: bad input, reported as one ``error:`` line (exit 2) before any process starts."""

from __future__ import annotations

from actorq.errors import UsageError


class UnknownTaskError(UsageError):
    """The task cannot be run: not registered, not importable, an unknown wrapper, or a space no algorithm (or not
    the config's algorithm) takes; the message says why and what would work."""


class UnsupportedSpaceError(UnknownTaskError):
    """A space no ActorQ algorithm takes, or one the config's algorithm does not; the message names the space and
    the algorithms that take it."""
