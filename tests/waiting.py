"""Waiting on a condition with a deadline: what every test uses instead of a sleep to let something happen."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_until(predicate: Callable[[], Any], timeout_s: float, what: str, poll_s: float = 0.25) -> Any:
    """Poll ``predicate`` until it returns something truthy, and return that value.

    Args:
        predicate: Called every ``poll_s`` seconds; its first truthy result ends the wait.
        timeout_s: Seconds to wait before failing the test.
        what: What is awaited, for the failure message ("the learner's first checkpoint").
        poll_s: Seconds between calls.

    Raises:
        AssertionError: ``predicate`` stayed falsy for ``timeout_s`` seconds.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:g}s waiting for {what}")
        time.sleep(poll_s)
