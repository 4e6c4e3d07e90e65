"""Run state that survives a host: what a restarted role needs to resume, kept on the replay server.

A restarted actor, quantizer or evaluator may come back on another host (Ray restarting it on another node, a
KubeRay pod with an ``emptyDir`` run directory) where its old run directory is not. Its resume record (counters,
the weights-version floor, the evaluation history) therefore lives beside the experience, in a one-slot table per
role label (``run_state_<label>``) on the replay server every role already reaches. Reverb cannot look an item up by
key, hence one table per label rather than one keyed table. Reverb's checkpoints hold every table, so a run resumed
from the replay checkpoint resumes its roles' records too (as of that checkpoint, like its experience).

A record is one Reverb item of plain numpy columns, never a pickle, signed with the run's key and bounded
(:mod:`actorq.replay.run_state_record`). Reverb has no authentication: anyone who reaches the port can write these
tables, empty them (``reset``) and make the server checkpoint them. So a record that does not verify, is not this
role's layout, or holds a value out of range is rejected: logged, counted (:attr:`RunStateStore.rejected`), and
the role starts from what it can trust (its local copy, ``RUN_DIR/<label>/resume.json``, or afresh). Nothing a
client writes here makes a role raise.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping

import numpy as np
import reverb

from actorq.config import ExperimentConfig
from actorq.errors import ActorQError
from actorq.quantize.signing import WeightsKey
from actorq.replay.retry import REPLAY_ERRORS, ReplayConnectionError, ReplayOutage, first_line, replay_call
from actorq.replay.run_state_record import RejectedRecordError, Schema, decode, encode
from actorq.status import role_label

log = logging.getLogger(__name__)

TABLE_PREFIX = "run_state_"
"""Run-state tables are named ``run_state_<label>`` (word characters only, like every other table name)."""
RESUMING_ROLES = ("quantizer", "actor", "evaluator")
"""The roles that keep a resume record (the learner's step is in its own checkpoint; replay is the store)."""
WRITE_TIMEOUT_S = 1.0
"""How long a record write may wait for the server. A role writes at every report, and a stopping role's host
writes for a loop still blocked ``STOP_GRACE_S`` (4 s) after the stop, within ``STOP_DEADLINE_S`` (6 s): with
replay already gone (a launcher killed, every role stopping at once) the write costs this long, then gives up."""
READ_TIMEOUT_S = 5.0
"""How long one read attempt may wait for the server."""


class RunStateError(ActorQError, ValueError):
    """The replay server has no run-state table for this role (it was started with another config or version)."""


def run_state_table(label: str) -> str:
    """The table holding role ``label``'s record (``actor_0`` -> ``run_state_actor_0``)."""
    return TABLE_PREFIX + label


def run_state_labels(config: ExperimentConfig) -> list[str]:
    """The labels of the run's roles that keep a record (one table each on the replay server)."""
    labels = []
    for role in RESUMING_ROLES:
        if role == "actor":
            labels += [role_label(role, i) for i in range(config.actor.num_actors)]
        else:
            labels.append(role_label(role))
    return labels


class RunStateStore:
    """One role's record on the replay server: written whole (the newest replaces the last), read at start.

    Args:
        client: A client of the run's replay server.
        label: The role's label (``actor_0``, ``quantizer``, ``evaluator``).
        key: The run's weights key, which signs and verifies records; None in an unsigned run.
    """

    def __init__(self, client: reverb.Client, label: str, key: WeightsKey | None):
        self._client = client
        self.label = label
        self.table = run_state_table(label)
        self._key = key
        self._lock = threading.Lock()  # a stopping host's final write may overlap the loop's own
        self._failing = False
        self.rejected = 0
        """Records read and refused (forged, another run's or role's, malformed, out of range)."""

    def write(self, values: Mapping[str, np.ndarray]) -> bool:
        """Store ``values`` (within :data:`WRITE_TIMEOUT_S`); False when replay did not take it (logged once per
        outage: the next write tries again, and a role never stops over a record)."""
        columns = encode(self.label, self._key, values)
        with self._lock:
            try:
                with replay_call():
                    writer = self._client.trajectory_writer(num_keep_alive_refs=1)
                    try:
                        writer.append(columns)
                        writer.create_item(self.table, 1.0, [column[-1] for column in writer.history])
                        writer.flush(timeout_ms=int(WRITE_TIMEOUT_S * 1000))
                    finally:
                        writer.close()
            except REPLAY_ERRORS as exc:
                if not self._failing:
                    log.warning(
                        "%s: could not store its resume record on replay (%s: %s); retrying at the next report",
                        self.label,
                        type(exc).__name__,
                        first_line(exc),
                    )
                self._failing = True
                return False
        if self._failing:
            log.info("%s: resume record stored on replay again", self.label)
        self._failing = False
        return True

    def read(self, schema: Schema) -> dict[str, np.ndarray] | None:
        """The stored record, verified and bounded (:func:`~actorq.replay.run_state_record.decode`); None when
        there is none (a new run, an emptied table) or it was rejected (logged, counted in :attr:`rejected`).

        Raises:
            RunStateError: The server has no table for this label.
            ReplayConnectionError: A sample that did not complete in time (or another of ``REPLAY_ERRORS``).
        """
        with replay_call():
            info = self._client.server_info(timeout=int(READ_TIMEOUT_S))
        if self.table not in info:
            raise RunStateError(
                f"replay has no table {self.table} for {self.label}'s resume record: it was started with a config "
                "without this role (a lower actor.num_actors: give replay the actors' actor.num_actors) or by "
                "another ActorQ version; start replay with this run's config and version"
            )
        if int(info[self.table].current_size) == 0:
            return None
        try:
            return decode(self._sample(), self.label, self._key, schema)
        except RejectedRecordError as exc:
            self.rejected += 1
            log.error(
                "%s: rejected its resume record in replay table %s (%s: %s); starting from what it can trust "
                "(its local record, or afresh)",
                self.label,
                self.table,
                type(exc).__name__,
                exc,
            )
            return None

    def resume(self, schema: Schema, budget_s: float) -> dict[str, np.ndarray] | None:
        """:meth:`read`, retried with back-off while replay is away, for at most ``budget_s`` seconds.

        Raises:
            ReplayUnreachableError: Replay did not answer within the budget.
            RunStateError: As :meth:`read`.
        """
        outage = ReplayOutage(f"{self.label} resume record", budget_s=budget_s)
        while True:
            answered, record = outage.attempt(lambda: self.read(schema))
            if answered:
                if record is not None:
                    log.info("%s: resuming from its record on replay", self.label)
                return record

    def _sample(self) -> list[np.ndarray]:
        """Sample the record on a helper thread, waiting at most :data:`READ_TIMEOUT_S` (Reverb's sample has no
        deadline; a server gone between ``server_info`` and the sample would block the role's start)."""
        result: list = []
        done = threading.Event()

        def sample() -> None:
            try:
                with replay_call():
                    item = next(self._client.sample(self.table, num_samples=1, emit_timesteps=False))
                result.append(list(item.data) if isinstance(item.data, (list, tuple)) else item.data)
            except Exception as exc:  # noqa: BLE001  (thread boundary: handed to the caller, who raises it)
                result.append(exc)
            finally:
                done.set()

        threading.Thread(target=sample, name=f"read-{self.table}", daemon=True).start()
        if not done.wait(READ_TIMEOUT_S):
            raise ReplayConnectionError(f"reading {self.table} did not complete within {READ_TIMEOUT_S:.0f}s")
        if isinstance(result[0], BaseException):
            raise result[0]
        return result[0]
