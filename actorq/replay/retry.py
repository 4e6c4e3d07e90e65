"""The one policy for replay calls that fail while replay restarts or its link is down: which errors count as
"replay is away", how long to back off, and how long an outage may last before the role gives up.

What Reverb 0.7.3 raises when its server is away, checked against a real server stopped, and stopped then
restarted on its port (``tests/unit/replay/test_retry.py`` keeps the check): a client call given a deadline
(``Client.server_info(timeout=)``, ``TrajectoryWriter.flush/end_episode(timeout_ms=)``) raises
``reverb.errors.DeadlineExceededError`` (a ``ReverbError``); a call without one blocks until the server is back; a
Reverb dataset (the learner's sampler) raises TensorFlow's ``tf.errors.OpError`` subclasses for the gRPC codes
below; Reverb's Python API never raises ``grpc.RpcError``. A plain ``RuntimeError`` is not an outage: Reverb's
pybind layer raises one for a bad request to a live server (sampling a table it does not have), and ActorQ's own
errors (kernel verification, the Acme surface check, CPU affinity) derive from it; retrying those would hide a
bug behind "replay is away". But the same pybind layer raises a plain ``RuntimeError`` carrying only a message when
the connection itself fails (seen while replay was killed: ``mutate_priorities`` -> "Connection reset by peer", the
weight publisher's insert -> "Error when confirming that all items written to table."), and the gRPC code is lost
on the way. :func:`replay_call` therefore reads a plain ``RuntimeError`` (never a subclass) raised inside the
``reverb`` package as the server being away, :class:`ReplayConnectionError`, unless its message says the request
itself was wrong (:data:`BAD_REQUEST`: a table that is not there, an invalid argument or signature), which
propagates. An error wrongly read as an outage still surfaces: the retry budget runs out and the role stops with it
as the cause. Anything not listed propagates.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import reverb
import tensorflow as tf

from actorq.core import WeightsUnavailableError
from actorq.errors import ActorQError, UnreachableError

log = logging.getLogger(__name__)

T = TypeVar("T")

# The gRPC codes of a server that is away (restarting, unreachable, shutting down), as TensorFlow raises them.
_TF_TRANSIENT = (
    tf.errors.UnavailableError,
    tf.errors.DeadlineExceededError,
    tf.errors.CancelledError,
    tf.errors.AbortedError,
)


class ReplayConnectionError(ActorQError, ConnectionError):
    """A Reverb client call whose connection to the server failed (raised by :func:`replay_call` from the plain
    ``RuntimeError`` Reverb's pybind layer gives it)."""


BAD_REQUEST = re.compile(r"not found|invalid|unknown|signature|shape|dtype|must be|expected", re.IGNORECASE)
"""Messages of a request a live server refused (gRPC's NOT_FOUND / INVALID_ARGUMENT family): a bug, not an outage."""

_REVERB_DIR = str(Path(reverb.__file__).resolve().parent)


def _raised_by_reverb(exc: BaseException) -> bool:
    """Whether ``exc`` was raised inside the ``reverb`` package (its innermost Python frame is one of its files)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and str(Path(tb.tb_frame.f_code.co_filename).resolve()).startswith(_REVERB_DIR)


@contextlib.contextmanager
def replay_call() -> Iterator[None]:
    """Around a Reverb client call: a plain ``RuntimeError`` raised by Reverb that is not a :data:`BAD_REQUEST`
    becomes :class:`ReplayConnectionError` (chained); every other error passes through unchanged."""
    try:
        yield
    except RuntimeError as exc:
        message = first_line(exc)
        if type(exc) is RuntimeError and _raised_by_reverb(exc) and not BAD_REQUEST.search(message):
            raise ReplayConnectionError(message) from exc
        raise


REPLAY_ERRORS: tuple[type[BaseException], ...] = (
    reverb.errors.ReverbError,
    ReplayConnectionError,
    *_TF_TRANSIENT,
    WeightsUnavailableError,  # our weight subscriber's own (its sample deadline, or one of the above)
)
"""What a replay call raises when the server is away; catch this tuple, never ``Exception``."""

BACKOFF_FIRST_S = 0.25
"""The wait after the first failure of an outage; doubled after each further one, up to ``BACKOFF_MAX_S``."""
BACKOFF_MAX_S = 5.0


def backoff_s(failures: int) -> float:
    """Seconds to wait after the ``failures``-th consecutive failure (1-based)."""
    return min(BACKOFF_FIRST_S * 2 ** max(failures - 1, 0), BACKOFF_MAX_S)


class ReplayUnreachableError(UnreachableError):
    """Replay did not answer within the retry budget."""


def first_line(exc: BaseException) -> str:
    """An exception's first message line (gRPC statuses carry long debug strings after it)."""
    return (str(exc).splitlines() or [""])[0]


class ReplayOutage:
    """A role's consecutive failed replay calls: logs the first of an outage, backs off, gives up after a budget.

    ``budget_s`` None: never give up (a role that can skip its work until replay is back).
    """

    def __init__(
        self,
        who: str,
        budget_s: float | None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.who = who
        self.budget_s = budget_s
        self.errors = 0  # every failed call of the role's life (its metrics' replay_errors)
        self.failures = 0  # consecutive, in the current outage
        self._since: float | None = None
        self._sleep, self._clock = sleep, clock

    def attempt(self, call: Callable[[], T], *, wait: bool = True) -> tuple[bool, T | None]:
        """``(True, call())``, or ``(False, None)`` after a replay error (recorded; backed off when ``wait``).

        Raises:
            ReplayUnreachableError: the outage has lasted longer than ``budget_s`` (chained to the last error).
        """
        try:
            with replay_call():
                value = call()
        except REPLAY_ERRORS as exc:
            self.failed(exc, wait=wait)
            return False, None
        self.succeeded()
        return True, value

    def succeeded(self) -> None:
        if self._since is not None:
            log.info("%s: replay answers again after %d failed calls", self.who, self.failures)
        self._since, self.failures = None, 0

    def failed(self, exc: BaseException, *, wait: bool = True) -> None:
        """Record one failed call: log it if it starts an outage, give up past the budget, else back off."""
        now = self._clock()
        if self._since is None:
            self._since = now
            log.warning(
                "%s: replay call failed (%s: %s); retrying", self.who, type(exc).__name__, first_line(exc)
            )
        self.errors += 1
        self.failures += 1
        if self.budget_s is not None and now - self._since > self.budget_s:
            raise ReplayUnreachableError(
                f"{self.who}: replay unreachable for {now - self._since:.0f}s ({self.failures} failed calls, "
                f"last {type(exc).__name__}: {first_line(exc)}); check that the replay role is running and "
                "reachable, then resume the run"
            ) from exc
        if wait:
            self._sleep(backoff_s(self.failures))
