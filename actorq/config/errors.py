"""The config layer's error, apart so that loading and validation both raise it without importing each other."""

from __future__ import annotations

from actorq.errors import UsageError


class ConfigError(UsageError):
    """A configuration file or override is invalid; the message says which key and what is allowed."""
