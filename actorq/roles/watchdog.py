"""Reporting a blocking call (a rate-limited or unreachable replay server) while it is still blocked."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator

log = logging.getLogger(__name__)


class StallWatchdog:
    """Reports a call that blocks longer than ``timeout_s`` while it is still blocked (Reverb's rate limiter,
    a dead replay server or a cut link), instead of learning about it only once, and if, the call returns.

    Wrap the blocking call in :meth:`watch`; a daemon thread logs a warning once per stalled call and counts it.
    ``stalls`` and :meth:`take_longest` feed the role's metrics.
    """

    def __init__(self, what: str, timeout_s: float, poll_s: float = 0.5):
        self.what = what
        self.timeout_s = float(timeout_s)
        self.stalls = 0
        self._since: float | None = None
        self._reported = False
        self._longest = 0.0
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._loop, args=(poll_s,), name="stall-watchdog", daemon=True)
        self._thread.start()

    @contextlib.contextmanager
    def watch(self) -> Iterator[None]:
        """Time the enclosed call (not reentrant: one watched call at a time, on one thread)."""
        started = time.monotonic()
        self._since, self._reported = started, False
        try:
            yield
        finally:
            self._since = None
            took = time.monotonic() - started
            self._longest = max(self._longest, took)
            if self._reported:
                log.warning("%s unblocked after %.1fs", self.what, took)

    def take_longest(self) -> float:
        """The longest watched call (or the one still blocked) since the previous take, in seconds."""
        since = self._since
        longest = max(self._longest, time.monotonic() - since if since is not None else 0.0)
        self._longest = 0.0
        return longest

    def _loop(self, poll_s: float) -> None:
        while not self._closed.wait(poll_s):
            since = self._since
            if since is None or self._reported or time.monotonic() - since < self.timeout_s:
                continue
            self._reported = True
            self.stalls += 1
            log.warning(
                "%s blocked for more than %.0fs (replay.rate_limiter_timeout_s): replay unreachable or "
                "rate-limited; still waiting",
                self.what,
                self.timeout_s,
            )

    def close(self) -> None:
        self._closed.set()
