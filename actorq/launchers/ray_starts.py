"""Restart counts under Ray from the roles' own records: every start of a role actor (the first, and each restart
Ray makes under ``max_restarts``) records itself in one small :class:`StartLog` actor the placement makes on the
driver's node before any role; restarts = starts - 1.

Ray 2.48's public way to read an actor's ``num_restarts`` (``ray.util.state``) goes through the dashboard, which a
run's local cluster leaves off and the pinned ``ray`` (without ``[default]``) cannot run; its GCS actor table is
private (``ray._private.state``). A start records itself first thing in the role actor's constructor, so a restart
that dies while building its role still counts. When the log cannot be read the count is unknown, and the
placement says so (summary.json ``ray.restarts_unknown``) instead of reading it as 0.

This module imports no Ray at import time (Ray loads it in its workers).
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

log = logging.getLogger(__name__)

POLL_S = 1.0
"""How often the driver reads the log (restart counts)."""
READ_TIMEOUT_S = 10.0
"""How long one read of the log may take before the counts are reported unknown."""
START_LOG_NAME = "actorq-start-log"
"""Name of the run's :class:`StartLog` actor, in the run's own Ray namespace (one per driver)."""


class StartLog:
    """Starts of each role actor, by label; ``ray.remote(...)`` is applied by the placement."""

    def __init__(self) -> None:
        self.starts: dict[str, list[int]] = {}

    def started(self, label: str, pid: int) -> None:
        """One more start of ``label`` (in worker ``pid``)."""
        self.starts.setdefault(label, []).append(pid)

    def counts(self) -> dict[str, int]:
        """Starts recorded so far, by label."""
        return {label: len(pids) for label, pids in self.starts.items()}


def record_start(label: str) -> None:
    """Record this start of ``label`` in the run's start log (called in a role actor's constructor). A log that
    cannot be reached is logged, not raised: the role runs, and the placement reports its count as unknown."""
    import ray

    try:
        ray.get(ray.get_actor(START_LOG_NAME).started.remote(label, os.getpid()), timeout=10.0)
    except Exception as exc:  # no log (an older placement), or its node is gone: the count becomes unknown
        log.warning("could not record this start of %s in the run's start log: %s", label, exc)


def make_start_log(ray: Any) -> Any:
    """The run's start log, on the driver's node so it outlives any other node, never restarted (a restart would
    forget the counts)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    node = ray.get_runtime_context().get_node_id()
    return (
        ray.remote(StartLog)
        .options(
            name=START_LOG_NAME,
            num_cpus=0,
            max_restarts=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node, soft=False),
        )
        .remote()
    )


class StartCounts:
    """The driver's side: makes the run's :class:`StartLog` and reads restart counts from it."""

    def __init__(
        self, ray: Any, poll_s: float = POLL_S, timeout_s: float = READ_TIMEOUT_S, handle: Any = None
    ):
        self.ray = ray
        self.poll_s = poll_s
        self.timeout_s = timeout_s
        self.handle = handle if handle is not None else make_start_log(ray)
        self.counts: dict[str, int] = {}
        self.unknown = ""
        """Why the log could not be read last time ("" when it could): the counts are then unknown, not 0."""
        self._read_at = float("-inf")

    def restarts(self, label: str, poll: bool = True) -> int:
        """Restarts of ``label`` the log holds (read again when ``poll`` and ``poll_s`` passed since the last)."""
        if poll and time.monotonic() - self._read_at >= self.poll_s:
            self.read()
        return max(self.counts.get(label, 0) - 1, 0)

    def read(self) -> None:
        """Read the log now (on failure keep the last counts and set :attr:`unknown`)."""
        self._read_at = time.monotonic()
        try:
            self.counts = dict(self.ray.get(self.handle.counts.remote(), timeout=self.timeout_s))
        except Exception as exc:  # its node is gone, or it is stuck: unknown, never read as 0
            if not self.unknown:
                log.warning("the roles' start log cannot be read (%s): restart counts are unknown", exc)
            self.unknown = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"
            return
        self.unknown = ""

    def close(self) -> None:
        """Read the last counts, then kill the log."""
        self.read()
        try:
            self.ray.kill(self.handle, no_restart=True)
        except Exception as exc:  # already gone, or the cluster went away
            log.debug("ray.kill start log: %s", exc)
