"""Connecting to a Reverb server with bounded retries and a clear error when it cannot be reached."""

from __future__ import annotations

import logging
import time

import reverb

from actorq.replay.retry import REPLAY_ERRORS, ReplayUnreachableError, backoff_s, first_line, replay_call

__all__ = ["ReplayUnreachableError", "new_client", "wait_for_server"]
log = logging.getLogger(__name__)


def wait_for_server(address: str, timeout_s: float = 60.0, attempt_timeout_s: int = 2) -> reverb.Client:
    """Return a client once ``address`` answers ``server_info``; retry with backoff until ``timeout_s``.

    Raises:
        ReplayUnreachableError: naming the address, how long was tried, and what to check.
    """
    if ":" not in address:
        raise ReplayUnreachableError(f"replay address {address!r} is not HOST:PORT (e.g. localhost:8000)")
    deadline = time.monotonic() + timeout_s
    attempts = 0
    last_error: Exception | None = None
    while True:
        attempts += 1
        try:
            with replay_call():
                client = reverb.Client(address)
                client.server_info(timeout=attempt_timeout_s)
            if attempts > 1:
                log.info("connected to replay at %s after %d attempts", address, attempts)
            return client
        except REPLAY_ERRORS as exc:  # DeadlineExceededError: server_info's timeout
            last_error = exc
        delay = backoff_s(attempts)
        if time.monotonic() + delay > deadline:
            raise ReplayUnreachableError(
                f"replay server at {address} did not answer after {attempts} attempts over {timeout_s:.0f}s "
                f"({type(last_error).__name__}: {first_line(last_error) if last_error else ''}). "
                "Check that the replay role is running and the address/port is reachable from this host."
            )
        time.sleep(delay)


def new_client(address: str) -> reverb.Client:
    """A plain Reverb client (no connectivity check); for callers outside this package that need one."""
    return reverb.Client(address)
