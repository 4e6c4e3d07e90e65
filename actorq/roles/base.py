"""The role: ``step()`` does one unit of work, ``run(stop)`` loops; metrics rows, status records and the resume
record (on replay, and a local copy), on one period. A write to the role's disk that fails (a full disk) is warned
about once per outage and counted (``write_failures`` in its status record), and never stops the role."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from actorq.config import ExperimentConfig
from actorq.durable import WriteOutage
from actorq.metrics import MetricsWriter
from actorq.quantize.signing import WeightsKey
from actorq.roles.health import heartbeat
from actorq.status import RoleStatus, write_status
from actorq.timers import Periodic

if TYPE_CHECKING:  # importing replay loads Reverb and TensorFlow: not before a role has set their environment
    import numpy as np

    from actorq.replay.run_state import RunStateStore
    from actorq.replay.run_state_record import Schema
    from actorq.roles.resume_file import ResumeFile

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
    _resume_file: ResumeFile | None = None

    def __init__(self, config: ExperimentConfig, run_dir: str | Path, index: int | None = None):
        self.config = config
        self.run_dir = Path(run_dir)
        self.dir = role_dir(run_dir, self.name, index)
        self.metrics = MetricsWriter(self.dir)
        self._log_timer = Periodic(config.log_period_s)
        self.started = time.time()
        self._status_failures = 0
        self.disk = WriteOutage(f"{self.dir.name}'s files")
        """Failed writes of the role's own files beyond metrics and status (resume file, version records,
        checkpoints)."""

    @property
    def write_failures(self) -> int:
        """Writes to the role's disk that failed so far (metrics, status, resume file, checkpoints)."""
        return self.metrics.failures + self._status_failures + self.disk.failures

    @property
    def rejected_records(self) -> int:
        """Resume records on replay that this role refused at its start (forged, foreign, malformed)."""
        return self._run_state.rejected if self._run_state is not None else 0

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
            "write_failures": self.write_failures,
        }

    def open_run_state(
        self, client, weights_key: WeightsKey | None, budget_s: float
    ) -> dict[str, np.ndarray] | None:
        """This role's resume record: what an earlier process of the run left, on whichever host it ran (restart,
        resume), or None (a new run). Read from the replay server (``client``'s), where only a record that verifies
        under the run's key and keeps its bounds counts (a rejected one is logged and counted in
        :attr:`rejected_records`), and from the local copy in ``RUN_DIR/<label>/resume.json``; with both, the
        role's :meth:`merge_records` of the two. From here on :meth:`publish_status` stores :meth:`resume_values`
        in both places.

        Raises:
            RunStateError: Replay has no table for this role (started with another config).
            ReplayUnreachableError: Replay did not answer within ``budget_s``.
        """
        from actorq.replay.run_state import RunStateStore
        from actorq.replay.run_state_record import run_id_of
        from actorq.roles.resume_file import ResumeFile

        self._run_state = RunStateStore(client, self.dir.name, weights_key)
        self._resume_file = ResumeFile(self.dir, run_id_of(weights_key))
        on_replay = self._checked(self._run_state.resume(self.resume_schema, budget_s), "on replay")
        local = self._checked(self._resume_file.read(self.resume_schema), str(self._resume_file.path))
        if on_replay is None or local is None:
            return on_replay if local is None else local
        return self.merge_records(on_replay, local)

    def _checked(self, record: dict[str, np.ndarray] | None, where: str) -> dict[str, np.ndarray] | None:
        """``record`` when :meth:`check_record` accepts it, else None (logged; counted when it came from replay)."""
        from actorq.replay.run_state_record import RejectedRecordError

        if record is None:
            return None
        try:
            self.check_record(record)
        except RejectedRecordError as exc:
            if where == "on replay":
                self._run_state.rejected += 1
            log.error(
                "%s: rejected its resume record %s (%s); not resuming from it", self.dir.name, where, exc
            )
            return None
        return record

    def check_record(self, record: dict[str, np.ndarray]) -> None:
        """Checks of a resume record beyond its fields' bounds (roles override: how the fields relate, what the
        run could have made).

        Raises:
            RejectedRecordError: The record is not one this role could have written.
        """

    def merge_records(
        self, on_replay: dict[str, np.ndarray], local: dict[str, np.ndarray]
    ) -> dict[str, np.ndarray]:
        """One record from the replay server's and the local copy (both trusted): by default the larger value of
        each field (counters and floors only grow). Roles with other fields override."""
        return {name: max(on_replay[name], local[name]) for name in self.resume_schema}

    def resume_values(self) -> dict[str, np.ndarray]:
        """The fields of :attr:`resume_schema` now (roles that resume override)."""
        raise NotImplementedError

    def save_run_state(self) -> None:
        """Store :meth:`resume_values` on replay and in the local copy (once :meth:`open_run_state` ran; a failed
        write is logged and counted, never raised)."""
        if self._run_state is None:
            return
        values = self.resume_values()
        try:
            self._resume_file.write(values)
        except OSError as exc:
            self.disk.failed(exc, self._resume_file.path)
        else:
            self.disk.succeeded()
        self._run_state.write(values)

    def publish_status(self) -> None:
        """Replace ``status.json`` with :meth:`status_record` (what supervisors and people read) and store the resume
        record (what a restarted role reads, on any host)."""
        if not write_status(self.dir, self.status_record()):
            self._status_failures += 1
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
