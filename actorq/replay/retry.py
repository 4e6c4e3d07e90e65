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
bug behind "replay is away". Anything not listed propagates.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

import reverb
import tensorflow as tf

from actorq.core import WeightsUnavailableError

log = logging.getLogger(__name__)

T = TypeVar("T")

# The gRPC codes of a server that is away (restarting, unreachable, shutting down), as TensorFlow raises them.
_TF_TRANSIENT = (
    tf.errors.UnavailableError,
    tf.errors.DeadlineExceededError,
    tf.errors.CancelledError,
    tf.errors.AbortedError,
)
REPLAY_ERRORS: tuple[type[BaseException], ...] = (
    reverb.errors.ReverbError,
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


class ReplayUnreachableError(ConnectionError):
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
