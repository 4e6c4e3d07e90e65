"""The role: ``step()`` does one unit of work, ``run(stop)`` loops; metrics rows, status records and the resume
record on replay, on one period."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from actorq.config import ExperimentConfig
from actorq.metrics import MetricsWriter
from actorq.quantize.signing import WeightsKey
from actorq.roles.health import heartbeat
from actorq.status import RoleStatus, write_status
from actorq.timers import Periodic

if TYPE_CHECKING:  # importing replay loads Reverb and TensorFlow: not before a role has set their environment
    import numpy as np

    from actorq.replay.run_state import RunStateStore, Schema

log = logging.getLogger(__name__)


def role_dir(run_dir: str | Path, role: str, index: int | None = None) -> Path:
    """``RUN_DIR/<role>`` or ``RUN_DIR/<role>_<index>`` (created)."""
    path = Path(run_dir) / (role if index is None else f"{role}_{index}")
    path.mkdir(parents=True, exist_ok=True)
    return path


class RoleBase:
    """A role: ``step()`` does one unit of work, ``run(stop)`` loops until ``stop`` is set."""

    name = "role"
    own_process = False
    """True when this role is alone in its process (set by :class:`actorq.roles.host.RoleHost`)."""
    resume_schema: Schema = {}  # noqa: RUF012  (read-only: roles replace it, never mutate it)
    """The fields of the role's resume record (:mod:`actorq.replay.run_state`); empty for roles that keep none."""
    _run_state: RunStateStore | None = None

    def __init__(self, config: ExperimentConfig, run_dir: str | Path, index: int | None = None):
        self.config = config
        self.run_dir = Path(run_dir)
        self.dir = role_dir(run_dir, self.name, index)
        self.metrics = MetricsWriter(self.dir)
        self._log_timer = Periodic(config.log_period_s)
        self.started = time.time()

    def step(self) -> None:
        raise NotImplementedError

    def write_metrics(self) -> None:
        """Write one metrics row (roles override)."""

    def status_record(self) -> RoleStatus:
        """The role's typed progress record (roles override)."""
        raise NotImplementedError

    def status_fields(self) -> dict:
        """The fields every record carries (role, label, start time, this process's CPU seconds when it owns it)."""
        return {
            "role": self.name,
            "label": self.dir.name,
            "started": self.started,
            "cpu_s": time.process_time() if self.own_process else None,
        }

    def open_run_state(
        self, client, weights_key: WeightsKey | None, budget_s: float
    ) -> dict[str, np.ndarray] | None:
        """Find this role's resume record on the replay server (``client``'s): what an earlier process of the run
        left, on whichever host it ran (restart, resume), or None (a new run). From here on :meth:`publish_status`
        stores :meth:`resume_values` there too.

        Raises:
            RunStateError: A record that is not this role's kind (another ActorQ version wrote it).
            ReplayUnreachableError: Replay did not answer within ``budget_s``.
        """
        from actorq.replay.run_state import RunStateStore

        self._run_state = RunStateStore(client, self.dir.name, weights_key.run_id_hex if weights_key else "")
        return self._run_state.resume(self.resume_schema, budget_s)

    def resume_values(self) -> dict[str, np.ndarray]:
        """The fields of :attr:`resume_schema` now (roles that resume override)."""
        raise NotImplementedError

    def save_run_state(self) -> None:
        """Store :meth:`resume_values` on replay (once :meth:`open_run_state` ran; a failed write is logged)."""
        if self._run_state is not None:
            self._run_state.write(self.resume_values())

    def publish_status(self) -> None:
        """Replace ``status.json`` with :meth:`status_record` (what supervisors and people read) and store the resume
        record on replay (what a restarted role reads, on any host)."""
        write_status(self.dir, self.status_record())
        self.save_run_state()

    def report(self) -> None:
        """One metrics row (for people), the status record (for the supervisor) and, in a container, the heartbeat
        its health check reads."""
        self.write_metrics()
        self.publish_status()
        heartbeat(self.name, self.config.log_period_s, self.health_port())

    def health_port(self) -> int | None:
        """The port a container health check must find open (replay's); None for roles that serve nothing."""
        return None

    def run(self, stop: threading.Event) -> None:
        try:
            heartbeat(self.name, self.config.log_period_s, self.health_port())
            while not stop.is_set():
                self.step()
                if self._log_timer.due():
                    self.report()
        finally:
            self.report()
            self.close()

    def close(self) -> None:
        self.metrics.close()
